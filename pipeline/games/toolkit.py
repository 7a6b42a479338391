"""Problem-setter tools: deterministic generation, validation and stress tests."""

from __future__ import annotations

import io
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from pipeline.config import LimitSettings
from pipeline.errors import InputError, UsageError
from pipeline.games.problem import Case, Problem
from pipeline.games.reader import read_cases
from pipeline.games.tokens import TokenReader

MIXED = "mixed"
SMALL = "small"  # the shape every game offers for exhaustive search
MAX_SHRINK_STEPS = 10_000


def generate(problem: Problem, count: int, seed: int, shape: str, size: int) -> Iterator[Case]:
    """`count` valid cases; the same arguments always give the same cases."""
    if shape != MIXED and shape not in problem.shapes:
        known = ", ".join((MIXED, *problem.shapes))
        raise UsageError(f"{problem.name} has no shape {shape!r}; known: {known}")
    shapes = [s for s in problem.shapes if s != SMALL] if shape == MIXED else [shape]
    rng = random.Random(seed)
    for _ in range(count):
        yield problem.generate(rng, rng.choice(shapes), size)


def write_input(problem: Problem, cases: list[Case], out: TextIO) -> None:
    """An input file: T, then every case."""
    out.write(f"{len(cases)}\n")
    for case in cases:
        out.write(problem.format_case(case))


def validate(problem: Problem, path: Path, limits: LimitSettings, *, strict: bool) -> int:
    """The number of cases of a valid file; InputError naming the first problem otherwise."""
    try:
        with path.open("rb") as stream:
            tokens = TokenReader(
                stream, str(path), max_token=limits.max_token_bytes, max_bytes=limits.max_file_bytes
            )
            limit = problem.contest_max_cases if strict and problem.contest_max_cases else None
            cases = read_cases(problem, tokens, limit) if limit else read_cases(problem, tokens)
            count = 0
            for numbered in cases:
                count += 1
                broken = problem.contest_limits(numbered.case) if strict else None
                if broken:
                    line = tokens.line_at(numbered.mark)
                    raise InputError(broken, file=str(path), line=line, case=count)
            return count
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None


def is_valid(problem: Problem, case: Case) -> bool:
    """Whether a case, written out and read back, passes the game's validation unchanged."""
    text = f"1\n{problem.format_case(case)}".encode()
    try:
        read = [n.case for n in read_cases(problem, TokenReader(io.BytesIO(text), "<case>"))]
    except InputError:
        return False
    return bool(read == [case])


Solver = Callable[[list[Case]], list[str]]  # cases -> answer words


@dataclass(frozen=True)
class Mismatch:
    """A case where the solver and exhaustive search disagree."""

    case: Case
    found: str
    expected: str


def stress(
    problem: Problem, solver: Solver, count: int, seed: int, *, size: int = 5
) -> tuple[int, Mismatch | None]:
    """Compare `solver` with exhaustive search on `count` small cases; shrink a mismatch."""
    cases = list(generate(problem, count, seed, SMALL, size))
    words = solver(cases)
    for case, found in zip(cases, words, strict=True):
        expected = problem.answers[problem.exhaustive(case)]
        if found != expected:
            return count, shrink(problem, solver, Mismatch(case, found, expected))
    return count, None


def shrink(problem: Problem, solver: Solver, mismatch: Mismatch) -> Mismatch:
    """Greedily replace the case by smaller valid cases that still disagree."""
    current = mismatch
    improved = True
    steps = 0
    while improved and steps < MAX_SHRINK_STEPS:  # a plugin's shrink() might go in circles
        steps += 1
        improved = False
        for candidate in problem.shrink(current.case):
            if candidate == current.case or not is_valid(problem, candidate):
                continue
            expected = problem.answers[problem.exhaustive(candidate)]
            (found,) = solver([candidate])
            if found != expected:
                current, improved = Mismatch(candidate, found, expected), True
                break
    return current


def in_process_solver(problem: Problem, solve: Callable[[Case], int] | None = None) -> Solver:
    """A Solver calling `solve` (default: the game's own solver) in this process."""
    fn = solve or problem.solve
    return lambda cases: [problem.answers[fn(case)] for case in cases]


def case_texts(problem: Problem, path: Path, wanted: set[int], width: int = 100) -> dict[int, str]:
    """The input text of the wanted cases, on one line, shortened to `width` characters."""
    found: dict[int, str] = {}
    if not wanted:
        return found
    with path.open("rb") as stream:
        for numbered in read_cases(problem, TokenReader(stream, str(path))):
            if numbered.number in wanted:
                text = " / ".join(problem.format_case(numbered.case).strip().splitlines())
                found[numbered.number] = text if len(text) <= width else text[: width - 3] + "..."
                if len(found) == len(wanted):
                    break
    return found
