"""The hack search's plan, the same for a seed: rounds of generated cases of every shape and
growing size, their answers (small ones also by exhaustive search), the first failing case
of a round and the candidates of a shrinking step. No I/O here."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

from pipeline.errors import GamebatchError
from pipeline.games.problem import Case, Problem
from pipeline.games.toolkit import SMALL, is_valid
from pipeline.grading.verdicts import AC

ROUND_WORK = 512  # about this much size per shape in a round: more small cases than big
MOST_PER_SHAPE = 8  # cases of one shape in a round, at most: a program endless on one size
# costs a whole time limit per case of that size
DENSE = 16  # every size up to this one gets its rounds (bugs hide at one width); then growth
EXHAUSTIVE_SIZE = 5  # cases of this size or less are also answered by exhaustive search
GROWTH = 1.25  # each round's size over the last one's


@dataclass(frozen=True)
class Round:
    """One round of the search: cases of every shape at one size."""

    number: int
    size: int
    cases: list[Case]
    checked: list[bool]  # answered by exhaustive search too (small ones of the small shape)


def sizes(largest: int) -> Iterator[int]:
    """1, 2, ... DENSE, then growing by about GROWTH a step up to `largest`, then `largest`
    for ever."""
    size = 1
    while True:
        yield min(size, largest)
        size = size + 1 if size < DENSE else round(size * GROWTH)


def rounds(problem: Problem, seed: int, largest: int) -> Iterator[Round]:
    """The search's rounds: every shape of the game in each, sizes growing to `largest`
    (then new cases at that size), each round drawn from its own seeded generator."""
    for number, size in enumerate(sizes(largest)):
        per_shape = max(1, min(MOST_PER_SHAPE, ROUND_WORK // size))
        rng = random.Random(f"hack/{seed}/{number}")
        shapes = [shape for shape in problem.shapes for _ in range(per_shape)]
        cases = [problem.generate(rng, shape, size) for shape in shapes]
        checked = [shape == SMALL and size <= EXHAUSTIVE_SIZE for shape in shapes]
        yield Round(number, size, cases, checked)


def truth(problem: Problem, case: Case, checked: bool) -> int:
    """The answer index of a case: the game's solver, and when `checked` exhaustive search
    too (a disagreement is the solver's bug, and no contestant is judged by it)."""
    answer = problem.solve(case)
    if checked and problem.exhaustive(case) != answer:
        text = problem.format_case(case).strip().replace("\n", " ")
        raise GamebatchError(
            f"{problem.name}'s solver and exhaustive search disagree on the case {text!r}"
        )
    return answer


def first_failure(codes: str) -> int | None:
    """The 0-based index of the first case not accepted (None: all were)."""
    for index, code in enumerate(codes):
        if code != AC:
            return index
    return None


def candidates(problem: Problem, case: Case, most: int) -> list[Case]:
    """Up to `most` valid, distinct cases smaller than `case`, in the game's shrink order."""
    found: list[Case] = []
    seen: set[str] = set()
    for smaller in problem.shrink(case):
        text = problem.format_case(smaller)
        if smaller == case or text in seen or not is_valid(problem, smaller):
            continue
        seen.add(text)
        found.append(smaller)
        if len(found) == most:
            break
    return found
