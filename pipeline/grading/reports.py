"""Grading reports: a text summary, versioned JSON, JUnit XML, scoreboards, and report diffs."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import sys
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any, Protocol, TextIO
from xml.sax.saxutils import quoteattr

from pipeline import escape
from pipeline.games.problem import Problem
from pipeline.grading import rules, verdicts
from pipeline.grading.rules import RUN_FAILED, CaseResult, Found, Standing, Submission, Verdict
from pipeline.grading.verdicts import NOT_RUN, VERDICT_OF, FileVerdicts

Keep = Callable[[dict[str, list[str]]], None]
Piece = tuple[Submission, FileVerdicts | None, dict[str, list[str]] | None, Keep]
"""A graded file, its verdicts, its kept report bodies by kind (None: not kept yet), and
how to keep the bodies made now."""


class GradeRun(Protocol):
    """What reports read of a grading (grading.run.GradeRun)."""

    found: Found
    standings: list[Standing]

    @property
    def problem(self) -> Problem: ...
    @property
    def programs(self) -> dict[str, tuple[str, str]]: ...
    def case_text(self, test: str, index: int) -> str | None: ...
    def graded(self) -> Iterator[tuple[Submission, FileVerdicts | None]]: ...
    def pieces(self, kinds: list[str]) -> Iterator[Piece]: ...
    def score(self, sub: Submission, result: FileVerdicts) -> tuple[float, float]: ...
    def mismatches(self, sub: Submission, result: FileVerdicts) -> list[CaseResult]: ...


REPORT_VERSION = 2  # of the JSON report; 1 (every case an object) by `grade --report-version 1`
SHOWN_MISMATCHES = 3  # per file in the text summary
INPUT_CHARS = 100  # of a mismatched case's input, shown


class Report:
    """A report written in one pass over the graded files: begin, each file, end.

    A report with a `kind` splits each graded file's piece in two: its `body`, which
    depends on the file's content only (its verdicts, its test, the rules) and is kept by
    content like the verdicts, so that a re-grade renders only the changed files; and what
    `emit` adds of the file's place (contestant, path) when it writes the piece.
    """

    kind: str | None = None  # the name its kept bodies go by (None: rendered every time)

    def __init__(self, out: TextIO, run: GradeRun) -> None:
        self.out, self.run = out, run

    def begin(self) -> None:
        """What comes before the first file."""

    def file(self, sub: Submission, result: FileVerdicts | None, shown: list[CaseResult]) -> None:
        """One submission file (None: its test could not be graded) and its kept mismatches."""
        if result is not None:
            self.emit(sub, result, self.body(sub, result, shown))

    def body(self, sub: Submission, result: FileVerdicts, shown: list[CaseResult]) -> list[str]:
        """The parts of a graded file's piece that depend on its content only."""
        raise NotImplementedError

    def emit(self, sub: Submission, result: FileVerdicts, body: list[str]) -> None:
        """Write a graded file's piece from its body."""
        raise NotImplementedError

    def end(self) -> None:
        """What comes after the last file."""


def write(run: GradeRun, wanted: list[Report]) -> None:
    """Every wanted report, in one pass over the stored verdicts; the bodies of files that
    were rendered before come from the store."""
    for report in wanted:
        report.begin()
    kinds = sorted({r.kind for r in wanted if r.kind})
    for sub, result, kept, keep in run.pieces(kinds):
        if result is None or kept is None:
            shown = [] if result is None else run.mismatches(sub, result)
            made = {}
            for report in wanted:
                if report.kind is None or result is None:
                    report.file(sub, result, shown)
                    continue
                made[report.kind] = report.body(sub, result, shown)
                report.emit(sub, result, made[report.kind])
            if result is not None:
                keep(made)
            continue
        for report in wanted:
            if report.kind is None:
                report.file(sub, result, run.mismatches(sub, result))
            else:
                report.emit(sub, result, kept[report.kind])
    for report in wanted:
        report.end()


