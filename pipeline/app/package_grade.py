"""Judging contestants' programs against a problem package (`grade -p PACKAGE --programs
DIR`): every program run on the package's tests on the workers, its output judged by the
package's validator (or the default one), its verdict and score aggregated over the test
groups as verify aggregates a submission's; a summary, a JSON report and a scoreboard."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape as xml_text
from xml.sax.saxutils import quoteattr

from pipeline import escape
from pipeline.app.cluster import cluster
from pipeline.app.judge import JudgeLimits
from pipeline.app.solve import Report
from pipeline.app.verify import PackageRuns, stops
from pipeline.config import Settings
from pipeline.data.files import atomic_write
from pipeline.judging.programs import Program, find_programs
from pipeline.packages import package as packages
from pipeline.packages.outcomes import Outcome, Run, outcome
from pipeline.packages.package import Package, PackageProgram
from pipeline.progress import ProgressBar


@dataclass(frozen=True)
class PackageGradeRequest:
    """`grade -p PACKAGE --programs DIR`."""

    package: Path
    programs: Path
    limits: JudgeLimits = field(default_factory=JudgeLimits)
    json: Path | None = None
    scoreboard: Path | None = None
    junit: Path | None = None
    quiet: bool = False
    max_seconds: float = 10.0  # accepted submissions' cap, where the limit is derived


@dataclass(frozen=True)
class Standing:
    """A contestant's result: its verdict and score over the package's tests."""

    contestant: str
    language: str
    result: Outcome
    runs: list[Run]


@dataclass
class PackageGraded:
    """A package grading: the time limit (and where it came from) and every standing."""

    package: Package
    time_limit: float
    how: str  # "given", "stated" or "derived"
    standings: list[Standing] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def status(self) -> int:
        """1 when some program is not accepted, else 0."""
        return int(any(s.result.verdict != "AC" for s in self.standings))


def grade_package(
    settings: Settings, request: PackageGradeRequest, report: Report
) -> PackageGraded:
    """The workflow; `report` hears the notes on programs skipped or not judged."""
    settings = request.limits.applied(settings)
    if not settings.broker_url:  # local workers judge: their sandbox first
        from pipeline.judging.sandbox import Sandbox

        Sandbox(settings.judge.first_uid, settings.judge.slots).check()
    languages = settings.judge.languages
    with packages.opened(request.package) as root:
        pkg = _limited(packages.read(root, languages), request.limits)
        programs, notes = find_programs(request.programs, languages)
        for note in notes:
            report(f"warning: {escape.terminal(note)}")
        progress = ProgressBar("judge", enabled=not request.quiet)
        try:
            with cluster(settings) as c:
                found = _graded(PackageRuns(c, pkg, progress), pkg, programs, request)
        finally:
            progress.close()
    found.notes = notes
    if request.json is not None:
        atomic_write(request.json, json.dumps(as_json(found), indent=1) + "\n")
    if request.scoreboard is not None:
        atomic_write(request.scoreboard, scoreboard(found))
    if request.junit is not None:
        atomic_write(request.junit, junit(found))
    return found


def _limited(pkg: Package, given: JudgeLimits) -> Package:
    """The package with the memory and output limits given on the command line."""
    limits = pkg.limits
    if given.memory_limit is not None:
        limits = dataclasses.replace(limits, memory_mb=given.memory_limit)
    if given.output_limit is not None:
        limits = dataclasses.replace(limits, output_mb=given.output_limit)
    return dataclasses.replace(pkg, limits=limits)


def _graded(
    runs: PackageRuns, pkg: Package, programs: list[Program], request: PackageGradeRequest
) -> PackageGraded:
    """The time limit (given, stated, or derived from the package's accepted submissions
    run first), then every program on every test under it."""
    time_limit, how = request.limits.time_limit, "given"
    if time_limit is None and pkg.limits.time_limit is not None:
        time_limit, how = pkg.limits.time_limit, "stated"
    if time_limit is None:
        (accepted,) = runs.run(runs.submissions(pkg.submissions["accepted"], request.max_seconds))
        slowest = max(
            (r.seconds for rs in accepted.values() for r in rs if r.letter == "A"), default=0
        )
        time_limit, how = packages.derived_time_limit(pkg.limits, slowest), "derived"
    contestants = [_as_package_program(p) for p in programs]
    (found,) = runs.run(runs.submissions(contestants, time_limit, stop=stops(pkg.groups)))
    graded = PackageGraded(pkg, time_limit, how)
    for program in programs:
        mine = found.get(program.contestant, [])
        result = outcome(mine, pkg.groups, time_limit)
        graded.standings.append(Standing(program.contestant, program.language, result, mine))
    graded.standings.sort(key=lambda s: _rank_key(s, pkg.scoring))
    return graded


def _rank_key(standing: Standing, scoring: bool) -> tuple[float, bool, int, str]:
    """Higher scores first (scoring problems), then accepted ones, then more tests passed."""
    passed = sum(r.letter == "A" for r in standing.runs)
    score = -standing.result.score if scoring else 0.0
    return (score, standing.result.verdict != "AC", -passed, standing.contestant)


def _as_package_program(program: Program) -> PackageProgram:
    entry = program.entry_name
    return PackageProgram(program.contestant, ((entry, program.source),), entry, program.language)


def summary(found: PackageGraded) -> list[str]:
    """The text summary, a line each."""
    pkg = found.package
    lines = [f"{pkg.name}: {len(pkg.tests)} tests, time limit {found.time_limit:g} s ({found.how})"]
    for rank, s in enumerate(found.standings, 1):
        points = f" {s.result.score:g} points" if pkg.scoring else ""
        failed, where = s.result.failed, ""
        if failed is not None:
            where = f" on {failed.test}" + (f": {failed.message}" if failed.message else "")
        said = f"{s.contestant}: {s.result.verdict}{points}{where}"
        lines.append(f"{rank:>4}. {escape.terminal(said)}")
    accepted = sum(s.result.verdict == "AC" for s in found.standings)
    lines.append(f"{accepted} of {len(found.standings)} programs accepted")
    return lines


def as_json(found: PackageGraded) -> dict[str, Any]:
    """The JSON report (`"format": "gamebatch-package-grading"`)."""
    pkg = found.package
    return {
        "format": "gamebatch-package-grading",
        "version": 1,
        "package": pkg.name,
        "type": "scoring" if pkg.scoring else "pass-fail",
        "time_limit": found.time_limit,
        "time_limit_from": found.how,
        "tests": [t.name for t in pkg.tests],
        "contestants": [
            {
                "contestant": s.contestant,
                "language": s.language,
                "verdict": s.result.verdict,
                "score": s.result.score if pkg.scoring else None,
                "first_failure": s.result.failure_json(),
                "runs": [r.as_json() for r in s.runs],
            }
            for s in found.standings
        ],
        "notes": found.notes,
    }


def scoreboard(found: PackageGraded) -> str:
    """The scoreboard as CSV: rank, contestant, language, verdict, score, tests passed."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["rank", "contestant", "language", "verdict", "score", "tests_passed"])
    for rank, s in enumerate(found.standings, 1):
        name = escape.csv_cell(s.contestant)
        passed = sum(r.letter == "A" for r in s.runs)
        writer.writerow([rank, name, s.language, s.result.verdict, f"{s.result.score:g}", passed])
    return out.getvalue()


