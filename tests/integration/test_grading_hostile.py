"""Grading folders and files made by hostile or careless contestants, and grade's exit status."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from pipeline import escape
from tests.helpers import command_env

INPUT = "3\n1 1\na\n1 2\na\n1 1\nab\n"
ANSWERS = "Pure\nDirty\nDirty\n"


def grade(*args: str | Path, memory: bool = False) -> subprocess.CompletedProcess[str]:
    """`gamebatch grade ...`; with `memory`, stdout's last line is the peak RSS in KiB."""
    code = "import sys\nfrom pipeline.cli import main\nstatus = main(sys.argv[1:])\n"
    # VmHWM is this program's own peak (ru_maxrss would carry over the forking parent's)
    code += "print(open('/proc/self/status').read().split('VmHWM:')[1].split()[0])\n"
    code += "sys.exit(status)\n"
    runner = ["-c", code] if memory else ["-m", "pipeline.cli"]
    return subprocess.run(
        [sys.executable, *runner, "grade", "-p", "strgame", *map(str, args)],
        capture_output=True,
        text=True,
        env=command_env(),
        timeout=120,
        check=False,
    )


@pytest.fixture
def contest(tmp_path: Path) -> Path:
    """tests/t1.in with its answers, and an empty subs/ folder."""
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "t1.in").write_text(INPUT)
    (tmp_path / "tests" / "t1.ans").write_text(ANSWERS)
    (tmp_path / "subs").mkdir()
    return tmp_path


def _contestant(contest: Path, name: str | bytes, output: str = ANSWERS) -> None:
    folder = contest / "subs" / os.fsdecode(name)
    folder.mkdir()
    (folder / "t1.out").write_text(output)


def _bulk(contest: Path, *extra: str | Path) -> subprocess.CompletedProcess[str]:
    return grade("--tests", contest / "tests", "--submissions", contest / "subs", *extra)


def test_links_in_the_submissions_folder_are_not_followed(contest: Path) -> None:
    _contestant(contest, "alice")
    mallory = contest / "subs" / "mallory"
    mallory.mkdir()
    (mallory / "t1.out").symlink_to("/etc/passwd")
    (contest / "subs" / "root").symlink_to("/")
    (contest / "subs" / "peek").symlink_to(contest / "tests")
    report = contest / "r.json"
    result = _bulk(contest, "--json", report)
    assert result.returncode == 1, result.stderr
    assert "root:" not in result.stdout + report.read_text()
    graded = {s["contestant"] for s in json.loads(report.read_text())["submissions"]}
    assert graded == {"alice", "mallory"}
    warnings = sorted(result.stderr.splitlines())
    assert warnings == [
        "gamebatch: warning: mallory/t1.out is a symbolic link: not read, graded as missing",
        "gamebatch: warning: peek is a symbolic link: not followed, not graded",
        "gamebatch: warning: root is a symbolic link: not followed, not graded",
    ]
    mallory = next(
        s for s in json.loads(report.read_text())["submissions"] if s["contestant"] == "mallory"
    )
    assert set(mallory["verdicts"]) == {"M"} and mallory["accepted"] == 0


def test_a_fifo_or_device_as_a_submission_is_not_read(contest: Path) -> None:
    folder = contest / "subs" / "eve"
    folder.mkdir()
    os.mkfifo(folder / "t1.out")  # reading it would wait forever
    result = _bulk(contest)
    assert result.returncode == 1
    assert "eve/t1.out is not a regular file: not read, graded as missing" in result.stderr


