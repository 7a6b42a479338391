"""The `gamebatch` command: run by the warm local service when one answers, else here (only
the standard library is loaded before that is known); and the warm service's own start."""

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


def warm_service(folder: str, seconds: str) -> int:
    """`python -m pipeline.launch --warm-service FOLDER SECONDS` (local/warm.py starts it):
    the warm service, running each command it is sent with this command line."""
    from pathlib import Path

    from pipeline import cli
    from pipeline.local.warm_service import serve

    serve(Path(folder), float(seconds), cli.main, cli.preload)
    return 0


if __name__ == "__main__":
    from pipeline.local.warm import WARM_SERVICE

    if sys.argv[1:2] == [WARM_SERVICE]:
        sys.exit(warm_service(*sys.argv[2:4]))
    sys.exit(main())
