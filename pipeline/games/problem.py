"""The interface a game implements (a plugin registers an object of this shape)."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from typing import Any, Protocol, runtime_checkable

from pipeline.games.tokens import TokenReader

MAX_ANSWERS = 62  # answer words a game may have: one ASCII letter or digit each on the wire

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
        """The answer words (2 to MAX_ANSWERS); solve() returns an index into them."""

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


# Optional capabilities: a game that has one of these attributes (not None) gets the faster
# path it names; the functions below are the only places that look for them.

# scan_chunk(block, pos, cases_left, target_work, max_cases, max_token, final, cases, work)
#   -> (status, pos, cases, work); see pipeline/data/slices.py and pipeline/games/_scan.h
Scanner = Callable[[bytes, int, int, int, int, int, bool, int, int], tuple[int, int, int, int]]


@runtime_checkable
class ReadsInBatches(Protocol):
    """Cases of a fixed number of tokens read many at a time (pathgame's boards)."""

    tokens_per_case: int

    def read_batch(self, tokens: list[bytes]) -> list[Case | str]:
        """One case per `tokens_per_case` tokens, or an error message for a bad one."""


@runtime_checkable
class CutsBytes(Protocol):
    """A C scanner that validates and cuts the input's bytes into chunks in the producer,
    and a C solver of such bytes in the worker (slices: no JSON, no Python per case)."""

    scan_chunk: Scanner | None
    solve_slice: Callable[[bytes | memoryview, int], bytes] | None


@runtime_checkable
class RunsInProcess(Protocol):
    """A solver that can never crash or hang its process: a command may solve small inputs
    itself, and share larger ones with its local workers."""

    in_process: bool


@runtime_checkable
class KnowsLimits(Protocol):
    """A game that knows its contest's largest cases: the hack search tries max tests of every
    shape early, grows its sizes to the limit, and shrinks a failure by its size first."""

    limit_size: int  # the largest `size` the contest allows (the generator's unit)
    size_unit: str  # what a size counts, for reports: "letters", "columns"

    def size_of(self, case: Case) -> int:
        """A case's size, in the generator's unit."""

    def max_tests(self, rng: random.Random) -> list[Case]:
        """Cases at the contest's limits, of every shape a hacker tries first."""

    def resize(self, case: Case, size: int) -> Case:
        """The case cut down to about `size` (a prefix of it, as far as the game has one)."""


@runtime_checkable
class Mutates(Protocol):
    """A game whose cases can be mutated, as fuzzers mutate seed inputs: the hack search
    reaches structures near the contest's own tests."""

    def mutate(self, rng: random.Random, case: Case, other: Case) -> Case:
        """A variant of `case` by one small change (it need not be valid: it is checked);
        `other` is another case to take from (a merge)."""


def mutator(problem: Problem) -> Mutates | None:
    """The game's mutation of cases, when it has one."""
    return problem if isinstance(problem, Mutates) else None


def limits_of(problem: Problem) -> KnowsLimits | None:
    """The game's knowledge of its limits, when it has it."""
    return problem if isinstance(problem, KnowsLimits) and problem.limit_size > 0 else None


def batch_reader(problem: Problem) -> ReadsInBatches | None:
    """The game's batch reader, when it has one."""
    return problem if isinstance(problem, ReadsInBatches) and problem.tokens_per_case else None


def scanner(problem: Problem) -> Scanner | None:
    """The game's C scanner of input bytes, when it has one (and it was built)."""
    return problem.scan_chunk if isinstance(problem, CutsBytes) else None


def slice_solver(problem: Problem) -> Callable[[bytes | memoryview, int], bytes] | None:
    """The game's C solver of input bytes, when it has one (and it was built)."""
    return problem.solve_slice if isinstance(problem, CutsBytes) else None


def runs_in_process(problem: Problem) -> bool:
    """Whether the command may run the game's solver in its own process."""
    return isinstance(problem, RunsInProcess) and bool(problem.in_process)