def test_names_are_escaped_for_terminal_xml_and_csv(contest: Path) -> None:
    ansi = "\x1b[31mred\x1b[0m"
    _contestant(contest, ansi, "Pure\nPure\nDirty\n")
    _contestant(contest, "=cmd|' -C calc'!A0")
    _contestant(contest, "@SUM(1+1)")
    _contestant(contest, b"caf\xe9")  # not UTF-8
    board, junit, report = contest / "b.csv", contest / "r.xml", contest / "r.json"
    result = _bulk(contest, "--scoreboard", board, "--junit", junit, "--json", report)
    assert result.returncode == 1, result.stderr
    assert "\x1b" not in result.stdout and "\\x1b[31mred\\x1b[0m" in result.stdout
    assert "caf\\xe9" in result.stdout
    suites = ET.parse(junit).getroot().findall("testsuite")  # well-formed, or this raises
    assert {s.get("name") for s in suites} >= {"\\x1b[31mred\\x1b[0m/t1.out", "caf\\xe9/t1.out"}
    rows = list(csv.reader(board.read_text().splitlines()))
    names = {row[1] for row in rows[1:]}
    assert names == {"'=cmd|' -C calc'!A0", "'@SUM(1+1)", "caf\\xe9", "\\x1b[31mred\\x1b[0m"}
    assert not [n for n in names if n.startswith(("=", "+", "-", "@"))]
    doc = json.loads(report.read_text())
    assert {s["contestant"] for s in doc["scoreboard"]} == {
        ansi,
        "=cmd|' -C calc'!A0",
        "@SUM(1+1)",
        "caf\\xe9",
    }  # JSON escapes control characters itself


def test_a_huge_line_is_shortened_when_shown_and_never_held(tmp_path: Path) -> None:
    (tmp_path / "t.in").write_text(INPUT)
    (tmp_path / "t.ans").write_text(ANSWERS)
    huge = tmp_path / "huge.out"
    with huge.open("w") as out:
        out.write("Pure ")
        for _ in range(200):
            out.write("x" * (1 << 20))
        out.write("\nDirty\n")
    result = grade(
        tmp_path / "t.in",
        huge,
        "--answers",
        tmp_path / "t.ans",
        "--json",
        tmp_path / "r.json",
        memory=True,
    )
    assert result.returncode == 1, result.stderr
    *_, peak_kib = result.stdout.splitlines()
    assert int(peak_kib) < 150 << 10, f"grade held {peak_kib} KiB for a 200 MB line"
    assert len(result.stdout) < 2000 and "more characters" in result.stdout
    case = json.loads((tmp_path / "r.json").read_text())["submissions"][0]["mismatches"][0]
    assert case["verdict"] == "PE" and len(case["found"]) < 300  # the word, and stray tokens


def test_exit_status_says_whether_everything_was_accepted(tmp_path: Path) -> None:
    (tmp_path / "t.in").write_text(INPUT)
    (tmp_path / "t.ans").write_text(ANSWERS)
    (tmp_path / "right.out").write_text(ANSWERS)
    (tmp_path / "wrong.out").write_text("Pure\nPure\nDirty\n")
    (tmp_path / "long.out").write_text(ANSWERS + "Pure\n")
    given = [tmp_path / "t.in"]
    answers = ["--answers", tmp_path / "t.ans"]
    assert grade(*given, tmp_path / "right.out", *answers).returncode == 0
    assert grade(*given, tmp_path / "right.out", tmp_path / "wrong.out", *answers).returncode == 1
    assert grade(*given, tmp_path / "long.out", *answers).returncode == 1
    missing = grade(*given, tmp_path / "none.out", *answers)
    assert missing.returncode == 1
    assert (
        missing.stderr == f"gamebatch: warning: {tmp_path / 'none.out'} does not exist:"
        " graded all MISSING\n"
    )
    assert f"{tmp_path / 'none.out'}: 0/3 accepted" in missing.stdout
    folder = grade(*given, tmp_path, *answers)
    assert folder.returncode == 2
    assert folder.stderr == f"gamebatch: error: cannot grade {tmp_path}: it is a folder\n"
    bad = tmp_path / "bad.in"
    bad.write_text("2\n1 1\nA\n")
    assert grade(bad, tmp_path / "right.out").returncode == 2


def test_escapes() -> None:
    assert escape.terminal("a\x1b[2Jb\u202e") == "a\\x1b[2Jb\\u202e"
    assert escape.xml("a\x00b\x1bc\td") == "a\\x00b\\x1bc\td"
    assert [escape.csv_cell(t) for t in ("=1", "+1", "-1", "@a", "\t", "=\x1b", "ok")] == [
        "'=1",
        "'+1",
        "'-1",
        "'@a",
        "\\x09",
        "'=\\x1b",
        "ok",
    ]
    assert escape.file_name(os.fsdecode(b"caf\xe9")) == "caf\\xe9"
    assert escape.shorten("x" * 10, 4) == "xxxx... (6 more characters)"
