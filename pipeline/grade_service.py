"""Grading runs: reference answers through the pipeline (cached by content), then verdicts."""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

from pipeline import collector, producer, service
from pipeline.config import Settings
from pipeline.errors import InputError, UsageError
from pipeline.grading import FileResult, Scoring, Standing, compare, scoreboard
from pipeline.problem import Problem
from pipeline.progress import Progress


@dataclass(frozen=True)
class Test:
    """An input file with optional official answers."""

    name: str
    input: Path
    answers: Path | None = None


@dataclass(frozen=True)
class Submission:
    """A contestant's output for a test (None: the file does not exist)."""

    contestant: str
    test: str
    path: Path | None
    label: str


@dataclass
class GradeRun:
    """Everything a grading run found."""

    results: list[FileResult]
    standings: list[Standing]
    solved: dict[str, bool]  # test name -> True when the pipeline had to solve it


def reference_answers(
    settings: Settings, problem: Problem, tests: list[Test], quiet: bool
) -> tuple[dict[str, list[str]], dict[str, bool]]:
    """Answers of every test: from its answer file, else solved (or found cached) in Redis."""
    answers = {t.name: _read_answers(problem, t.answers) for t in tests if t.answers}
    solved: dict[str, bool] = {}
    todo = [t for t in tests if t.answers is None]
    if not todo:
        return answers, solved
    progress = Progress("answers", enabled=not quiet)
    with service.cluster(settings) as c:
        jobs = []
        for test in todo:
            job = producer.submit(
                problem, test.input, c.store, c.send, c.settings, on_cases=progress.add_total
            )
            jobs.append((test, job))
        for test, job in jobs:
            done = collector.wait_for(
                c.store, job.job_id, poll=c.settings.poll_interval,
                on_progress=lambda p: progress.job_done(p.job_id, p.done),
            )  # fmt: skip
            text = io.StringIO()
            collector.write_result(c.store, job.job_id, problem, done, text)
            collector.finish(c.store, job.job_id, c.settings.result_ttl)
            answers[test.name] = text.getvalue().splitlines()
            solved[test.name] = job.queued > 0
    progress.close()
    return answers, solved


def _read_answers(problem: Problem, path: Path) -> list[str]:
    try:
        lines = [line.strip() for line in path.read_text(errors="replace").splitlines()]
    except OSError as exc:
        raise UsageError(f"cannot read answers {path}: {exc.strerror}") from None
    words = [line for line in lines if line]
    for number, word in enumerate(words, 1):
        if word not in problem.answers:
            raise InputError(
                f"answer {number} is {word!r}, not one of {', '.join(problem.answers)}",
                file=str(path),
            )
    return words


def grade(
    settings: Settings,
    problem: Problem,
    tests: list[Test],
    submissions: list[Submission],
    *,
    scoring: Scoring,
    ignore_case: bool,
    quiet: bool = False,
) -> GradeRun:
    """Verdicts of every submission against the answers of its test."""
    answers, solved = reference_answers(settings, problem, tests, quiet)
    results = []
    for sub in submissions:
        expected = answers[sub.test]
        output = _read_output(sub.path) if sub.path else []
        cases = compare(expected, output, ignore_case=ignore_case)
        result = FileResult(sub.label, sub.test, sub.contestant, cases)
        result.score, result.max_score = scoring.score({sub.test: cases})
        results.append(result)
    return GradeRun(results, scoreboard(results, scoring), solved)


def _read_output(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None


def bulk_layout(tests_dir: Path, submissions_dir: Path) -> tuple[list[Test], list[Submission]]:
    """NAME.in (+ NAME.ans) tests; one folder of NAME.out files per contestant."""
    if not tests_dir.is_dir():
        raise UsageError(f"tests folder {tests_dir} does not exist")
    if not submissions_dir.is_dir():
        raise UsageError(f"submissions folder {submissions_dir} does not exist")
    tests = []
    for path in sorted(tests_dir.glob("*.in")):
        ans = path.with_suffix(".ans")
        tests.append(Test(path.stem, path, ans if ans.is_file() else None))
    if not tests:
        raise UsageError(f"no NAME.in files in {tests_dir}")
    submissions = []
    for folder in sorted(p for p in submissions_dir.iterdir() if p.is_dir()):
        for test in tests:
            out = folder / f"{test.name}.out"
            label = f"{folder.name}/{test.name}.out"
            submissions.append(Submission(folder.name, test.name, out if out.is_file() else None,
                                          label))  # fmt: skip
    return tests, submissions
