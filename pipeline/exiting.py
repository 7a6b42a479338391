"""How a command's process starts and ends: collecting less while it loads, and leaving at
once when its work is done (standard library only: the `gamebatch` launcher imports it before
anything else)."""

from __future__ import annotations

import atexit
import gc
import os
import sys
from collections.abc import Sequence

LONG_RUNNING = ("worker", "serve")  # commands that end as Python normally does
# A command allocates a few hundred thousand objects while it imports its modules and frees
# few: the collector's passes over the youngest ones every 700 allocations cost 8-10 ms of a
# 0.13 s one-case `solve`. The other commands look for cycles every 100,000 allocations
# instead (a long solve still collects them; its bytes go through C, not Python objects).
SHORT_COMMAND_COLLECTION = 100_000


def begin(argv: Sequence[str]) -> None:
    """Set the process up for the command of `argv` (long-running ones keep the defaults)."""
    if not any(arg in LONG_RUNNING for arg in argv):
        gc.set_threshold(SHORT_COMMAND_COLLECTION)


def leave(status: int) -> None:
    """End a command that is done: its children are stopped and its files closed by then, so
    the exit handlers run and the standard streams are flushed, but the interpreter is not
    torn down (finalizing the few hundred modules a command loads took 60-90 ms, a quarter
    of a one-case `solve`)."""
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError):  # a reader that left; a closed stream
            status = status or 1
    os._exit(status)