@cache
def rendering() -> str:
    """A digest of the code that renders report bodies: kept bodies of another version of it
    are never used."""
    digest = hashlib.sha256()
    for module in (sys.modules[__name__], escape, rules, verdicts):
        digest.update(Path(str(module.__file__)).read_bytes())
    return digest.hexdigest()


class TextSummary(Report):
    """Per file: accepted/total, score and the first mismatches with their case's input;
    then the standings, when `standings`."""

    kind = "text"

    def __init__(self, out: TextIO, run: GradeRun, *, standings: bool) -> None:
        super().__init__(out, run)
        self.standings = standings

    def file(self, sub: Submission, result: FileVerdicts | None, shown: list[CaseResult]) -> None:
        if result is None:
            broken = escape.terminal(self.run.found.broken[sub.test])
            self.out.write(f"{escape.terminal(sub.label)}: not graded: {broken}\n")
            return
        super().file(sub, result, shown)

    def body(self, sub: Submission, result: FileVerdicts, shown: list[CaseResult]) -> list[str]:
        score, maximum = self.run.score(sub, result)
        lines = [f": {result.accepted}/{result.total} accepted, score {score:g}/{maximum:g}\n"]
        for case in shown[:SHOWN_MISMATCHES]:
            if case.verdict == Verdict.EXTRA:
                extra = escape.terminal(case.found or "")
                lines.append(f"  EXTRA output after case {case.index - 1}: {extra}\n")
                continue
            if case.verdict in RUN_FAILED:
                lines.append(f"  case {case.index}: {case.verdict.value} ({_why(case)})\n")
            else:
                lines.append(
                    f"  case {case.index}: {case.verdict.value}, expected"
                    f" {case.expected!r}, found {_found(case)}\n"
                )
            text = self.run.case_text(sub.test, case.index)
            if text:
                lines.append(f"    input: {escape.terminal(text)}\n")
        if result.wrong > SHOWN_MISMATCHES:
            lines.append(f"  ... and {result.wrong - SHOWN_MISMATCHES} more\n")
        return ["".join(lines)]

    def emit(self, sub: Submission, result: FileVerdicts, body: list[str]) -> None:
        self.out.write(escape.terminal(sub.label) + body[0])

    def end(self) -> None:
        if self.standings:
            self.out.write(standings_text(self.run.standings))


def _found(case: CaseResult) -> str:
    return "end of file" if case.found is None else repr(case.found)


def _why(case: CaseResult) -> str:
    """Why a program gave no answer (of a compiler's messages, the first error)."""
    lines = (case.found or "see the first case").splitlines() or [""]
    return escape.terminal(next((line for line in lines if "error" in line), lines[0]))


def standings_text(standings: list[Standing]) -> str:
    """The scoreboard for the terminal, best first."""
    return "".join(
        f"{rank:>4}. {escape.terminal(s.contestant)}: {s.score:g}/{s.max_score:g}"
        f" ({s.total_accepted} cases)\n"
        for rank, s in enumerate(standings, 1)
    )


