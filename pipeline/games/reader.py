"""The multi-case reader: the number of cases T, then T cases (in batches where the game
reads many at once), then nothing but whitespace."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import msgspec

from pipeline.errors import InputError
from pipeline.games.problem import Case, Problem, batch_reader
from pipeline.games.tokens import Mark, TokenReader

MAX_CASES = 10**12  # T above this is certainly a mistake


class NumberedCase(NamedTuple):
    """A validated case (None when invalid) with its 1-based number and where it starts."""

    number: int
    mark: Mark  # TokenReader.line_at(mark) names its first line
    case: Case


class Batch(msgspec.Struct, frozen=True):
    """Consecutive cases read together; case i starts at token `pos + i * per` of `block`."""

    first: int  # number of the first case
    cases: list[Case]  # None for an invalid case (keep-going mode)
    block: Any = None
    pos: int = 0
    per: int = 0

    def mark(self, i: int) -> Mark:
        """Where case `first + i` starts."""
        return (self.block, self.pos + i * self.per)


BATCH_MIN = 64  # cases read at once by a game's read_batch(), when it has one


def _read_batched(
    problem: Any,
    tokens: TokenReader,
    first: int,
    count: int,
    on_invalid: Callable[[InputError], None] | None,
) -> Batch | None:
    """Cases `first`.. read by the game's read_batch() from the current block, or None when
    too few tokens are left in the block (then one case is read the ordinary way)."""
    per = problem.tokens_per_case
    k = min(count - first + 1, tokens.available() // per)
    if k < BATCH_MIN:
        return None
    block, pos = tokens.mark()
    results = problem.read_batch(tokens.next_many(k * per, "token {}"))
    bad = [i for i, result in enumerate(results) if isinstance(result, str)]
    for i in bad:
        tokens.case = first + i
        error = tokens.error(results[i], tokens.line_in_many(i * per), recoverable=True)
        if on_invalid is None:
            raise error
        on_invalid(error)
        results[i] = None
    return Batch(first, results, block, pos, per)


def read_cases(
    problem: Problem,
    tokens: TokenReader,
    max_cases: int = MAX_CASES,
    on_invalid: Callable[[InputError], None] | None = None,
) -> Iterator[NumberedCase]:
    """Every case with its number and position (see read_batches)."""
    for batch in read_batches(problem, tokens, max_cases, on_invalid):
        for i, case in enumerate(batch.cases):
            yield NumberedCase(batch.first + i, batch.mark(i), case)


def read_batches(
    problem: Problem,
    tokens: TokenReader,
    max_cases: int = MAX_CASES,
    on_invalid: Callable[[InputError], None] | None = None,
) -> Iterator[Batch]:
    """Validate the header T, then yield the T cases in batches, then check nothing follows.

    The first error is raised, unless `on_invalid` is given (keep going): then each invalid
    case is reported to it and yielded as None; once the reader cannot find the next case,
    every remaining case is yielded as invalid.
    """
    count = tokens.next_int("the number of cases T", 1, max_cases)
    lost: InputError | None = None  # set once the rest of the file cannot be read
    lost_from = 0
    batched = batch_reader(problem) is not None
    number = 0
    while number < count:
        number += 1
        if batched and lost is None:
            batch = _read_batched(problem, tokens, number, count, on_invalid)
            if batch is not None:
                yield batch
                number += len(batch.cases) - 1
                continue
        try:
            if lost is not None:
                raise lost
            yield _read_one(problem, tokens, number, count)
        except InputError as exc:
            if on_invalid is None:
                raise
            if lost is None:
                on_invalid(exc)
                lost, lost_from = (None, 0) if exc.recoverable else (exc, number + 1)
            yield Batch(number, [None])
    _after_the_last_case(tokens, count, lost_from if lost is not None else 0, on_invalid)


def _read_one(problem: Problem, tokens: TokenReader, number: int, count: int) -> Batch:
    """Case `number` read the ordinary way."""
    tokens.case = number
    if tokens.at_end():
        raise tokens.error(f"file ends after {number - 1} of {count} cases (T = {count})")
    block, pos = tokens.mark()
    return Batch(number, [problem.read_case(tokens)], block, pos)


def _after_the_last_case(
    tokens: TokenReader,
    count: int,
    lost_from: int,
    on_invalid: Callable[[InputError], None] | None,
) -> None:
    """Name the cases that could not be read (from `lost_from`, when the reader lost its
    way), or else check that nothing follows the last case."""
    tokens.case = 0
    if lost_from and on_invalid is not None:
        if lost_from <= count:
            on_invalid(
                InputError(
                    f"cases {lost_from}-{count} not read: the file cannot be followed past case"
                    f" {lost_from - 1}",
                    file=tokens.name,
                )
            )
        return
    if not tokens.at_end():
        extra = tokens.error(
            f"unexpected data after the last of {count} cases (T = {count})",
            tokens.line_at(tokens.mark()),
        )
        if on_invalid is None:
            raise extra
        on_invalid(extra)
