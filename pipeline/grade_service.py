"""Grading runs: reference answers through the pipeline (cached by content), then verdicts."""

from __future__ import annotations

import io
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from pipeline import escape, files, reports, service, toolkit
from pipeline.config import Settings
from pipeline.errors import InputError, Refused, UsageError
from pipeline.grading import FileResult, Scoring, Standing, compare, scoreboard
from pipeline.problem import Problem


@dataclass(frozen=True)
class Test:
    """An input file with optional official answers."""

    name: str  # printable (see escape.file_name)
    input: Path
    answers: Path | None = None

    @property
    def path_stem(self) -> str:
        """The name as the file system spells it."""
        return self.input.stem


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
    solved: dict[str, bool | None]  # test -> solved now (True), cached (False), a file (None)

    @property
    def all_accepted(self) -> bool:
        """Every case of every submission accepted, and no output longer than its test
        (what exit status 0 of `grade` promises)."""
        return all(not r.mismatches() for r in self.results)


@dataclass(frozen=True)
class ReportFiles:
    """The report files a grading run writes (None: not wanted)."""

    json: Path | None = None
    junit: Path | None = None
    scoreboard: Path | None = None  # .json, else CSV

    def _paths(self) -> list[Path]:
        return [p for p in (self.json, self.junit, self.scoreboard) if p is not None]

    def check(self, graded: list[Path]) -> None:
        """Before any work: each report writable, apart, and none of them a graded file."""
        paths = self._paths()
        if len({os.path.realpath(p) for p in paths}) < len(paths):
            raise UsageError("--json, --junit and --scoreboard must name different files")
        for path in paths:
            files.check_output(path, graded)

    def write(self, problem: Problem, tests: list[Test], run: GradeRun) -> None:
        """Write every wanted report."""
        if self.json:
            files.atomic_write(
                self.json,
                reports.json_report(problem.name, run.results, run.standings, run.solved),
            )
        if self.junit:
            files.atomic_write(self.junit, reports.junit_report(run.results))
        if self.scoreboard:
            board = (
                reports.scoreboard_json(run.standings)
                if self.scoreboard.suffix == ".json"
                else reports.scoreboard_csv(run.standings, [t.name for t in tests])
            )
            files.atomic_write(self.scoreboard, board)


def summary(problem: Problem, tests: list[Test], run: GradeRun, *, standings: bool) -> str:
    """The text summary, with the input of each mismatch shown, then the standings."""
    inputs = {t.name: t.input for t in tests}
    wanted: dict[str, set[int]] = {}
    for r in run.results:
        shown = [c.index for c in r.mismatches()[: reports.SHOWN_MISMATCHES]]
        wanted.setdefault(r.test, set()).update(shown)
    texts = {name: toolkit.case_texts(problem, inputs[name], idx) for name, idx in wanted.items()}
    text = reports.text_summary(run.results, lambda r, i: texts[r.test].get(i))
    if standings:
        text += reports.standings_text(run.standings)
    return text


Solver = Callable[[list["Test"]], list[tuple[list[str], bool]]]
"""Answers of tests without answer files, each with whether it was computed now (else cached)."""


def reference_answers(
    settings: Settings, problem: Problem, tests: list[Test], quiet: bool,
    solver: Solver | None = None,
) -> tuple[dict[str, list[str]], dict[str, bool | None]]:  # fmt: skip
    """Answers of every test: from its answer file, else from `solver` (default: solved, or
    found cached, by the same orchestration as `solve`)."""
    answers = {t.name: _read_answers(problem, t.answers) for t in tests if t.answers}
    todo = [t for t in tests if t.answers is None]
    solved: dict[str, bool | None] = dict.fromkeys(answers)
    if not todo:
        return answers, solved
    found = (solver or (lambda todo: _solve_here(settings, problem, todo, quiet)))(todo)
    for test, (lines, computed) in zip(todo, found, strict=True):
        answers[test.name], solved[test.name] = lines, computed
    return answers, solved


