"""Grading contestants against a problem package: their programs (`grade -p PACKAGE --programs
DIR`) run on the package's tests on the workers, or their output files (`--submissions DIR`),
each output judged by the package's validator (or the default one), the verdict and score
aggregated over the test groups as verify aggregates a submission's; a summary, a JSON report,
a scoreboard and JUnit."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import stat
from collections import Counter
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
from pipeline.grading.comparing import open_output
from pipeline.grading.layout import contestant_folders
from pipeline.judging.programs import Program, find_programs
from pipeline.packages import package as packages
from pipeline.packages.outcomes import Outcome, Run, outcome
from pipeline.packages.package import Package, PackageProgram
from pipeline.progress import ProgressBar


@dataclass(frozen=True)
class PackageGradeRequest:
    """`grade -p PACKAGE --programs DIR` (or `--submissions DIR`: output files)."""

    package: Path
    programs: Path | None
    limits: JudgeLimits = field(default_factory=JudgeLimits)
    json: Path | None = None
    scoreboard: Path | None = None
    junit: Path | None = None
    quiet: bool = False
    max_seconds: float = 10.0  # accepted submissions' cap, where the limit is derived
    submissions: Path | None = None  # CONTESTANT/TEST.out files, judged as they are


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
    how: str  # "given", "stated" or "derived"; "" for output files
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
        notes: list[str] = []
        if request.programs is not None:
            programs, notes = find_programs(request.programs, languages)
        else:
            assert request.submissions is not None
            outputs = submitted_outputs(request.submissions, pkg, notes)
        for note in notes:
            report(f"warning: {escape.terminal(note)}")
        progress = ProgressBar("judge" if request.programs else "grade", enabled=not request.quiet)
        try:
            with cluster(settings) as c:
                runs = PackageRuns(c, pkg, progress)
                if request.programs is not None:
                    found = _graded(runs, pkg, programs, request)
                else:
                    found = _outputs_graded(runs, pkg, outputs)
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


def submitted_outputs(
    folder: Path, pkg: Package, notes: list[str]
) -> list[tuple[str, list[bytes | None]]]:
    """Each contestant's output files, a folder each (`CONTESTANT/secret/g1/01.out`, or
    `CONTESTANT/01.out` where no other test is named 01): None where a file is missing, a link
    or not a regular file, or larger than the output limit (noted)."""
    unique = Counter(Path(t.name).name for t in pkg.tests)
    cap = pkg.limits.output_mb << 20
    found = []
    for contestant in contestant_folders(folder, notes):
        outputs: list[bytes | None] = []
        for test in pkg.tests:
            places = [f"{test.name}.out"]
            if unique[Path(test.name).name] == 1:
                places.append(f"{Path(test.name).name}.out")
            path = next((p for p in places if _plain_file(contestant, p)), None)
            data = None if path is None else _read_capped(contestant / path, cap)
            if path is not None and data is None:
                shown = escape.file_name(f"{contestant.name}/{path}")
                notes.append(f"{shown} is larger than the output limit: graded as no output")
            outputs.append(data)
        found.append((escape.file_name(contestant.name), outputs))
    return found


def _plain_file(folder: Path, relative: str) -> bool:
    """Whether `folder/relative` is a regular file reached through real folders (no link on
    the way)."""
    place = folder
    for part in Path(relative).parts:
        place = place / part
        try:
            mode = place.lstat().st_mode
        except OSError:
            return False
        if stat.S_ISLNK(mode):
            return False
    return stat.S_ISREG(mode)


def _read_capped(path: Path, cap: int) -> bytes | None:
    """The file's bytes, or None when it holds more than `cap`."""
    with open_output(path) as stream:
        data = stream.read(cap + 1)
    return None if len(data) > cap else data


def _outputs_graded(
    runs: PackageRuns, pkg: Package, outputs: list[tuple[str, list[bytes | None]]]
) -> PackageGraded:
    """Every contestant's outputs judged as they are, in one job."""
    (found,) = runs.run(runs.outputs(outputs))
    graded = PackageGraded(pkg, 0.0, "")
    for contestant, _ in outputs:
        mine = found.get(contestant, [])
        graded.standings.append(Standing(contestant, "", outcome(mine, pkg.groups, None), mine))
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
    limit = f", time limit {found.time_limit:g} s ({found.how})" if found.how else ""
    lines = [f"{pkg.name}: {len(pkg.tests)} tests{limit}"]
    for rank, s in enumerate(found.standings, 1):
        points = f" {s.result.score:g} points" if pkg.scoring else ""
        failed, where = s.result.failed, ""
        if failed is not None:
            where = f" on {failed.test}" + (f": {failed.message}" if failed.message else "")
        said = f"{s.contestant}: {s.result.verdict}{points}{where}"
        lines.append(f"{rank:>4}. {escape.terminal(said)}")
    accepted = sum(s.result.verdict == "AC" for s in found.standings)
    what = "programs" if found.how else "contestants"
    lines.append(f"{accepted} of {len(found.standings)} {what} accepted")
    return lines


def as_json(found: PackageGraded) -> dict[str, Any]:
    """The JSON report (`"format": "gamebatch-package-grading"`)."""
    pkg = found.package
    return {
        "format": "gamebatch-package-grading",
        "version": 1,
        "package": pkg.name,
        "type": "scoring" if pkg.scoring else "pass-fail",
        "time_limit": found.time_limit if found.how else None,
        "time_limit_from": found.how or None,  # None: output files were graded
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
