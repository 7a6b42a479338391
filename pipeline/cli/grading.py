"""`grade` (output files, or programs judged) and `diff`: arguments into requests."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pipeline import escape
from pipeline.app.grade import GradeRequest, Reporting
from pipeline.app.judge import JudgeLimits, JudgeRequest
from pipeline.cli.front import Front
from pipeline.errors import UsageError
from pipeline.games.problem import Problem
from pipeline.games.registry import get_problem
from pipeline.grading import reports
from pipeline.grading.report_files import ReportFiles
from pipeline.grading.rules import Scoring


def grade(front: Front) -> int:
    args = front.args
    if Path(args.problem).is_dir() or args.problem.endswith(".zip"):  # a problem package
        return _grade_package(front)
    problem = get_problem(args.problem)
    if args.programs is not None:
        return _judge(front, problem)
    if args.time_limit or args.memory_limit or args.output_limit or args.lazy:
        raise UsageError("--time-limit, --memory-limit, --output-limit and --lazy judge --programs")
    bulk = args.tests is not None or args.submissions is not None
    request = GradeRequest(
        problem,
        args.files,
        args.answers,
        args.tests,
        args.submissions,
        _scoring(args.scoring),
        ignore_case=args.ignore_case,
        keep_going=args.keep_going,
        quiet=args.quiet,
        reporting=_reporting(front, standings=bulk),
    )
    return front.backend.grade(request).status


def _judge(front: Front, problem: Problem) -> int:
    """`grade --programs`: each contestant's program run on every test in the sandbox."""
    args = front.args
    if args.tests is None or args.submissions is not None or args.files or args.answers:
        raise UsageError("judging takes --tests DIR and --programs DIR, no files")
    if args.ignore_case:
        raise UsageError("--ignore-case grades output files, not --programs")
    request = JudgeRequest(
        problem,
        args.tests,
        args.programs,
        limits(front),
        _scoring(args.scoring),
        keep_going=args.keep_going,
        lazy=args.lazy,
        quiet=args.quiet,
        reporting=_reporting(front, standings=True),
    )
    return front.backend.judge(request).status


def _grade_package(front: Front) -> int:
    """`grade -p PACKAGE --programs DIR` (or `--submissions DIR`): programs judged, or output
    files graded, by the package's tests and validators."""
    from pipeline.app.package_grade import PackageGradeRequest

    args = front.args
    if (args.programs is None) == (args.submissions is None) or args.files or args.tests:
        raise UsageError(
            "a problem package grades --programs DIR or --submissions DIR (its tests are its own)"
        )
    if args.scoring or args.lazy or args.ignore_case:
        raise UsageError("a package's groups score it: no --scoring, --lazy or --ignore-case")
    if args.submissions is not None and (args.time_limit or args.memory_limit):
        raise UsageError("--time-limit and --memory-limit judge --programs, not output files")
    request = PackageGradeRequest(
        Path(args.problem),
        args.programs,
        limits(front),
        args.json,
        args.scoreboard,
        args.junit,
        args.quiet,
        submissions=args.submissions,
    )
    found = front.backend.grade_package(request)
    sys.stdout.write("".join(line + "\n" for line in found.lines))
    return found.status


def limits(front: Front) -> JudgeLimits:
    """A judged program's limits from the command line."""
    args = front.args
    return JudgeLimits(args.time_limit, args.memory_limit, args.output_limit)


def _scoring(path: str | None) -> Scoring:
    from pipeline.grading.scoring import load_scoring

    return load_scoring(path) if path else Scoring()


def _reporting(front: Front, *, standings: bool) -> Reporting:
    args = front.args
    files = ReportFiles(
        args.json, args.junit, args.scoreboard, args.report_version, args.junit_cases
    )
    return Reporting((files,), sys.stdout, standings)


def diff(front: Front) -> int:
    args = front.args
    docs = []
    for path in (args.old, args.new):
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise UsageError(f"cannot read report {path}: {exc}") from None
        if not isinstance(doc, dict) or doc.get("version") not in reports.REPORT_VERSIONS:
            raise UsageError(f"{path} is not a grading report (version 1 or 2)")
        try:
            reports.check_report(doc)
        except ValueError as exc:
            raise UsageError(f"{path} is not a grading report: {exc}") from None
        docs.append(doc)
    changes = reports.diff_reports(docs[0], docs[1])
    for line in changes:
        print(escape.terminal(line))  # paths come from the reports: contestants named them
    if not changes:
        print("no verdict changed")
    return 1 if changes else 0
