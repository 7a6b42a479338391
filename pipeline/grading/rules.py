"""Grading rules: per-case verdicts of an output against the answers (the in-process reference
of `pipeline.grading.verdicts`), scoring groups, standings."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from pipeline.escape import shorten


class Verdict(StrEnum):
    """The verdict of one case."""

    AC = "AC"  # accepted
    WA = "WA"  # a wrong answer
    PE = "PE"  # the right word, but wrong letter case or stray tokens on the line
    MISSING = "MISSING"  # the output ended before this case
    EXTRA = "EXTRA"  # output after the last case (one entry per file)
    # a judged program's run (`grade --programs`)
    TLE = "TLE"  # over the time limit (CPU, or the wall clock)
    MLE = "MLE"  # over the memory limit
    OLE = "OLE"  # over the output limit
    RE = "RE"  # a runtime error: another exit status than 0, or a signal
    CE = "CE"  # the program did not compile
    NR = "NR"  # not run: `--lazy` stopped its test at an earlier failing case


RUN_FAILED = frozenset({Verdict.TLE, Verdict.MLE, Verdict.OLE, Verdict.RE, Verdict.CE})
"""Verdicts of a program that gave no answer: reports show why (`found`), not the output."""


@dataclass(frozen=True)
class CaseResult:
    """One case's verdict; `expected`/`found` are set for every verdict but AC."""

    index: int  # 1-based; for EXTRA, the number of the first line too many
    verdict: Verdict
    expected: str | None = None
    found: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The report form."""
        doc: dict[str, Any] = {"index": self.index, "verdict": self.verdict.value}
        if self.verdict != Verdict.AC:
            doc["expected"] = self.expected
            doc["found"] = self.found
        return doc


SHOWN_CHARS = 200  # of a wrong line, kept for the reports


def compare(
    expected: list[str], output: Iterable[str], *, ignore_case: bool = False
) -> list[CaseResult]:
    """Verdicts of every case: case i is the i-th non-blank line of the output.

    The output is read once, as a stream: past the last case only the first extra line is
    kept, the others are counted.
    """
    lines = (stripped for line in output if (stripped := line.strip()))
    results = [
        _verdict(i + 1, want, next(lines, None), ignore_case) for i, want in enumerate(expected)
    ]
    extra = next(lines, None)
    if extra is not None:
        more = sum(1 for _ in lines)
        shown = shorten(extra, SHOWN_CHARS)
        results.append(
            CaseResult(len(expected) + 1, Verdict.EXTRA, "", f"{shown} (+{more} more lines)")
            if more
            else CaseResult(len(expected) + 1, Verdict.EXTRA, "", shown)
        )
    return results


def _verdict(index: int, want: str, line: str | None, ignore_case: bool) -> CaseResult:
    if line is None:
        return CaseResult(index, Verdict.MISSING, want, None)
    if line == want or (ignore_case and line.lower() == want.lower()):
        return CaseResult(index, Verdict.AC)
    shown = shorten(line, SHOWN_CHARS)
    if want.lower() in (token.lower() for token in line.split()):
        return CaseResult(index, Verdict.PE, want, shown)
    return CaseResult(index, Verdict.WA, want, shown)


@dataclass(frozen=True)
class Group:
    """A scoring group (subtask): all-or-nothing over its cases of its tests."""

    name: str
    points: float
    tests: tuple[str, ...] = ("*",)  # test names or globs
    cases: tuple[tuple[int, int], ...] = ()  # inclusive ranges; empty: every case

    def covers_test(self, test: str) -> bool:
        """Whether some cases of `test` belong to the group."""
        return any(fnmatch.fnmatchcase(test, pattern) for pattern in self.tests)

    def covers(self, test: str, index: int) -> bool:
        """Whether case `index` of `test` belongs to the group."""
        if not self.covers_test(test):
            return False
        return not self.cases or any(lo <= index <= hi for lo, hi in self.cases)


@dataclass(frozen=True)
class Scoring:
    """One point per accepted case, or the points of the groups whose cases are all AC."""

    groups: tuple[Group, ...] = ()

    @property
    def max_score(self) -> float:
        """The points of every group."""
        return float(sum(group.points for group in self.groups))

    def score(self, results: dict[str, list[CaseResult]]) -> tuple[float, float]:
        """(score, maximum) of one contestant's results, by test name."""
        if not self.groups:
            accepted = sum(_accepted(cases) for cases in results.values())
            return float(accepted), float(sum(_total(cases) for cases in results.values()))
        score = 0.0
        for group in self.groups:
            member = [
                case
                for test, cases in results.items()
                for case in cases
                if case.verdict != Verdict.EXTRA and group.covers(test, case.index)
            ]
            if member and all(case.verdict == Verdict.AC for case in member):
                score += group.points
        return score, float(sum(group.points for group in self.groups))


def _accepted(cases: list[CaseResult]) -> int:
    return sum(case.verdict == Verdict.AC for case in cases)


def _total(cases: list[CaseResult]) -> int:
    return sum(case.verdict != Verdict.EXTRA for case in cases)


@dataclass
class Standing:
    """A contestant's line of the scoreboard."""

    contestant: str
    score: float
    max_score: float
    accepted: dict[str, int] = field(default_factory=dict)  # by test

    @property
    def total_accepted(self) -> int:
        """Accepted cases over every test."""
        return sum(self.accepted.values())


@dataclass(frozen=True)
class Test:
    """An input file with optional official answers."""

    name: str  # printable (see escape.file_name)
    input: Path
    answers: Path | None = None

    @property
    def path_stem(self) -> str:
        """The name as the file system spells it."""
        return self.input.stem


@dataclass(frozen=True)
class Submission:
    """A contestant's output for a test (None: the file does not exist)."""

    contestant: str
    test: str
    path: Path | None
    label: str


@dataclass
class Found:
    """The answers of every test as codes, how they were found, and the tests refused."""

    expected: dict[str, str]
    solved: dict[str, bool | None]  # test -> solved now (True), cached (False), a file (None)
    broken: dict[str, str]  # test -> why its answers could not be had
