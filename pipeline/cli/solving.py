"""`solve`, `submit`, `collect`, `status` and `cancel`: arguments into requests, results printed."""

from __future__ import annotations

import json
from typing import Any

from pipeline.app.collect import CollectRequest
from pipeline.app.jobs import SubmitRequest
from pipeline.app.solve import SolveRequest
from pipeline.cli.front import Front, err
from pipeline.cli.parser import RECENT_FINISHED
from pipeline.games.registry import get_problem
from pipeline.jobs.view import status_lines
from pipeline.store.jobstate import FINISHED


def solve(front: Front) -> int:
    args = front.args
    request = SolveRequest(
        get_problem(args.problem),
        args.inputs,
        args.output,
        args.out_dir,
        keep_going=args.keep_going,
        lane=args.lane,
        quiet=args.quiet,
    )
    return front.backend.solve(request).status


def submit(front: Front) -> int:
    args = front.args
    queued = front.backend.submit(SubmitRequest(get_problem(args.problem), args.input, args.lane))
    print(queued.summary)
    print(queued.job_id)
    return 0


def collect(front: Front) -> int:
    args = front.args
    request = CollectRequest(args.job, args.output, args.timeout, args.quiet)
    collected = front.backend.collect(request)
    if collected.error:
        err(f"error: {collected.error}")
    return collected.status


def status(front: Front) -> int:
    args = front.args
    view = front.backend.status(args.job)
    if args.json:
        workers = {} if view.workers is None else {"workers": view.workers}
        print(json.dumps(view.rows[0] if args.job else {"jobs": view.rows, **workers}))
        return 0
    shown, hidden = (view.rows, 0) if args.job or args.all else _recent(view.rows)
    for row in shown:
        print("\n".join(status_lines(row)))
    if hidden:
        print(f"... and {hidden} earlier finished jobs (--all lists them)")
    if view.workers is not None:
        alive = view.workers
        print(f"workers alive: {len(alive)}" + "".join(f"\n    {name}" for name in alive))
    return 0


def _recent(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """Every unfinished job and the last finished ones (rows are oldest first), and how many
    finished ones are left out: thousands of kept jobs are not a wall of lines."""
    finished = [i for i, row in enumerate(rows) if row["state"] in FINISHED]
    hidden = set(finished[: max(len(finished) - RECENT_FINISHED, 0)])
    return [row for i, row in enumerate(rows) if i not in hidden], len(hidden)


def cancel(front: Front) -> int:
    front.backend.cancel(front.args.job)
    print(f"cancelled {front.args.job}")
    return 0
