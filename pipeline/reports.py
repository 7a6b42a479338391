"""Grading reports: a text summary, versioned JSON, JUnit XML, scoreboards, and report diffs."""

from __future__ import annotations

import csv
import io
import json
import xml.etree.ElementTree as ET
from collections.abc import Callable
from typing import Any

from pipeline import escape
from pipeline.grading import FileResult, Standing, Verdict

REPORT_VERSION = 1
SHOWN_MISMATCHES = 3


def text_summary(
    results: list[FileResult], case_text: Callable[[FileResult, int], str | None]
) -> str:
    """Per file: accepted/total, score and the first mismatches with their case's input."""
    out = []
    for r in results:
        out.append(
            f"{escape.terminal(r.path)}: {r.accepted}/{r.total} accepted,"
            f" score {r.score:g}/{r.max_score:g}"
        )
        wrong = r.mismatches()
        for case in wrong[:SHOWN_MISMATCHES]:
            if case.verdict == Verdict.EXTRA:
                extra = escape.terminal(case.found or "")
                out.append(f"  EXTRA output after case {case.index - 1}: {extra}")
                continue
            found = "end of file" if case.found is None else repr(case.found)
            out.append(
                f"  case {case.index}: {case.verdict.value}, expected {case.expected!r},"
                f" found {found}"
            )
            shown = case_text(r, case.index)
            if shown:
                out.append(f"    input: {escape.terminal(shown)}")
        if len(wrong) > SHOWN_MISMATCHES:
            out.append(f"  ... and {len(wrong) - SHOWN_MISMATCHES} more")
    return "\n".join(out) + "\n"


def standings_text(standings: list[Standing]) -> str:
    """The scoreboard for the terminal, best first."""
    return "".join(
        f"{rank:>4}. {escape.terminal(s.contestant)}: {s.score:g}/{s.max_score:g}"
        f" ({s.total_accepted} cases)\n"
        for rank, s in enumerate(standings, 1)
    )


def json_report(
    problem: str,
    results: list[FileResult],
    standings: list[Standing] | None = None,
    solved: dict[str, bool | None] | None = None,
) -> str:
    """The versioned JSON report; `solved`: per test, whether the pipeline computed its
    answers now (True), found them cached (False) or they came from a file (None)."""
    doc: dict[str, Any] = {
        "version": REPORT_VERSION,
        "problem": problem,
        "answers": [
            {"test": name, "source": _SOURCES[fresh]}
            for name, fresh in sorted((solved or {}).items())
        ],
        "submissions": [r.as_dict() for r in results],
    }
    if standings is not None:
        doc["scoreboard"] = [_standing_dict(s) for s in standings]
    return json.dumps(doc, indent=1) + "\n"


_SOURCES = {True: "solved", False: "cache", None: "file"}


def _standing_dict(s: Standing) -> dict[str, Any]:
    return {
        "contestant": s.contestant,
        "score": s.score,
        "max_score": s.max_score,
        "accepted": s.total_accepted,
        "tests": s.accepted,
    }


def junit_report(results: list[FileResult]) -> str:
    """JUnit XML: one testsuite per submission file, one testcase per case."""
    root = ET.Element("testsuites", name="gamebatch grade")
    for r in results:
        failures = sum(c.verdict != Verdict.AC for c in r.cases)
        suite = ET.SubElement(
            root, "testsuite", name=escape.xml(r.path), tests=str(len(r.cases)),
            failures=str(failures), errors="0", skipped="0",
        )  # fmt: skip
        classname = escape.xml(f"{r.contestant}.{r.test}".strip("."))
        for case in r.cases:
            name = "extra output" if case.verdict == Verdict.EXTRA else f"case {case.index}"
            element = ET.SubElement(suite, "testcase", name=name, classname=classname)
            if case.verdict != Verdict.AC:
                found = "end of file" if case.found is None else repr(case.found)
                message = f"{case.verdict.value}: expected {case.expected!r}, found {found}"
                ET.SubElement(
                    element, "failure", message=escape.xml(message), type=case.verdict.value
                )
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


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
    return {int(c["index"]): str(c["verdict"]) for c in submission.get("cases", [])}
