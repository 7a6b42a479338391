"""Grouping validated cases into chunks whose work is close to a target."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from itertools import accumulate

import msgspec

from pipeline.games.problem import Case
from pipeline.games.reader import Batch


class Chunk(msgspec.Struct, frozen=True):
    """Consecutive cases sent to one worker as one task."""

    index: int
    first: int  # 1-based number of the first case
    cases: list[Case]
    work: int


def chunk_cases(
    batches: Iterable[Batch], work: Callable[[Case], int], target: int, max_cases: int
) -> Iterator[Chunk]:
    """Yield chunks in input order; a chunk closes once it reaches the target work or count.

    Works are summed and cut with C-level accumulate/bisect, a batch of cases at a time.
    """
    index, first, pending_work = 0, 1, 0
    pending: list[Case] = []
    for batch in batches:
        cases = batch.cases
        works = [1 if case is None else work(case) for case in cases]  # None: invalid case
        pos = 0
        while pos < len(cases):
            room = max_cases - len(pending)
            sums = list(accumulate(works[pos : pos + room]))
            take = min(bisect_left(sums, target - pending_work) + 1, len(sums))
            pending += cases[pos : pos + take]
            pending_work += sums[take - 1]
            pos += take
            if pending_work >= target or len(pending) >= max_cases:
                yield Chunk(index, first, pending, pending_work)
                index, first, pending, pending_work = index + 1, first + len(pending), [], 0
    if pending:
        yield Chunk(index, first, pending, pending_work)


def place_cut(
    target_work: int, max_cases: int, size: int, scale: int, spread: int
) -> tuple[int, int]:
    """The (target work, max cases) of chunks that name their place in a file or object.

    Such a chunk costs Redis the same however many bytes it names, so it grows with the
    input, up to `scale` times the cut of a chunk that carries its bytes, while the input
    still makes about `spread` chunks (a unit of work is about a byte of the built-in
    games' inputs): fewer messages per byte, and as many chunks as workers to share them.
    """
    times = max(1, min(scale, size // max(spread * target_work, 1)))
    return target_work * times, max_cases * times
