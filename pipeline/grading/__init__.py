"""Grading: the rules (verdicts, scoring, standings), outputs compared with answers as chunks
on the workers, compact verdicts and their store, the tests and outputs layout, scoring files
and reports. Imports data, store, games and the ground modules; running contestants'
programs is `pipeline.judging`'s, above it."""
