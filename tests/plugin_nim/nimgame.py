"""Nim with several heaps: a third game, registered only through the plugin interface."""

from __future__ import annotations

import os
import random
import signal
from collections.abc import Iterator
from functools import cache
from typing import Any

POISON = 987654321


class Nim:
    name = "nim"
    answers = ("First", "Second")
    shapes = ("random", "small")
    contest_max_cases = None

    def read_case(self, tokens: Any) -> list[int]:
        count = tokens.next_int("the number of heaps", 1, 10**6)
        return [tokens.next_int(f"heap {i}", 0, 10**18) for i in range(1, count + 1)]

    def work(self, case: list[int]) -> int:
        return len(case) + 1

    def solve(self, case: list[int]) -> int:
        if POISON in case:  # for the fault tests: this case kills the process solving it
            os.kill(os.getpid(), signal.SIGKILL)
        value = 0
        for heap in case:
            value ^= heap
        return 0 if value else 1

    def exhaustive(self, case: list[int]) -> int:
        return 0 if _mover_wins(tuple(sorted(case))) else 1

    def shrink(self, case: list[int]) -> Iterator[list[int]]:
        for i in range(len(case)):
            if len(case) > 1:
                yield case[:i] + case[i + 1 :]
            if case[i]:
                yield [*case[:i], case[i] - 1, *case[i + 1 :]]

    def contest_limits(self, case: list[int]) -> str | None:
        return None

    def prepare(self, cache: object) -> None:
        pass

    def format_case(self, case: list[int]) -> str:
        return f"{len(case)}\n{' '.join(map(str, case))}\n"

    def generate(self, rng: random.Random, shape: str, size: int) -> list[int]:
        top = 4 if shape == "small" else max(size, 1)
        return [rng.randint(0, top) for _ in range(rng.randint(1, 3 if shape == "small" else 8))]


@cache
def _mover_wins(heaps: tuple[int, ...]) -> bool:
    for i, heap in enumerate(heaps):
        for left in range(heap):
            after = tuple(sorted((*heaps[:i], left, *heaps[i + 1 :])))
            if not _mover_wins(after):
                return True
    return False


PROBLEM = Nim()
