"""Chunks follow the work of their cases and keep input order."""

from __future__ import annotations

from pipeline.chunking import chunk_cases
from pipeline.problem import NumberedCase


def numbered(works: list[int]) -> list[NumberedCase]:
    return [NumberedCase(i + 1, (None, 0), w) for i, w in enumerate(works)]


def test_chunks_close_at_the_target_work() -> None:
    chunks = list(chunk_cases(numbered([5, 5, 10, 1, 1, 30, 2]), lambda w: w, 10, 100))
    assert [c.cases for c in chunks] == [[5, 5], [10], [1, 1, 30], [2]]
    assert [c.first for c in chunks] == [1, 3, 4, 7]
    assert [c.index for c in chunks] == [0, 1, 2, 3]


def test_chunks_close_at_the_case_limit() -> None:
    chunks = list(chunk_cases(numbered([1] * 7), lambda w: w, 1000, 3))
    assert [len(c.cases) for c in chunks] == [3, 3, 1]


def test_no_cases_no_chunks() -> None:
    assert list(chunk_cases([], lambda w: 1, 10, 10)) == []
