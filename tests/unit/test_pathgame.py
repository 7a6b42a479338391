"""pathgame: official examples, Grundy tables, exhaustive search, invariances, huge boards."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from pipeline.games import pathgame
from pipeline.games.grundy import KINDS, GrundyTables, closed_form, compute_tables
from pipeline.games.pathgame import PROBLEM, board_value, board_value_by_runs, solve
from tests.conftest import run_reference
from tests.helpers import answers, input_text, random_cases

EXAMPLES = [
    ("#..", "...", "Snuke"),
    ("#", ".", "Sothe"),
    (".....", "..#..", "Sothe"),
    (".#...", ".....", "Snuke"),
    (".....#..#........##.......", "..........#..........#....", "Snuke"),
]


def test_official_examples() -> None:
    text = f"{len(EXAMPLES)}\n" + "".join(f"{a} {b}\n" for a, b, _ in EXAMPLES)
    assert answers(PROBLEM, text) == "".join(f"{w}\n" for _, _, w in EXAMPLES)


def test_closed_form_equals_the_recurrence_on_the_whole_table() -> None:
    tables = compute_tables(pathgame.TABLE_SIZE)
    for kind in KINDS:
        assert tables[kind] == [closed_form(kind, w) for w in range(pathgame.TABLE_SIZE + 1)]


def test_the_packaged_tables_are_the_recurrences(monkeypatch: pytest.MonkeyPatch) -> None:
    packaged = pathgame.packaged_tables()
    assert packaged is not None
    assert packaged.tables == compute_tables(pathgame.TABLE_SIZE)
    monkeypatch.setattr(pathgame, "_tables", None)
    monkeypatch.setattr(pathgame, "compute_tables", lambda n: pytest.fail("computed"))
    pathgame.prepare(None)  # loaded from the package, not computed
    assert pathgame.tables().tables == packaged.tables


def test_tables_round_trip_and_reject_other_versions() -> None:
    tables = GrundyTables(compute_tables(40))
    assert GrundyTables.from_bytes(tables.to_bytes()) is not None
    assert GrundyTables.from_bytes(b'{"version": 0, "tables": []}') is None
    assert GrundyTables.from_bytes(b"not json") is None


class DictCache:
    """A table cache in a dict, counting writes."""

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}
        self.writes = 0

    def get(self, name: str) -> bytes | None:
        return self.data.get(name)

    def set(self, name: str, value: bytes) -> None:
        self.writes += 1
        self.data[name] = value


def test_tables_are_computed_once_and_then_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    cache = DictCache()
    monkeypatch.setattr(pathgame, "_tables", None)
    pathgame.prepare(cache)
    assert cache.writes == 1
    monkeypatch.setattr(pathgame, "_tables", None)
    calls = []
    monkeypatch.setattr(pathgame, "compute_tables", lambda n: calls.append(n) or [])
    pathgame.prepare(cache)  # a second process loads instead of computing
    assert calls == [] and cache.writes == 1
    assert pathgame.tables().size == pathgame.TABLE_SIZE


@pytest.mark.parametrize("seed", range(3))
def test_agrees_with_exhaustive_search(seed: int) -> None:
    for case in random_cases(PROBLEM, "small", 1200, 6, seed):
        assert solve(case) == pathgame.exhaustive(case), case


def test_fast_value_equals_run_by_run_value() -> None:
    for shape in pathgame.SHAPES:
        for top, bottom in random_cases(PROBLEM, shape, 300, 60, seed=7):
            assert board_value(top.encode(), bottom.encode()) == board_value_by_runs(
                top.encode(), bottom.encode()
            ), (top, bottom)


@pytest.mark.parametrize("shape", pathgame.SHAPES)
def test_swapping_rows_and_mirroring_keep_the_answer(shape: str) -> None:
    for top, bottom in random_cases(PROBLEM, shape, 300, 50, seed=3):
        expected = solve([top, bottom])
        assert solve([bottom, top]) == expected
        assert solve([top[::-1], bottom[::-1]]) == expected


@pytest.mark.parametrize("shape", [s for s in pathgame.SHAPES if s != "small"])
def test_agrees_with_reference_program(shape: str, reference: dict[str, Path]) -> None:
    cases = random_cases(PROBLEM, shape, 200, 1000, seed=11)
    text = input_text(PROBLEM, cases)
    assert answers(PROBLEM, text) == run_reference(reference["pathgame"], text)


def test_wide_boards_beyond_the_table_and_the_reference() -> None:
    width = 10**7
    white = "." * width
    assert solve([white, white]) == 1  # even width: the OPEN value is 0
    assert solve(["." + white, "." + white]) == 0
    rng = random.Random(2)
    top, bottom = pathgame.generate(rng, "random", 10**5)
    assert board_value(top.encode(), bottom.encode()) == board_value_by_runs(
        top.encode(), bottom.encode()
    )
    # A border run wider than the table takes its value from the closed form: width itself.
    board = "." * 5000 + "#" + "." * 3
    assert board_value(board.encode(), ("." * len(board)).encode()) == 5000 ^ 3
