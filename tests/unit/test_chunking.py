"""Chunks follow the work of their cases and keep input order."""

from __future__ import annotations

import pytest

from pipeline.data.chunking import chunk_cases
from pipeline.games.reader import Batch


def numbered(works: list[int], size: int = 1) -> list[Batch]:
    """Batches of `size` cases whose case is its own work."""
    return [Batch(i + 1, works[i : i + size]) for i in range(0, len(works), size)]


@pytest.mark.parametrize("size", [1, 2, 3, 7])
def test_chunks_close_at_the_target_work(size: int) -> None:
    batches = numbered([5, 5, 10, 1, 1, 30, 2], size)
    chunks = list(chunk_cases(batches, lambda w: w, 10, 100))
    assert [c.cases for c in chunks] == [[5, 5], [10], [1, 1, 30], [2]]
    assert [c.first for c in chunks] == [1, 3, 4, 7]
    assert [c.index for c in chunks] == [0, 1, 2, 3]
    assert [c.work for c in chunks] == [10, 10, 32, 2]


@pytest.mark.parametrize("size", [1, 2, 5])
def test_chunks_close_at_the_case_limit(size: int) -> None:
    chunks = list(chunk_cases(numbered([1] * 7, size), lambda w: w, 1000, 3))
    assert [len(c.cases) for c in chunks] == [3, 3, 1]
    assert [c.first for c in chunks] == [1, 4, 7]


def test_invalid_cases_count_as_one_unit_of_work() -> None:
    chunks = list(chunk_cases([Batch(1, [None, 4, None])], lambda w: w, 5, 100))
    assert [c.cases for c in chunks] == [[None, 4], [None]]


def test_no_cases_no_chunks() -> None:
    assert list(chunk_cases([], lambda w: 1, 10, 10)) == []
