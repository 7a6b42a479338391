"""A grading's expected answers: read from answer files, or asked of a solver for the tests
that have none, as the answer codes verdicts are compared with."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pipeline.data.messages import encode_answer
from pipeline.errors import InputError, Refused, UsageError
from pipeline.games.problem import Problem
from pipeline.grading.rules import Found, Test

Answers = tuple[list[str], bool] | str
Solver = Callable[[list[Test]], list[Answers]]
"""Answers of tests without answer files: each the answer lines and whether they were
computed now (else cached), or the error line of a test whose input is invalid."""


def expected(problem: Problem, tests: list[Test], solver: Solver, keep_going: bool) -> Found:
    """Each test's answer codes, from its answer file or else from `solver`; with
    `keep_going`, a test whose input or answers are invalid is marked broken instead."""
    found = Found({}, {}, {})
    todo = []
    for test in tests:
        if test.answers is None:
            todo.append(test)
            continue
        try:
            words = read_answers(problem, test.answers, case_count(test.input))
            found.expected[test.name] = codes(problem, words)
            found.solved[test.name] = None
        except InputError as exc:
            if not keep_going:
                raise
            found.broken[test.name] = str(exc)
    for test, answer in zip(todo, solver(todo) if todo else [], strict=True):
        if isinstance(answer, str):
            if not keep_going:
                raise Refused(answer.removeprefix("error: "))  # one line: the first bad test
            found.broken[test.name] = answer.removeprefix("error: ")
            continue
        found.expected[test.name] = codes(problem, answer[0])
        found.solved[test.name] = answer[1]
    return found


def codes(problem: Problem, words: list[str]) -> str:
    index = {word: encode_answer(i) for i, word in enumerate(problem.answers)}
    return "".join(index[word] for word in words)


def read_answers(problem: Problem, path: Path, cases: int) -> list[str]:
    """The official answers, one word per non-blank line, exactly one per case of the test."""
    try:
        lines = [line.strip() for line in path.read_text(errors="replace").splitlines()]
    except OSError as exc:
        raise UsageError(f"cannot read answers {path}: {exc.strerror}") from None
    words: list[str] = []
    for number, word in enumerate(lines, 1):
        if not word:
            continue
        if word not in problem.answers:
            raise InputError(
                f"{word[:40]!r} is not one of {', '.join(problem.answers)}",
                file=str(path),
                line=number,
                case=len(words) + 1,
            )
        words.append(word)
    if len(words) != cases:
        raise InputError(f"{len(words)} answers for the {cases} cases of its test", file=str(path))
    return words


def case_count(path: Path) -> int:
    """A test's number of cases T, its first token (the test itself is checked when solved)."""
    try:
        with path.open("rb") as stream:
            head = stream.read(64).split()
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    if not head or not head[0].isdigit() or len(head[0]) > 18:
        raise InputError("the first token must be the number of cases", file=str(path), line=1)
    return int(head[0])
