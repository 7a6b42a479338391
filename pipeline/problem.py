"""The interface a game implements (a plugin registers an object of this shape)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any, Protocol

from pipeline.tokens import TokenReader

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
        """The answer words (2 to messages.MAX_ANSWERS); solve() returns an index into them."""

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
