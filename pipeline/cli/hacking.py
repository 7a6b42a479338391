"""`hack` and `verify`: arguments into a request, the summary printed by the workflow."""

from __future__ import annotations

import sys

from pipeline.app.hack import HackRequest
from pipeline.cli.front import Front
from pipeline.cli.grading import limits
from pipeline.games.registry import get_problem
from pipeline.hacking.hacks import Budget


def hack(front: Front) -> int:
    args = front.args
    request = HackRequest(
        get_problem(args.problem),
        args.programs,
        args.tests,
        args.seed,
        Budget(args.budget, args.cases, args.largest),
        limits(front),
        args.out,
        args.json,
        sys.stdout,
        args.quiet,
    )
    return front.backend.hack(request).status


def verify(front: Front) -> int:
    from pipeline.app.verify import VerifyRequest

    args = front.args
    request = VerifyRequest(args.package, args.json, args.quiet, args.max_time)
    found = front.backend.verify(request)
    sys.stdout.write("".join(line + "\n" for line in found.lines))
    return found.status
