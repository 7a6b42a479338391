"""Grading rules: verdicts, scoring groups and files, report diffs."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.grading.reports import diff_reports
from pipeline.grading.rules import CaseResult, Group, Scoring, Verdict, compare
from pipeline.grading.scoring import load_scoring

EXPECTED = ["Pure", "Dirty", "Pure", "Dirty"]


def verdicts(output: str, ignore_case: bool = False) -> list[tuple[int, str]]:
    results = compare(EXPECTED, output.splitlines(), ignore_case=ignore_case)
    return [(r.index, r.verdict.value) for r in results]


def test_every_verdict() -> None:
    output = "Pure\n\n  dirty \nPure Pure\nDirty\nsurplus\nmore\n"
    assert verdicts(output) == [(1, "AC"), (2, "PE"), (3, "PE"), (4, "AC"), (5, "EXTRA")]
    assert verdicts("Dirty\nPure\n") == [(1, "WA"), (2, "WA"), (3, "MISSING"), (4, "MISSING")]
    assert verdicts("") == [(i, "MISSING") for i in range(1, 5)]
    assert verdicts("Pure\nDraw\nPURE\nDirty\n")[1:3] == [(2, "WA"), (3, "PE")]


def test_ignore_case_accepts_letter_case_but_not_stray_tokens() -> None:
    assert verdicts("pure\nDIRTY\nPure x\nDirty\n", ignore_case=True) == [
        (1, "AC"),
        (2, "AC"),
        (3, "PE"),
        (4, "AC"),
    ]


def test_wrong_cases_carry_expected_and_found() -> None:
    wrong = compare(["Snuke", "Sothe"], ["Sothe"])
    assert wrong[0] == CaseResult(1, Verdict.WA, "Snuke", "Sothe")
    assert wrong[1] == CaseResult(2, Verdict.MISSING, "Sothe", None)
    assert wrong[0].as_dict() == {
        "index": 1,
        "verdict": "WA",
        "expected": "Snuke",
        "found": "Sothe",
    }


def test_scoring_groups_are_all_or_nothing() -> None:
    results = {
        "01": compare(["Pure", "Dirty"], ["Pure", "Dirty"]),
        "02": compare(["Pure", "Dirty", "Pure"], ["Pure", "Dirty", "Dirty"]),
    }
    groups = Scoring(
        (
            Group("first file", 10, ("01",)),
            Group("second file, first two cases", 5, ("02",), ((1, 2),)),
            Group("second file", 20, ("02",)),
        )
    )
    assert groups.score(results) == (15.0, 35.0)
    assert Scoring().score(results) == (4.0, 5.0)


def test_shipped_scoring_file_and_its_errors(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    scoring = load_scoring(str(root / "configs" / "scoring-strgame.yaml"))
    assert sum(g.points for g in scoring.groups) == 100
    bad = tmp_path / "s.yaml"
    bad.write_text("groups:\n  - name: a\n    points: 5\n    cases: 3-x\n")
    with pytest.raises(Exception, match="'3-x' is not a case number"):
        load_scoring(str(bad))
    bad.write_text("groups:\n  - name: a\n")
    with pytest.raises(Exception, match="points"):
        load_scoring(str(bad))


def test_diff_names_changed_cases() -> None:
    def report(verdicts: list[str]) -> dict[str, object]:
        cases = [{"index": i, "verdict": v} for i, v in enumerate(verdicts, 1)]
        return {"version": 1, "submissions": [{"path": "a/01.out", "cases": cases}]}

    assert diff_reports(report(["AC", "WA", "AC"]), report(["AC", "AC", "MISSING"])) == [
        "a/01.out: case 2: WA -> AC",
        "a/01.out: case 3: AC -> MISSING",
    ]
    assert diff_reports(report(["AC"]), report(["AC"])) == []
