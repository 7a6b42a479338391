"""Grading runs: bulk contests with a scoreboard, reports and the answers cache."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from pipeline.registry import get_problem
from tests.helpers import answers, command_env, input_text, random_cases


def gamebatch(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pipeline.cli", *args],
        capture_output=True, text=True, env=command_env(), timeout=180, check=False,
    )  # fmt: skip


@pytest.mark.integration
def test_bulk_grading_scoreboard_reports_and_cache(tmp_path: Path) -> None:
    problem = get_problem("strgame")
    tests, subs = tmp_path / "tests", tmp_path / "subs"
    tests.mkdir()
    expected = {}
    for i, shape in enumerate(("random", "wide", "chain"), 1):
        text = input_text(problem, random_cases(problem, shape, 30, 60, seed=i))
        (tests / f"0{i}.in").write_text(text)
        expected[f"0{i}"] = answers(problem, text)
    (tests / "03.ans").write_text(expected["03"])  # official answers for one test
    perfect, sloppy, lazy = subs / "perfect", subs / "sloppy", subs / "lazy"
    for folder in (perfect, sloppy, lazy):
        folder.mkdir(parents=True)
    for name, text in expected.items():
        (perfect / f"{name}.out").write_text(text)
        lines = text.splitlines()
        lines[4] = "Dirty" if lines[4] == "Pure" else "Pure"  # case 5: WA
        lines[7] = lines[7].upper()  # case 8: PE
        (sloppy / f"{name}.out").write_text("\n".join(lines) + "\n")
    (lazy / "01.out").write_text(expected["01"])  # nothing for 02 and 03: all MISSING

    args = ["grade", "-p", "strgame", "--tests", str(tests), "--submissions", str(subs)]
    reports = ["--json", str(tmp_path / "r1.json"), "--junit", str(tmp_path / "r.xml")]
    first = gamebatch(*args, "--scoreboard", str(tmp_path / "board.csv"), *reports)
    assert (first.returncode, first.stderr) == (1, ""), "wrong cases: exit status 1"
    rows = list(csv.DictReader((tmp_path / "board.csv").read_text().splitlines()))
    assert [(r["contestant"], r["accepted"]) for r in rows] == [
        ("perfect", "90"), ("sloppy", "84"), ("lazy", "30"),
    ]  # fmt: skip
    assert rows[1]["01"] == "28" and rows[0]["rank"] == "1"

    report = json.loads((tmp_path / "r1.json").read_text())
    assert report["version"] == 2
    assert {a["test"]: a["source"] for a in report["answers"]} == {
        "01": "solved",
        "02": "solved",
        "03": "file",
    }
    by_path = {s["path"]: s for s in report["submissions"]}
    sloppy01 = by_path["sloppy/01.out"]
    assert (sloppy01["accepted"], sloppy01["total"], sloppy01["score"]) == (28, 30, 28.0)
    assert sloppy01["verdicts"] == "A" * 4 + "W" + "AA" + "P" + "A" * 22
    shown = sloppy01["mismatches"]
    assert [(c["index"], c["verdict"]) for c in shown] == [(5, "WA"), (8, "PE")]
    assert shown[1]["found"] == expected["01"].splitlines()[7].upper() and shown[0]["input"]
    assert by_path["lazy/02.out"]["verdicts"] == "M" * 30
    assert by_path["lazy/02.out"]["more_mismatches"] == 20  # 10 kept with what was found
    assert "sloppy/01.out: 28/30 accepted" in first.stdout
    assert "case 5: WA, expected" in first.stdout and "input: " in first.stdout

    suites = ET.parse(tmp_path / "r.xml").getroot().findall("testsuite")
    assert len(suites) == 9 and all(len(s.findall("testcase")) == 1 for s in suites)
    failures = [f.get("message", "") for s in suites for f in s.findall("testcase/failure")]
    assert len(failures) == 5  # sloppy's three files, lazy's two missing ones
    assert "2 of 30 cases wrong: case 5 WA: expected" in sorted(failures)[0]
    assert any("found end of file" in message for message in failures)

    second = gamebatch(*args, "--json", str(tmp_path / "r2.json"), "--report-version", "1",
                       "--junit", str(tmp_path / "cases.xml"), "--junit-cases")  # fmt: skip
    assert (second.returncode, second.stderr) == (1, "")
    again = json.loads((tmp_path / "r2.json").read_text())
    assert {a["test"]: a["source"] for a in again["answers"]} == {
        "01": "cache",
        "02": "cache",
        "03": "file",
    }
    assert again["version"] == 1
    old_style = {s["path"]: s for s in again["submissions"]}
    wrong = [c for c in old_style["sloppy/01.out"]["cases"] if c["verdict"] != "AC"]
    assert [(c["index"], c["verdict"]) for c in wrong] == [(5, "WA"), (8, "PE")]
    assert {c["verdict"] for c in old_style["lazy/02.out"]["cases"]} == {"MISSING"}
    suites = ET.parse(tmp_path / "cases.xml").getroot().findall("testsuite")
    assert len(suites) == 9 and all(len(s.findall("testcase")) == 30 for s in suites)
    assert sum(len(s.findall("testcase/failure")) for s in suites) == 2 * 3 + 2 * 30
    unchanged = gamebatch("diff", str(tmp_path / "r1.json"), str(tmp_path / "r2.json"))
    assert unchanged.returncode == 0 and unchanged.stdout.strip() == "no verdict changed"

    (sloppy / "01.out").write_text(expected["01"])  # the contestant fixed case 5 and 8
    gamebatch(*args, "--json", str(tmp_path / "r3.json"))
    changed = gamebatch("diff", str(tmp_path / "r1.json"), str(tmp_path / "r3.json"))
    assert changed.returncode == 1
    assert changed.stdout.splitlines() == [
        "sloppy/01.out: case 5: WA -> AC",
        "sloppy/01.out: case 8: PE -> AC",
    ]


@pytest.mark.integration
def test_single_input_with_official_answers_and_scoring(tmp_path: Path) -> None:
    (tmp_path / "t.in").write_text("3\n1 1\na\n1 2\na\n1 1\nab\n")
    (tmp_path / "t.ans").write_text("Pure\nDirty\nDirty\n")
    (tmp_path / "a.out").write_text("Pure\nDirty\nPure\n")
    (tmp_path / "s.yaml").write_text(
        "groups:\n  - {name: one, points: 30, cases: '1-2'}\n  - {name: all, points: 70}\n"
    )
    files = [str(tmp_path / "t.in"), str(tmp_path / "a.out")]
    result = gamebatch("grade", "-p", "strgame", *files, "--answers", str(tmp_path / "t.ans"),
                       "--scoring", str(tmp_path / "s.yaml"))  # fmt: skip
    assert (result.returncode, result.stderr) == (1, "")
    assert f"{tmp_path / 'a.out'}: 2/3 accepted, score 30/100" in result.stdout
    bad = tmp_path / "bad.ans"
    bad.write_text("Pure\nMaybe\n")
    refused = gamebatch("grade", "-p", "strgame", *files, "--answers", str(bad))
    assert refused.returncode == 2 and "answer 2 is 'Maybe'" in refused.stderr
