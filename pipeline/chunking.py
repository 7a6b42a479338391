"""Grouping validated cases into chunks whose work is close to a target."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from pipeline.problem import Case, NumberedCase


@dataclass(frozen=True)
class Chunk:
    """Consecutive cases sent to one worker as one task."""

    index: int
    first: int  # 1-based number of the first case
    cases: list[Case]
    work: int


def chunk_cases(
    cases: Iterable[NumberedCase], work: Callable[[Case], int], target: int, max_cases: int
) -> Iterator[Chunk]:
    """Yield chunks in input order; a chunk closes once it reaches the target work or count."""
    index, first, total = 0, 1, 0
    batch: list[Case] = []
    for numbered in cases:
        if not batch:
            first = numbered.number
        batch.append(numbered.case)
        total += 1 if numbered.case is None else work(numbered.case)  # None: invalid case
        if total >= target or len(batch) >= max_cases:
            yield Chunk(index, first, batch, total)
            index, batch, total = index + 1, [], 0
    if batch:
        yield Chunk(index, first, batch, total)