class JsonReport(Report):
    """The versioned JSON report. Version 2 gives each file's verdicts as a string (a letter
    per case) and its first mismatches with the case's input; version 1 an object per case.
    `answers` says per test whether the pipeline computed them now, found them cached, or
    read them from a file."""

    def __init__(self, out: TextIO, run: GradeRun, version: int = REPORT_VERSION) -> None:
        super().__init__(out, run)
        self.version = version
        self.kind = "json2" if version == 2 else None
        self.files = 0

    def begin(self) -> None:
        run = self.run
        answers = [
            {"test": name, "source": _SOURCES[fresh]}
            for name, fresh in sorted(run.found.solved.items())
        ]
        head: dict[str, Any] = {
            "version": self.version,
            "problem": run.problem.name,
            "answers": answers,
        }
        if run.programs:
            head["programs"] = [
                {"contestant": name, "language": language, "toolchain": made}
                for name, (language, made) in sorted(run.programs.items())
            ]
        if run.found.broken:
            head["invalid_tests"] = [
                {"test": t, "error": e} for t, e in sorted(run.found.broken.items())
            ]
        self.out.write(json.dumps(head, indent=1)[:-2] + ',\n "submissions": [')

    def file(self, sub: Submission, result: FileVerdicts | None, shown: list[CaseResult]) -> None:
        if self.version == 2 and result is not None:
            super().file(sub, result, shown)
            return
        if self.version == 2:
            doc = _file_fields(self.run, sub, result)
        else:
            doc = _submission_v1(self.run, sub, result)
        self._entry(json.dumps(doc, separators=(",", ":")))

    def body(self, sub: Submission, result: FileVerdicts, shown: list[CaseResult]) -> list[str]:
        # the fields before and after the letters, each without its braces
        head, tail = _submission_v2(self.run, sub, result, shown)
        return [_compact(head)[1:-1], _compact(tail)[1:-1]]

    def emit(self, sub: Submission, result: FileVerdicts, body: list[str]) -> None:
        place = _compact({"path": sub.label, "test": sub.test, "contestant": sub.contestant})
        self._entry(f'{place[:-1]},{body[0]},"verdicts":{json.dumps(result.codes)},{body[1]}}}')

    def _entry(self, text: str) -> None:
        self.out.write(("," if self.files else "") + "\n  " + text)
        self.files += 1

    def end(self) -> None:
        board = [_standing_dict(s) for s in self.run.standings]
        self.out.write('\n ],\n "scoreboard": ' + json.dumps(board, indent=1) + "\n}\n")


def _compact(doc: Any) -> str:
    return json.dumps(doc, separators=(",", ":"))


def _file_fields(run: GradeRun, sub: Submission, result: FileVerdicts | None) -> dict[str, Any]:
    doc: dict[str, Any] = {"path": sub.label, "test": sub.test, "contestant": sub.contestant}
    if result is None:
        return {**doc, "error": f"not graded: {run.found.broken[sub.test]}"}
    score, maximum = run.score(sub, result)
    return {
        **doc,
        "accepted": result.accepted,
        "total": result.total,
        "score": score,
        "max_score": maximum,
    }


