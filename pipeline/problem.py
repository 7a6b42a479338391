"""The interface a game implements, the registry that finds games, and the multi-case reader."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from importlib.metadata import entry_points
from typing import Any, NamedTuple, Protocol

from pipeline.errors import InputError, UsageError
from pipeline.tokens import Mark, TokenReader

ENTRY_POINT_GROUP = "gamebatch.problems"
MAX_CASES = 10**12  # T above this is certainly a mistake

# A case is whatever JSON value the game's reader returns; it crosses the broker as JSON.
Case = Any


class TableCache(Protocol):
    """Where a game keeps tables shared by all workers (Redis in production)."""

    def get(self, name: str) -> bytes | None: ...

    def set(self, name: str, value: bytes) -> None: ...


class Problem(Protocol):
    """One game. A module declares one of these and registers it as an entry point."""

    @property
    def name(self) -> str:
        """The name used with `-p` and in the entry point."""

    @property
    def answers(self) -> tuple[str, ...]:
        """The answer words; solve() returns an index into this tuple."""

    @property
    def shapes(self) -> tuple[str, ...]:
        """Names of the generator's shapes."""

    def read_case(self, tokens: TokenReader) -> Case:
        """Read and validate one case; raise tokens.error(...) on bad input."""

    def work(self, case: Case) -> int:
        """A cost estimate used to size chunks (roughly proportional to solve time)."""

    def solve(self, case: Case) -> int:
        """The answer index of a validated case."""

    def prepare(self, cache: TableCache | None) -> None:
        """Load or build shared tables once per process (no-op for most games)."""

    def format_case(self, case: Case) -> str:
        """The case as input text (without the leading T), ending in a newline."""

    def generate(self, rng: random.Random, shape: str, size: int) -> Case:
        """A random valid case of the given shape and rough size."""

    def exhaustive(self, case: Case) -> int:
        """The answer by plain game-tree search: slow, independent of solve()."""

    def shrink(self, case: Case) -> Iterator[Case]:
        """Smaller variants of a case (they need not be valid: they are re-validated)."""

    def contest_limits(self, case: Case) -> str | None:
        """What breaks the original contest's limits (for `validate --strict`), or None."""

    @property
    def contest_max_cases(self) -> int | None:
        """The contest's limit on T, if it has one."""


class NumberedCase(NamedTuple):
    """A validated case (None when invalid) with its 1-based number and where it starts."""

    number: int
    mark: Mark  # TokenReader.line_at(mark) names its first line
    case: Case


@dataclass(frozen=True)
class Batch:
    """Consecutive cases read together; case i starts at token `pos + i * per` of `block`."""

    first: int  # number of the first case
    cases: list[Case]  # None for an invalid case (keep-going mode)
    block: Any = None
    pos: int = 0
    per: int = 0

    def mark(self, i: int) -> Mark:
        """Where case `first + i` starts."""
        return (self.block, self.pos + i * self.per)


@cache
def registry() -> dict[str, Problem]:
    """All games registered under the entry point group."""
    found: dict[str, Problem] = {}
    for point in entry_points(group=ENTRY_POINT_GROUP):
        found[point.name] = point.load()
    if not found:  # running from a source tree that was never installed
        from workers import pathgame, strgame

        found = {"strgame": strgame.PROBLEM, "pathgame": pathgame.PROBLEM}
    return found


def get_problem(name: str) -> Problem:
    """The game called `name`, or a UsageError listing the known ones."""
    games = registry()
    if name not in games:
        raise UsageError(f"unknown problem {name!r}; known: {', '.join(sorted(games))}")
    return games[name]


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
    batched = getattr(problem, "tokens_per_case", None) is not None
    number = 0
    while number < count:
        number += 1
        if batched and lost is None:
            batch = _read_batched(problem, tokens, number, count, on_invalid)
            if batch is not None:
                yield batch
                number += len(batch.cases) - 1
                continue
        tokens.case = number
        try:
            if lost is not None:
                raise lost
            if tokens.at_end():
                raise tokens.error(f"file ends after {number - 1} of {count} cases (T = {count})")
            block, pos = tokens.mark()
            yield Batch(number, [problem.read_case(tokens)], block, pos)
        except InputError as exc:
            if on_invalid is None:
                raise
            if lost is None:
                on_invalid(exc)
                lost, lost_from = (None, 0) if exc.recoverable else (exc, number + 1)
            yield Batch(number, [None])
    if lost is not None and on_invalid is not None and lost_from <= count:
        on_invalid(
            InputError(
                f"cases {lost_from}-{count} not read: the file cannot be followed past case"
                f" {lost_from - 1}",
                file=tokens.name,
            )
        )
    tokens.case = 0
    if lost is None and not tokens.at_end():
        extra = tokens.error(
            f"unexpected data after the last of {count} cases (T = {count})",
            tokens.line_at(tokens.mark()),
        )
        if on_invalid is None:
            raise extra
        on_invalid(extra)
