"""Grading: the rules (verdicts, scoring, standings), outputs compared with answers as chunks
on the workers, compact verdicts and their store, the tests and outputs layout, expected
answers, a grading's run and its report files, scoring files and reports. Running
contestants' programs is `pipeline.judging`'s, above it.

Imports: data, store, games, config, ground.
"""
