"""Judging programs: the sandbox (bubblewrap, limits, the seccomp wall), per-case verdicts
from runs over batches of cases, and the judge service that compiles programs and queues
their runs. Imports grading, local, data, store, games and the ground modules."""