def _solve_here(
    settings: Settings, problem: Problem, todo: list[Test], quiet: bool
) -> list[tuple[list[str], bool]]:
    texts = {t.name: io.StringIO() for t in todo}
    errors: list[str] = []
    outcomes = service.run(
        settings, problem, [service.FileJob(t.input, texts[t.name]) for t in todo],
        errors.append, quiet=quiet, label="answers",
    )  # fmt: skip
    if errors:
        raise Refused(errors[0].removeprefix("error: "))  # one line: the first bad test
    found = []
    for test, outcome in zip(todo, outcomes, strict=True):
        assert outcome.job is not None
        found.append((texts[test.name].getvalue().splitlines(), outcome.job.queued > 0))
    return found


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
    solver: Solver | None = None,
) -> GradeRun:
    """Verdicts of every submission against the answers of its test."""
    answers, solved = reference_answers(settings, problem, tests, quiet, solver)
    results = []
    for sub in submissions:
        expected = answers[sub.test]
        output = output_lines(sub.path) if sub.path else iter(())
        cases = compare(expected, output, ignore_case=ignore_case)
        result = FileResult(sub.label, sub.test, sub.contestant, cases)
        result.score, result.max_score = scoring.score({sub.test: cases})
        results.append(result)
    return GradeRun(results, scoreboard(results, scoring), solved)


MAX_LINE = 4096  # bytes of an output line held and judged; a longer line cannot be right


def output_lines(path: Path) -> Iterator[str]:
    """The lines of a submission file, each cut at MAX_LINE bytes, read as a stream.

    Only a regular file is read, and a symbolic link is not followed (O_NOFOLLOW), even if
    the file was swapped for one after the folder was listed.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as stream:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UsageError(f"cannot read {path}: not a regular file")
        while line := stream.readline(MAX_LINE + 1):
            if len(line) > MAX_LINE and not line.endswith(b"\n"):
                while (rest := stream.readline(1 << 16)) and not rest.endswith(b"\n"):
                    pass  # the rest of an overlong line is skipped, never held
                line = line[:MAX_LINE] + b"..."
            yield line.decode("utf-8", "replace")


def bulk_layout(
    tests_dir: Path, submissions_dir: Path
) -> tuple[list[Test], list[Submission], list[str]]:
    """NAME.in (+ NAME.ans) tests; one folder of NAME.out files per contestant; notes.

    Nothing in the submissions folder that is not a plain folder or a regular file is
    followed or read: a symbolic link (to /etc/passwd, to the tests, out of the folder), a
    FIFO or a device is skipped with a note, and a skipped output is graded all MISSING.
    """
    if not tests_dir.is_dir():
        raise UsageError(f"tests folder {tests_dir} does not exist")
    if not submissions_dir.is_dir():
        raise UsageError(f"submissions folder {submissions_dir} does not exist")
    tests = []
    for path in sorted(tests_dir.glob("*.in")):
        ans = path.with_suffix(".ans")
        tests.append(Test(escape.file_name(path.stem), path, ans if ans.is_file() else None))
    if not tests:
        raise UsageError(f"no NAME.in files in {tests_dir}")
    notes: list[str] = []
    submissions = []
    for folder in _contestant_folders(submissions_dir, notes):
        contestant = escape.file_name(folder.name)
        for test in tests:
            out = folder / f"{test.path_stem}.out"
            label = f"{contestant}/{test.name}.out"
            if out.is_symlink() or (out.exists() and not out.is_file()):
                kind = "a symbolic link" if out.is_symlink() else "not a regular file"
                notes.append(f"{label} is {kind}: not read, graded as missing")
                out_path = None
            else:
                out_path = out if out.exists() else None
            submissions.append(Submission(contestant, test.name, out_path, label))
    return tests, submissions, notes


def _contestant_folders(submissions_dir: Path, notes: list[str]) -> list[Path]:
    """The real folders directly in `submissions_dir`, links noted and skipped."""
    folders, names = [], set()
    for entry in sorted(submissions_dir.iterdir()):
        shown = escape.file_name(entry.name)
        if entry.is_symlink():
            notes.append(f"{shown} is a symbolic link: not followed, not graded")
            continue
        if not entry.is_dir():
            continue
        if shown in names:
            raise UsageError(f"two contestant folders are both shown as {shown!r}: rename one")
        names.add(shown)
        folders.append(entry)
    return folders
