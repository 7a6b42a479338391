"""The hack search's plan, the same for a seed: rounds of generated cases of every shape and
growing size, with a round of max tests at the contest's limits right after the dense small
sizes and, given the contest's cases, rounds of their mutants between the later ones; their
answers (small ones also by exhaustive search), the first failing case of a
round, the candidates of a shrinking step and the sizes a failure is bisected at. No I/O
here."""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from pipeline.errors import GamebatchError
from pipeline.games.problem import Case, KnowsLimits, Problem, limits_of, mutator
from pipeline.games.toolkit import SMALL, is_valid
from pipeline.grading.verdicts import AC

ROUND_WORK = 512  # about this much size per shape in a round: more small cases than big
MOST_PER_SHAPE = 8  # cases of one shape in a round, at most: a program endless on one size
# costs a whole time limit per case of that size
DENSE = 16  # every size up to this one gets its rounds (bugs hide at one width); then growth
EXHAUSTIVE_SIZE = 5  # cases of this size or less are also answered by exhaustive search
GROWTH = 1.25  # each round's size over the last one's
LARGEST = 200  # the largest size of a game that does not know its contest's limits
CLOSE = 256  # bisection stops once the failing size is within 1/CLOSE of a passing one
REPEAT_WORK = 16 * ROUND_WORK  # rounds at `largest` again double their cases, up to this
REPEAT_CASES = 16  # much size a shape, or this many cases a shape (the largest sizes): a small
# round is mostly the fixed cost of a judging job, a sandbox start and its payloads
MUTANTS = 64  # cases of a round of mutants of the contest's cases
STACKED = 3  # changes stacked on one mutant, at most (as a fuzzer's havoc stacks them)


@dataclass(frozen=True)
class Round:
    """One round of the search: cases of every shape at one size, the max tests, or
    mutants of the contest's own cases."""

    number: int
    size: int  # 0: mutants, of many sizes
    cases: list[Case]
    checked: list[bool]  # answered by exhaustive search too (small ones of the small shape)

    @property
    def label(self) -> str:
        """What its cases are, for progress lines."""
        return f"of size {self.size}" if self.size else "mutated from the tests"


def sizes(largest: int) -> Iterator[int]:
    """1, 2, ... DENSE, then growing by about GROWTH a step up to `largest`, then `largest`
    for ever."""
    size = 1
    while True:
        yield min(size, largest)
        size = size + 1 if size < DENSE else round(size * GROWTH)


def largest_size(problem: Problem, given: int | None) -> int:
    """The search's largest size: as given, else the contest's limit (else LARGEST)."""
    if given is not None:
        return given
    limits = limits_of(problem)
    return limits.limit_size if limits is not None else LARGEST


def rounds(
    problem: Problem, seed: int, largest: int, seeds: Sequence[Case] = ()
) -> Iterator[Round]:
    """The search's rounds: every shape of the game in each, sizes growing to `largest`
    (then new cases at that size, twice as many each round up to REPEAT_WORK), each round
    drawn from its own seeded generator; right after the dense small sizes, the game's max
    tests when `largest` reaches its limits; after those, every other round mutants of
    `seeds` (the contest's cases)."""
    limits = limits_of(problem)
    number = repeats = 0
    for size in sizes(largest):
        if number == DENSE and limits is not None and largest >= limits.limit_size:
            cases = limits.max_tests(random.Random(f"hack/{seed}/max"))
            yield Round(number, limits.limit_size, cases, [False] * len(cases))
            number += 1
        if number > DENSE and seeds and mutator(problem) is not None:
            cases = mutants(problem, seeds, random.Random(f"hack/{seed}/{number}"), MUTANTS)
            yield Round(number, 0, cases, [False] * len(cases))
            number += 1
        per_shape = max(1, min(MOST_PER_SHAPE, ROUND_WORK // size))
        if size == largest:  # the same size again: a program that passed it runs it fast
            per_shape = max(
                per_shape, min(per_shape << repeats, max(REPEAT_WORK // size, REPEAT_CASES))
            )
            repeats = min(repeats + 1, 30)
        rng = random.Random(f"hack/{seed}/{number}")
        shapes = [shape for shape in problem.shapes for _ in range(per_shape)]
        cases = [problem.generate(rng, shape, size) for shape in shapes]
        checked = [shape == SMALL and size <= EXHAUSTIVE_SIZE for shape in shapes]
        yield Round(number, size, cases, checked)
        number += 1


def bisection(fails: int, passes: int, most: int) -> list[int]:
    """The sizes to try next, between the smallest failing size and the largest passing one
    below it (0: none known): halvings until one passes, then evenly spaced sizes between
    the two; none once they are close (within 1/CLOSE, or one apart)."""
    if fails - passes <= max(1, fails // CLOSE):
        return []
    if passes == 0:
        halves: list[int] = []
        size = fails // 2
        while size >= 1 and len(halves) < most:
            halves.append(size)
            size //= 2
        return halves
    step = (fails - passes) / (most + 1)
    return sorted({round(passes + step * i) for i in range(1, most + 1)} - {passes, fails})


def resized(problem: Problem, limits: KnowsLimits, case: Case, sizes: list[int]) -> list[Case]:
    """The case cut down to each of `sizes` (only valid ones of just that size)."""
    found = []
    for size in sizes:
        smaller = limits.resize(case, size)
        if limits.size_of(smaller) == size and is_valid(problem, smaller):
            found.append(smaller)
    return found


def mutants(problem: Problem, seeds: Sequence[Case], rng: random.Random, count: int) -> list[Case]:
    """Up to `count` distinct valid mutants of the seeds, each of one to STACKED changes,
    within the contest's limits."""
    mutate = mutator(problem)
    if mutate is None or not seeds:
        return []

    def drawn() -> Iterator[Case]:
        for _ in range(count * 4):
            case = rng.choice(seeds)
            for _ in range(rng.randint(1, STACKED)):
                case = mutate.mutate(rng, case, rng.choice(seeds))
            if not problem.contest_limits(case):
                yield case

    return _distinct_valid(problem, drawn(), count)


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
    return _distinct_valid(problem, (c for c in problem.shrink(case) if c != case), most)


def _distinct_valid(problem: Problem, cases: Iterator[Case], most: int) -> list[Case]:
    """The first `most` of `cases` that are valid, each text once."""
    found: list[Case] = []
    seen: set[str] = set()
    for case in cases:
        text = problem.format_case(case)
        if text in seen or not is_valid(problem, case):
            continue
        seen.add(text)
        found.append(case)
        if len(found) == most:
            break
    return found
