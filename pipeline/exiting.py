"""How a finished command ends its process: at once, its work done (standard library only:
the `gamebatch` launcher imports it before anything else)."""

from __future__ import annotations

import atexit
import os
import sys

LONG_RUNNING = ("worker", "serve")  # commands that end as Python normally does


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
