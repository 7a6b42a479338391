"""A third game, added through the plugin interface alone, through every command."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.helpers import answers
from tests.unit.test_toolkit import PLUGIN_DIR, run


@pytest.mark.integration
def test_a_plugin_game_runs_through_every_command(tmp_path: Path) -> None:
    sys.path.insert(0, str(PLUGIN_DIR))
    try:
        import nimgame
    finally:
        sys.path.remove(str(PLUGIN_DIR))
    made = run(
        "gen",
        "-p",
        "nim",
        "--cases",
        "200",
        "--seed",
        "3",
        "--size",
        "50",
        "-o",
        str(tmp_path / "nim.in"),
        extra_path=True,
    )
    assert made.returncode == 0, made.stderr
    assert run("validate", "-p", "nim", str(tmp_path / "nim.in"), extra_path=True).returncode == 0
    stressed = run("stress", "-p", "nim", "--cases", "2000", extra_path=True)
    assert stressed.returncode == 0, stressed.stdout + stressed.stderr
    solved = run(
        "solve",
        "-p",
        "nim",
        str(tmp_path / "nim.in"),
        "-o",
        str(tmp_path / "nim.out"),
        "--workers",
        "1",
        "-q",
        extra_path=True,
    )
    assert solved.returncode == 0, solved.stderr
    text = (tmp_path / "nim.in").read_text()
    assert (tmp_path / "nim.out").read_text() == answers(nimgame.PROBLEM, text)
    graded = run(
        "grade", "-p", "nim", str(tmp_path / "nim.in"), str(tmp_path / "nim.out"), extra_path=True
    )
    assert graded.returncode == 0, graded.stderr
    assert f"{tmp_path / 'nim.out'}: 200/200 accepted" in graded.stdout
    bad = tmp_path / "bad.in"
    bad.write_text("1\n2\n3 x\n")
    refused = run("solve", "-p", "nim", str(bad), extra_path=True)
    assert refused.returncode == 2 and "case 1: heap 2 must be an integer" in refused.stderr