def _submission_v2(
    run: GradeRun, sub: Submission, result: FileVerdicts, mismatches: list[CaseResult]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A v2 entry's fields after the file's place: those before its letters, those after."""
    score, maximum = run.score(sub, result)
    head = {
        "accepted": result.accepted,
        "total": result.total,
        "score": score,
        "max_score": maximum,
    }
    shown = []
    for case in mismatches:
        item = case.as_dict()
        if case.verdict != Verdict.EXTRA:
            item["input"] = run.case_text(sub.test, case.index)
        shown.append(item)
    extra = None if result.extra is None else {"first": result.extra[0], "more": result.extra[1]}
    tail: dict[str, Any] = {
        "extra": extra,
        "mismatches": shown,
        "more_mismatches": result.wrong - len(shown),
    }
    if result.usage:  # a judged program's: each case's CPU time and peak memory
        tail["time_ms"] = [us / 1000 for us, _ in result.usage]
        tail["memory_kib"] = [kib for _, kib in result.usage]
    return head, tail


def _submission_v1(run: GradeRun, sub: Submission, result: FileVerdicts | None) -> dict[str, Any]:
    doc = _file_fields(run, sub, result)
    if result is not None:
        expected = run.found.expected[sub.test]
        doc["cases"] = [c.as_dict() for c in result.case_results(expected, run.problem.answers)]
        for case, (us, kib) in zip(doc["cases"], result.usage, strict=False):
            case.update(time_ms=us / 1000, memory_kib=kib)
    return doc


_SOURCES = {True: "solved", False: "cache", None: "file"}


def _standing_dict(s: Standing) -> dict[str, Any]:
    return {
        "contestant": s.contestant,
        "score": s.score,
        "max_score": s.max_score,
        "accepted": s.total_accepted,
        "tests": s.accepted,
    }


class JunitReport(Report):
    """JUnit XML, one testsuite per submission file: by default with one testcase whose
    failure lists the first wrong cases; `per_case`: one testcase per case."""

    def __init__(self, out: TextIO, run: GradeRun, *, per_case: bool = False) -> None:
        super().__init__(out, run)
        self.per_case = per_case
        self.kind = None if per_case else "junit"

    def begin(self) -> None:
        self.out.write(
            '<?xml version="1.0" encoding="utf-8"?>\n<testsuites name="gamebatch grade">\n'
        )

    def file(self, sub: Submission, result: FileVerdicts | None, shown: list[CaseResult]) -> None:
        if result is None:
            failure = f"not graded: {self.run.found.broken[sub.test]}"
            self._suite(sub, f'><failure message={_attr(failure)} type="WRONG"/></testcase>')
        elif self.per_case:
            _junit_cases(self.out, self.run, sub, result, _classname(sub))
        else:
            super().file(sub, result, shown)

    def body(self, sub: Submission, result: FileVerdicts, shown: list[CaseResult]) -> list[str]:
        if not result.wrong:
            return ["/>"]
        failure = _attr(_file_failure(result, shown))
        return [f'><failure message={failure} type="WRONG"/></testcase>']

    def emit(self, sub: Submission, result: FileVerdicts, body: list[str]) -> None:
        self._suite(sub, body[0])

    def _suite(self, sub: Submission, testcase_end: str) -> None:
        failures = int(testcase_end != "/>")
        self.out.write(
            f'  <testsuite name={_attr(sub.label)} tests="1" failures="{failures}" errors="0"'
            f' skipped="0">\n    <testcase name={_attr(sub.test)}'
            f" classname={_attr(_classname(sub))}{testcase_end}\n  </testsuite>\n"
        )

    def end(self) -> None:
        self.out.write("</testsuites>\n")


def _classname(sub: Submission) -> str:
    return escape.xml(f"{sub.contestant}.{sub.test}".strip("."))


def _file_failure(result: FileVerdicts, shown: list[CaseResult]) -> str:
    parts = [_case_message(case) for case in shown]
    skipped = result.codes.count(NOT_RUN)
    wrong = result.wrong - skipped
    more = f"; and {wrong - len(shown)} more" if wrong > len(shown) else ""
    not_run = f" ({skipped} not run after it: --lazy)" if skipped else ""
    return f"{wrong} of {result.total} cases wrong{not_run}: " + "; ".join(parts) + more


def _case_message(case: CaseResult) -> str:
    if case.verdict == Verdict.EXTRA:
        return f"EXTRA output after case {case.index - 1}: {case.found!r}"
    if case.verdict in RUN_FAILED:
        return f"case {case.index} {case.verdict.value}: {_why(case)}"
    return (
        f"case {case.index} {case.verdict.value}: expected {case.expected!r}, found {_found(case)}"
    )


def _junit_cases(
    out: TextIO, run: GradeRun, sub: Submission, result: FileVerdicts, classname: str
) -> None:
    skipped = result.codes.count(NOT_RUN)
    out.write(
        f'  <testsuite name={_attr(sub.label)} tests="{result.total + bool(result.extra)}"'
        f' failures="{result.wrong - skipped}" errors="0" skipped="{skipped}">\n'
    )
    expected = run.found.expected[sub.test]
    for case in result.case_results(expected, run.problem.answers):
        name = "extra output" if case.verdict == Verdict.EXTRA else f"case {case.index}"
        out.write(f'    <testcase name="{name}" classname={_attr(classname)}')
        if case.verdict == Verdict.AC:
            out.write("/>\n")
            continue
        if case.verdict == Verdict.NR:
            out.write('><skipped message="not run: an earlier case failed (--lazy)"/></testcase>\n')
            continue
        message = (
            f"{case.verdict.value}: {_why(case)}"
            if case.verdict in RUN_FAILED
            else f"{case.verdict.value}: expected {case.expected!r}, found {_found(case)}"
        )
        out.write(f'><failure message={_attr(message)} type="{case.verdict.value}"/></testcase>\n')
    out.write("  </testsuite>\n")


def _attr(text: str) -> str:
    """A quoted XML attribute value of untrusted text."""
    return quoteattr(escape.xml(text))


def scoreboard_csv(standings: list[Standing], tests: list[str]) -> str:
    """Rank, contestant, accepted cases per test and in total, score."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    header = [escape.csv_cell(test) for test in tests]
    writer.writerow(["rank", "contestant", *header, "accepted", "score", "max_score"])
    for rank, s in enumerate(standings, 1):
        per_test = [s.accepted.get(test, 0) for test in tests]
        writer.writerow(
            [
                rank,
                escape.csv_cell(s.contestant),
                *per_test,
                s.total_accepted,
                f"{s.score:g}",
                f"{s.max_score:g}",
            ]
        )
    return buffer.getvalue()


def scoreboard_json(standings: list[Standing]) -> str:
    """The scoreboard as JSON, best first."""
    rows = [{"rank": i, **_standing_dict(s)} for i, s in enumerate(standings, 1)]
    return json.dumps({"version": REPORT_VERSION, "scoreboard": rows}, indent=1) + "\n"


REPORT_VERSIONS = (1, 2)  # what `diff` reads


def diff_reports(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Lines naming every case whose verdict changed between two JSON reports.

    Submissions are matched by path; two reports of one submission each are compared
    directly (two versions of one program).
    """
    changes = []
    first, second = old.get("submissions", []), new.get("submissions", [])
    if len(first) == len(second) == 1 and _key(first[0]) != _key(second[0]):
        label = f"{_key(first[0])} -> {_key(second[0])}"
        first, second = [{**first[0], "path": label}], [{**second[0], "path": label}]
    before = {_key(s): s for s in first}
    after = {_key(s): s for s in second}
    for key in sorted(before.keys() | after.keys()):
        if key not in after:
            changes.append(f"{key}: only in the first report")
            continue
        if key not in before:
            changes.append(f"{key}: only in the second report")
            continue
        a, b = _verdicts(before[key]), _verdicts(after[key])
        for index in sorted(a.keys() | b.keys()):
            va, vb = a.get(index, "-"), b.get(index, "-")
            if va != vb:
                changes.append(f"{key}: case {index}: {va} -> {vb}")
    return changes


def check_report(doc: Any) -> None:
    """Raise ValueError saying what is wrong when `doc` is not a report diff_reports reads."""
    subs = doc.get("submissions") if isinstance(doc, dict) else None
    if not isinstance(subs, list):
        raise ValueError("it has no list of submissions")
    for number, sub in enumerate(subs, 1):
        if not isinstance(sub, dict) or not isinstance(sub.get("path"), str):
            raise ValueError(f"submission {number} is not an object with a path")
        letters, cases = sub.get("verdicts"), sub.get("cases", [])
        if isinstance(letters, str):
            if not set(letters) <= set(VERDICT_OF):
                raise ValueError(f"submission {number} has unknown verdict letters")
        elif not isinstance(cases, list) or not all(
            isinstance(c, dict)
            and isinstance(c.get("index"), int)
            and isinstance(c.get("verdict"), str)
            for c in cases
        ):
            raise ValueError(f"submission {number} has cases of another shape")


def _key(submission: dict[str, Any]) -> str:
    return str(submission.get("path"))


def _verdicts(submission: dict[str, Any]) -> dict[int, str]:
    """Verdicts by case number, from a report of either version."""
    letters = submission.get("verdicts")
    if not isinstance(letters, str):
        return {int(c["index"]): str(c["verdict"]) for c in submission.get("cases", [])}
    found = {i: VERDICT_OF[code].value for i, code in enumerate(letters, 1)}
    if submission.get("extra"):
        found[len(letters) + 1] = Verdict.EXTRA.value
    return found
