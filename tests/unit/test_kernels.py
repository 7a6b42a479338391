"""The games' C kernels are built wherever a C compiler is (the tests of their fast paths
would otherwise pass over them)."""

from __future__ import annotations

import shutil

import pytest

from pipeline.games import problem
from pipeline.games.registry import get_problem


@pytest.mark.skipif(
    shutil.which("cc") is None and shutil.which("gcc") is None, reason="no C compiler"
)
@pytest.mark.parametrize("game", ["strgame", "pathgame"])
def test_the_c_kernels_were_built(game: str) -> None:
    found = get_problem(game)
    assert problem.scanner(found) is not None, f"{game}'s C scanner was not built"
    assert problem.slice_solver(found) is not None, f"{game}'s C solver was not built"
    assert problem.runs_in_process(found)


def test_a_game_without_capabilities_has_none() -> None:
    class Plain:
        name = "plain"

    assert problem.scanner(Plain()) is None  # type: ignore[arg-type]
    assert problem.slice_solver(Plain()) is None  # type: ignore[arg-type]
    assert problem.batch_reader(Plain()) is None  # type: ignore[arg-type]
    assert not problem.runs_in_process(Plain())  # type: ignore[arg-type]
