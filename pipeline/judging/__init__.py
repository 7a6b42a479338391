"""Judging programs: the sandbox (bubblewrap, limits, the seccomp wall), per-case verdicts
from runs over batches of cases, and contestants' programs found, keyed and cut into the
judging chunks the workers run.

Imports: grading, data, games, config, ground.
"""
