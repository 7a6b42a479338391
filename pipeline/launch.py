"""The `gamebatch` command: run by the warm local service when one answers, else here (only
the standard library is loaded before that is known)."""

from __future__ import annotations

import sys

from pipeline.exiting import LONG_RUNNING, begin, leave


def main() -> int:
    """Entry point of the `gamebatch` console script."""
    from pipeline.local import warm

    status = warm.run(sys.argv[1:])
    if status is None:
        begin(sys.argv[1:])
        from pipeline.cli import main as run_here

        status = run_here()
        if not any(arg in LONG_RUNNING for arg in sys.argv[1:]):
            leave(status)
    return status


if __name__ == "__main__":
    sys.exit(main())
