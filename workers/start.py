"""`python -m workers.start`: a Celery worker of the gamebatch app, started without Celery's
command line, whose imports alone (click, its REPL and every sub-command) took 0.5 s here.
The local and supervised workers run this; `celery -A workers worker` works as well."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """Run one worker until it is told to stop; its exit status."""
    parser = argparse.ArgumentParser(prog="python -m workers.start", description=__doc__)
    parser.add_argument("--concurrency", type=int, required=True, help="pool processes")
    parser.add_argument("--hostname", required=True, help="the node name (%%h: this host)")
    parser.add_argument("--loglevel", default="INFO")
    parser.add_argument("--task-events", action="store_true", help="for Flower and events")
    args = parser.parse_args(argv)
    from celery.utils.nodenames import default_nodename, host_format

    from workers.celery_app import default_app

    worker = default_app().Worker(
        hostname=host_format(default_nodename(args.hostname)),
        pool_cls="prefork",
        loglevel=args.loglevel,
        concurrency=args.concurrency,
        without_gossip=True,
        without_mingle=True,
        task_events=args.task_events,
    )
    worker.start()
    return int(worker.exitcode or 0)


if __name__ == "__main__":
    sys.exit(main())
