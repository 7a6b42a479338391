"""gen, validate and stress."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pipeline.config import LimitSettings
from pipeline.errors import InputError
from pipeline.games import strgame, toolkit
from pipeline.games.registry import get_problem
from tests.helpers import command_env

PLUGIN_DIR = Path(__file__).resolve().parents[1] / "plugin_nim"
GAMES = ["strgame", "pathgame"]


def run(*args: str, extra_path: bool = False, timeout: float = 120) -> Any:
    env = command_env()
    if extra_path:
        env["PYTHONPATH"] = os.pathsep.join([str(PLUGIN_DIR), env.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-m", "pipeline.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        check=False,
    )


@pytest.mark.parametrize("game", GAMES)
def test_gen_is_deterministic_and_always_valid(game: str, tmp_path: Path) -> None:
    problem = get_problem(game)
    for shape in ("mixed", *problem.shapes):
        first = run(
            "gen",
            "-p",
            game,
            "--cases",
            "20",
            "--seed",
            "7",
            "--shape",
            shape,
            "--size",
            "300",
            "-o",
            str(tmp_path / "a.in"),
        )
        assert first.returncode == 0, first.stderr
        again = run(
            "gen", "-p", game, "--cases", "20", "--seed", "7", "--shape", shape, "--size", "300"
        )
        assert again.stdout.encode() == (tmp_path / "a.in").read_bytes()
        assert toolkit.validate(problem, tmp_path / "a.in", LimitSettings(), strict=False) == 20
    other = run("gen", "-p", game, "--cases", "20", "--seed", "8", "--size", "300")
    assert other.stdout != again.stdout


def test_gen_rejects_unknown_shapes() -> None:
    result = run("gen", "-p", "strgame", "--shape", "round")
    assert result.returncode == 2 and "has no shape 'round'" in result.stderr


def test_validate_exit_codes_and_strict_limits(tmp_path: Path) -> None:
    wide = tmp_path / "wide.in"
    wide.write_text("1\n" + "." * 1001 + " " + "." * 1001 + "\n")
    assert run("validate", "-p", "pathgame", str(wide)).returncode == 0
    strict = run("validate", "-p", "pathgame", str(wide), "--strict")
    assert strict.returncode == 2
    assert strict.stderr.strip() == (
        f"gamebatch: error: {wide}:2: case 1: width 1001 is above the contest limit of 1000"
    )
    many = tmp_path / "many.in"
    many.write_text("11\n" + "1 1\na\n" * 11)
    assert run("validate", "-p", "strgame", str(many)).returncode == 0
    assert "between 1 and 10" in run("validate", "-p", "strgame", str(many), "--strict").stderr
    long_game = tmp_path / "long.in"
    long_game.write_text("1\n2 1\n" + "a" * 60000 + "\n" + "b" * 50000 + "\n")
    with pytest.raises(InputError, match="total length 110000 is above"):
        toolkit.validate(get_problem("strgame"), long_game, LimitSettings(), strict=True)


@pytest.mark.parametrize("game", GAMES)
def test_stress_agrees_on_ten_thousand_cases(game: str) -> None:
    problem = get_problem(game)
    solver = toolkit.in_process_solver(problem)
    count, mismatch = toolkit.stress(problem, solver, 10_000, seed=2024)
    assert (count, mismatch) == (10_000, None)


def test_stress_catches_a_broken_solver_with_a_tiny_counterexample() -> None:
    problem = get_problem("strgame")

    def ignores_k(case: Any) -> int:
        return problem.solve([1, case[1]])  # wrong whenever the parity of K matters

    solver = toolkit.in_process_solver(problem, ignores_k)
    _, mismatch = toolkit.stress(problem, solver, 1000, seed=1)
    assert mismatch is not None
    k, words = mismatch.case
    assert k == 2 and words in ("a", "b", "c")  # as small as such a case can be
    assert mismatch.found == "Pure" and mismatch.expected == "Dirty"


def test_stress_runs_an_external_program(tmp_path: Path) -> None:
    always = tmp_path / "always-snuke.sh"
    always.write_text('#!/bin/sh\nread t\nfor i in $(seq "$t"); do read line; echo Snuke; done\n')
    always.chmod(always.stat().st_mode | stat.S_IEXEC)
    result = run("stress", "-p", "pathgame", "--cases", "300", "--program", str(always))
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert lines[0] == "mismatch: the solver says Snuke, exhaustive search says Sothe"
    assert lines[2:] in (["1", "# ."], ["1", ". #"])  # a smallest board the first player loses


def test_stress_agrees_with_the_reference_programs(reference: dict[str, Path]) -> None:
    for game in GAMES:
        result = run("stress", "-p", game, "--cases", "2000", "--program", str(reference[game]))
        assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("shape", [s for s in get_problem("strgame").shapes if s != "small"])
def test_strgame_shapes_respect_the_size_and_vary(shape: str) -> None:
    problem = get_problem("strgame")
    cases = list(toolkit.generate(problem, 20, 3, shape, 100_000))
    letters = [sum(map(len, strgame.words_of(case))) for case in cases]
    assert all(50_000 <= n <= 100_000 for n in letters), (min(letters), max(letters))
    assert all(problem.contest_limits(case) is None for case in cases)  # validate --strict
    if shape == "long":  # one string: its parity is the answer, both must be drawn
        assert {problem.solve(case) for case in cases} == {0, 1}
    if shape == "random":
        used = {c for case in cases for w in strgame.words_of(case) for c in w}
        assert len(used) > 5, used
    small = list(toolkit.generate(problem, 5, 3, shape, 300))
    assert all(sum(map(len, strgame.words_of(c))) <= 300 for c in small), "--size ignored"
