"""The `gamebatch` command: run by the warm local service when one answers, else here (only
the standard library is loaded before that is known)."""

from __future__ import annotations

import atexit
import os
import sys

LONG_RUNNING = ("worker", "serve")  # commands that end as Python normally does


def main() -> int:
    """Entry point of the `gamebatch` console script."""
    from pipeline.local import warm

    status = warm.run(sys.argv[1:])
    if status is None:
        from pipeline.cli import main as run_here

        status = run_here()
        if not any(arg in LONG_RUNNING for arg in sys.argv[1:]):
            leave(status)
    return status


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


if __name__ == "__main__":
    sys.exit(main())