def _attr(text: str) -> str:
    return quoteattr(escape.xml(text))


def junit(found: PackageGraded) -> str:
    """JUnit XML: a test suite per contestant (its score a property), a test case per test
    it ran, a failure for each test not accepted."""
    pkg = found.package
    lines = [
        '<?xml version="1.0" encoding="utf-8"?>',
        f"<testsuites name={_attr(f'gamebatch grade {pkg.name}')}>",
    ]
    for s in found.standings:
        failures = sum(r.letter != "A" for r in s.runs)
        lines.append(
            f'  <testsuite name={_attr(s.contestant)} tests="{len(s.runs)}" failures="{failures}">'
        )
        lines.append(
            f'    <properties><property name="verdict" value={_attr(s.result.verdict)}/>'
            f' <property name="score" value="{s.result.score:g}"/></properties>'
        )
        for r in s.runs:
            head = f"    <testcase name={_attr(r.test)} classname={_attr(s.contestant)}"
            if r.letter == "A":
                lines.append(f'{head} time="{r.seconds:.3f}"/>')
                continue
            said = f"{r.letter}: {r.message}" if r.message else r.letter
            lines.append(
                f'{head} time="{r.seconds:.3f}"><failure message={_attr(said)}>'
                f"{xml_text(escape.xml(said))}</failure></testcase>"
            )
        lines.append("  </testsuite>")
    return "\n".join([*lines, "</testsuites>"]) + "\n"
