"""Grading reports: a text summary, versioned JSON, JUnit XML, scoreboards, and report diffs."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from typing import Any, Protocol, TextIO
from xml.sax.saxutils import quoteattr

from pipeline import escape
from pipeline.grading import CaseResult, Found, Standing, Submission, Verdict
from pipeline.problem import Problem
from pipeline.verdicts import VERDICT_OF, FileVerdicts


class GradeRun(Protocol):
    """What reports read of a grading (grade_service.GradeRun)."""

    found: Found
    standings: list[Standing]
    case_texts: dict[str, dict[int, str]]  # test -> case -> its input, shortened

    @property
    def problem(self) -> Problem: ...
    def graded(self) -> Iterator[tuple[Submission, FileVerdicts | None]]: ...
    def score(self, sub: Submission, result: FileVerdicts) -> tuple[float, float]: ...
    def mismatches(self, sub: Submission, result: FileVerdicts) -> list[CaseResult]: ...


REPORT_VERSION = 2  # of the JSON report; 1 (every case an object) by `grade --report-version 1`
SHOWN_MISMATCHES = 3  # per file in the text summary
INPUT_CHARS = 100  # of a mismatched case's input, shown


class Report:
    """A report written in one pass over the graded files: begin, each file, end."""

    def __init__(self, out: TextIO, run: GradeRun) -> None:
        self.out, self.run = out, run

    def begin(self) -> None:
        """What comes before the first file."""

    def file(self, sub: Submission, result: FileVerdicts | None, shown: list[CaseResult]) -> None:
        """One submission file (None: its test could not be graded) and its kept mismatches."""

    def end(self) -> None:
        """What comes after the last file."""


def write(run: GradeRun, wanted: list[Report]) -> None:
    """Every wanted report, in one pass over the stored verdicts."""
    for report in wanted:
        report.begin()
    for sub, result in run.graded():
        shown = [] if result is None else run.mismatches(sub, result)
        for report in wanted:
            report.file(sub, result, shown)
    for report in wanted:
        report.end()


class TextSummary(Report):
    """Per file: accepted/total, score and the first mismatches with their case's input;
    then the standings, when `standings`."""

    def __init__(self, out: TextIO, run: GradeRun, *, standings: bool) -> None:
        super().__init__(out, run)
        self.standings = standings

    def file(self, sub: Submission, result: FileVerdicts | None, shown: list[CaseResult]) -> None:
        out, run = self.out, self.run
        path = escape.terminal(sub.label)
        if result is None:
            out.write(f"{path}: not graded: {escape.terminal(run.found.broken[sub.test])}\n")
            return
        score, maximum = run.score(sub, result)
        out.write(f"{path}: {result.accepted}/{result.total} accepted,"
                  f" score {score:g}/{maximum:g}\n")  # fmt: skip
        for case in shown[:SHOWN_MISMATCHES]:
            if case.verdict == Verdict.EXTRA:
                extra = escape.terminal(case.found or "")
                out.write(f"  EXTRA output after case {case.index - 1}: {extra}\n")
                continue
            out.write(f"  case {case.index}: {case.verdict.value}, expected {case.expected!r},"
                      f" found {_found(case)}\n")  # fmt: skip
            text = run.case_texts.get(sub.test, {}).get(case.index)
            if text:
                out.write(f"    input: {escape.terminal(text)}\n")
        if result.wrong > SHOWN_MISMATCHES:
            out.write(f"  ... and {result.wrong - SHOWN_MISMATCHES} more\n")

    def end(self) -> None:
        if self.standings:
            self.out.write(standings_text(self.run.standings))


def _found(case: CaseResult) -> str:
    return "end of file" if case.found is None else repr(case.found)


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
        self.files = 0

    def begin(self) -> None:
        run = self.run
        answers = [{"test": name, "source": _SOURCES[fresh]}
                   for name, fresh in sorted(run.found.solved.items())]  # fmt: skip
        head: dict[str, Any] = {"version": self.version, "problem": run.problem.name,
                                "answers": answers}  # fmt: skip
        if run.found.broken:
            head["invalid_tests"] = [{"test": t, "error": e}
                                     for t, e in sorted(run.found.broken.items())]  # fmt: skip
        self.out.write(json.dumps(head, indent=1)[:-2] + ',\n "submissions": [')

    def file(self, sub: Submission, result: FileVerdicts | None, shown: list[CaseResult]) -> None:
        if self.version == 2:
            doc = _submission_v2(self.run, sub, result, shown)
        else:
            doc = _submission_v1(self.run, sub, result)
        self.out.write(
            ("," if self.files else "") + "\n  " + json.dumps(doc, separators=(",", ":"))
        )
        self.files += 1

    def end(self) -> None:
        board = [_standing_dict(s) for s in self.run.standings]
        self.out.write('\n ],\n "scoreboard": ' + json.dumps(board, indent=1) + "\n}\n")


def _file_fields(run: GradeRun, sub: Submission, result: FileVerdicts | None) -> dict[str, Any]:
    doc: dict[str, Any] = {"path": sub.label, "test": sub.test, "contestant": sub.contestant}
    if result is None:
        return {**doc, "error": f"not graded: {run.found.broken[sub.test]}"}
    score, maximum = run.score(sub, result)
    return {**doc, "accepted": result.accepted, "total": result.total, "score": score,
            "max_score": maximum}  # fmt: skip


def _submission_v2(
    run: GradeRun, sub: Submission, result: FileVerdicts | None, mismatches: list[CaseResult]
) -> dict[str, Any]:
    doc = _file_fields(run, sub, result)
    if result is None:
        return doc
    inputs = run.case_texts.get(sub.test, {})
    shown = []
    for case in mismatches:
        item = case.as_dict()
        if case.verdict != Verdict.EXTRA:
            item["input"] = inputs.get(case.index)
        shown.append(item)
    doc["verdicts"] = result.codes
    doc["extra"] = None if result.extra is None else {"first": result.extra[0],
                                                       "more": result.extra[1]}  # fmt: skip
    doc["mismatches"] = shown
    doc["more_mismatches"] = result.wrong - len(shown)
    return doc


def _submission_v1(run: GradeRun, sub: Submission, result: FileVerdicts | None) -> dict[str, Any]:
    doc = _file_fields(run, sub, result)
    if result is not None:
        expected = run.found.expected[sub.test]
        doc["cases"] = [c.as_dict() for c in result.case_results(expected, run.problem.answers)]
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

    def begin(self) -> None:
        self.out.write(
            '<?xml version="1.0" encoding="utf-8"?>\n<testsuites name="gamebatch grade">\n'
        )

    def file(self, sub: Submission, result: FileVerdicts | None, shown: list[CaseResult]) -> None:
        out, run = self.out, self.run
        classname = escape.xml(f"{sub.contestant}.{sub.test}".strip("."))
        if self.per_case and result is not None:
            _junit_cases(out, run, sub, result, classname)
            return
        failures = 0 if result is not None and not result.wrong else 1
        out.write(f"  <testsuite name={_attr(sub.label)} tests=\"1\" failures=\"{failures}\""
                  ' errors="0" skipped="0">\n')  # fmt: skip
        out.write(f"    <testcase name={_attr(sub.test)} classname={_attr(classname)}")
        if failures:
            out.write(f"><failure message={_attr(_file_failure(run, sub, result, shown))}"
                      f' type="WRONG"/></testcase>\n')  # fmt: skip
        else:
            out.write("/>\n")
        out.write("  </testsuite>\n")

    def end(self) -> None:
        self.out.write("</testsuites>\n")


def _file_failure(
    run: GradeRun, sub: Submission, result: FileVerdicts | None, shown: list[CaseResult]
) -> str:
    if result is None:
        return f"not graded: {run.found.broken[sub.test]}"
    parts = [_case_message(case) for case in shown]
    more = f"; and {result.wrong - len(shown)} more" if result.wrong > len(shown) else ""
    return f"{result.wrong} of {result.total} cases wrong: " + "; ".join(parts) + more


def _case_message(case: CaseResult) -> str:
    if case.verdict == Verdict.EXTRA:
        return f"EXTRA output after case {case.index - 1}: {case.found!r}"
    return (
        f"case {case.index} {case.verdict.value}: expected {case.expected!r}, found {_found(case)}"
    )


def _junit_cases(
    out: TextIO, run: GradeRun, sub: Submission, result: FileVerdicts, classname: str
) -> None:
    out.write(f"  <testsuite name={_attr(sub.label)} tests=\"{result.total + bool(result.extra)}\""
              f' failures="{result.wrong}" errors="0" skipped="0">\n')  # fmt: skip
    expected = run.found.expected[sub.test]
    for case in result.case_results(expected, run.problem.answers):
        name = "extra output" if case.verdict == Verdict.EXTRA else f"case {case.index}"
        out.write(f'    <testcase name="{name}" classname={_attr(classname)}')
        if case.verdict == Verdict.AC:
            out.write("/>\n")
            continue
        message = f"{case.verdict.value}: expected {case.expected!r}, found {_found(case)}"
        out.write(f"><failure message={_attr(message)} type=\"{case.verdict.value}\"/>"
                  "</testcase>\n")  # fmt: skip
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
        writer.writerow([rank, escape.csv_cell(s.contestant), *per_test, s.total_accepted,
                         f"{s.score:g}", f"{s.max_score:g}"])  # fmt: skip
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
