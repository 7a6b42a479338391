"""The report files a grading writes (JSON, JUnit, scoreboard), checked before any work and
written whole in one pass over the stored verdicts."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from pipeline.data import files
from pipeline.errors import UsageError
from pipeline.grading import reports
from pipeline.grading.run import GradeRun


@dataclass(frozen=True)
class ReportFiles:
    """The report files a grading run writes (None: not wanted)."""

    json: Path | None = None
    junit: Path | None = None
    scoreboard: Path | None = None  # .json, else CSV
    version: int = reports.REPORT_VERSION  # of the JSON report (1: every case as an object)
    junit_cases: bool = False  # one JUnit testcase per case (default: per file)

    def _paths(self) -> list[Path]:
        return [p for p in (self.json, self.junit, self.scoreboard) if p is not None]

    def check(self, graded: Iterable[Path]) -> None:
        """Before any work: each report writable, apart, and none of them a graded file (the
        graded files are looked at once, and only when some report file exists already)."""
        paths = self._paths()
        if len({os.path.realpath(p) for p in paths}) < len(paths):
            raise UsageError("--json, --junit and --scoreboard must name different files")
        for path in paths:
            files.check_output(path)
        files.check_not_inputs(paths, graded)

    def write(self, run: GradeRun, *also: Callable[[GradeRun], reports.Report]) -> None:
        """Write every wanted report (and `also` the reports made by these functions, such as
        the text summary) in one pass over the stored verdicts, each file whole or not at
        all."""
        makers: list[tuple[Path, Callable[[TextIO], reports.Report]]] = []
        if self.json:
            version = self.version
            makers.append((self.json, lambda out: reports.JsonReport(out, run, version)))
        if self.junit:
            per_case = self.junit_cases
            makers.append(
                (self.junit, lambda out: reports.JunitReport(out, run, per_case=per_case))
            )
        files.write_all_atomically(
            [path for path, _ in makers],
            lambda streams: reports.write(
                run,
                [make(out) for (_, make), out in zip(makers, streams, strict=True)]
                + [make_also(run) for make_also in also],
            ),
        )
        if self.scoreboard:
            board = (
                reports.scoreboard_json(run.standings)
                if self.scoreboard.suffix == ".json"
                else reports.scoreboard_csv(run.standings, [t.name for t in run.tests])
            )
            files.atomic_write(self.scoreboard, board)


Answers = tuple[list[str], bool] | str


def summary(out: TextIO, *, standings: bool) -> Callable[[GradeRun], reports.Report]:
    """The text summary (then the standings) as a report for ReportFiles.write."""
    return lambda run: reports.TextSummary(out, run, standings=standings)
