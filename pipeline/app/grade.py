"""Grading output files: answers through the pipeline, then each file compared by the
workers once (verdicts are kept by content), then reports streamed from the stored
verdicts; the `grade` workflow, and the steps judging shares with it."""

from __future__ import annotations

import io
import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from pipeline import escape
from pipeline.app.cluster import Cluster, cluster
from pipeline.app.solve import FileJob, Report, Solving, run_on
from pipeline.app.verdict_job import VerdictJob, verdicts
from pipeline.config import Settings
from pipeline.data.files import check_input
from pipeline.data.messages import ComparePayload, Segment
from pipeline.data.producer import Queuer
from pipeline.errors import UsageError
from pipeline.games.problem import Problem
from pipeline.grading import answers, comparing, layout
from pipeline.grading.answers import Answers, Solver
from pipeline.grading.report_files import ReportFiles, summary
from pipeline.grading.rules import Scoring, Submission, Test
from pipeline.grading.run import Compare, Contest, GradeRun, grade_files
from pipeline.grading.verdict_store import MemoryVerdicts, RedisVerdicts, VerdictStore
from pipeline.grading.verdicts import FileVerdicts
from pipeline.progress import ProgressBar


@dataclass(frozen=True)
class Reporting:
    """What a grading writes once its verdicts are in: report files, and the text summary
    (then the standings, unless `standings` is off) on `summary`."""

    files: tuple[ReportFiles, ...] = ()
    summary: TextIO | None = None
    standings: bool = True

    def check(self, graded: Iterator[Path]) -> None:
        """Before any work: every report writable, none of them a graded file."""
        kept = list(graded)
        for report in self.files:
            report.check(kept)


@dataclass(frozen=True)
class GradeRequest:
    """`grade` of output files: `files` (an input, then the outputs graded against it, with
    `answers` or else solved), or the bulk folders `tests` and `submissions`."""

    problem: Problem
    files: list[Path] = field(default_factory=list)
    answers: Path | None = None
    tests: Path | None = None
    submissions: Path | None = None
    scoring: Scoring = field(default_factory=Scoring)
    ignore_case: bool = False
    keep_going: bool = False
    quiet: bool = False
    reporting: Reporting = field(default_factory=Reporting)

    @property
    def bulk(self) -> bool:
        """Whether the bulk folders are graded."""
        return self.tests is not None or self.submissions is not None

    def layout(self) -> tuple[list[Test], Sequence[Submission], list[str]]:
        """Tests, submissions and notes, checked before any work (reports included)."""
        tests, subs, notes = self._layout()
        graded = [t.input for t in tests] + [t.answers for t in tests if t.answers is not None]
        self.reporting.check(itertools.chain(graded, (s.path for s in subs if s.path)))
        return tests, subs, notes

    def _layout(self) -> tuple[list[Test], Sequence[Submission], list[str]]:
        if self.bulk:
            if self.files or self.answers or not (self.tests and self.submissions):
                raise UsageError("bulk grading takes --tests DIR and --submissions DIR, no files")
            return layout.bulk_layout(self.tests, self.submissions)
        if len(self.files) < 2:
            raise UsageError("give an INPUT and at least one SUBMISSION (or --tests/--submissions)")
        if any(report.scoreboard for report in self.reporting.files):
            raise UsageError("--scoreboard needs bulk mode (--tests and --submissions)")
        given, *outputs = self.files
        check_input(given)
        test = Test(escape.file_name(given.stem), given, self.answers)
        subs, notes = [], []
        for path in outputs:
            label = escape.file_name(str(path))
            if path.is_dir():
                raise UsageError(f"cannot grade {label}: it is a folder")
            if not path.exists():
                notes.append(f"{label} does not exist: graded all MISSING")
            found = path if path.exists() else None
            subs.append(Submission(escape.file_name(path.stem), test.name, found, label))
        return [test], subs, notes


@dataclass(frozen=True)
class Graded:
    """What a grading (or judging) found, in short."""

    status: int  # 0 all accepted, 1 some wrong, 2 some test not graded
    all_accepted: bool
    tests: int
    submissions: int
    contestants: int
    cases_wrong: int
    broken: dict[str, str]  # tests not graded, with why
    notes: list[str]  # on files skipped or missing

    @classmethod
    def of(cls, run: GradeRun, notes: list[str]) -> Graded:
        """The short form of a run."""
        return cls(
            run.exit_status(),
            run.all_accepted,
            len(run.tests),
            len(run.contest.submissions),
            len(run.standings),
            run.wrong_cases,
            dict(run.found.broken),
            notes,
        )


def grade(
    settings: Settings, request: GradeRequest, report: Report, solver: Solver | None = None
) -> Graded:
    """The `grade` workflow: verdicts of every submission against its test's answers, then
    the reports. The workers compare the files (only those whose verdicts are not stored
    yet); with a `solver` (a server's answers), the files are compared here."""
    problem = request.problem
    tests, subs, notes = request.layout()
    for line in notes:
        report(f"warning: {escape.terminal(line)}")
    progress = ProgressBar("grade", enabled=not request.quiet)
    contest = Contest(problem, tests, subs, request.scoring, request.ignore_case)
    try:
        if solver is not None:  # a server's answers: the files are compared here
            compare = lambda todo: compare_here(todo, contest)  # noqa: E731
            run = _run_of(contest, solver, MemoryVerdicts(), compare, request.keep_going)
            write_reports(run, request.reporting, report)
        else:
            with cluster(settings) as c:
                store = RedisVerdicts(c.store.client, settings.result_ttl)
                answered = cluster_solver(c, problem, progress)
                compare = lambda todo: _compare_on(c, todo, contest, progress)  # noqa: E731
                run = _run_of(contest, answered, store, compare, request.keep_going)
                write_reports(run, request.reporting, report)
    finally:
        progress.close()
    return Graded.of(run, notes)


def _run_of(
    contest: Contest, solver: Solver, store: VerdictStore, compare: Compare, keep_going: bool
) -> GradeRun:
    """The answers of the contest's tests, then the verdicts of the files not graded yet."""
    found = answers.expected(contest.problem, contest.tests, solver, keep_going)
    return grade_files(contest, found, store, compare)


def write_reports(run: GradeRun, reporting: Reporting, report: Report) -> None:
    """The tests not graded as error lines, then every report of `reporting`, while the
    run's verdicts can be read."""
    for test, error in sorted(run.found.broken.items()):
        report(f"error: test {escape.terminal(test)} not graded: {escape.terminal(error)}")
    also = [summary(reporting.summary, standings=reporting.standings)] if reporting.summary else []
    for files in reporting.files or ((ReportFiles(),) if also else ()):
        files.write(run, *also)
        also = []


def cluster_solver(c: Cluster, problem: Problem, progress: ProgressBar) -> Solver:
    """The answers of tests without answer files, solved on the cluster."""

    def solve(todo: list[Test]) -> list[Answers]:
        texts = {t.name: io.StringIO() for t in todo}
        outcomes = run_on(
            c,
            Solving(problem),
            [FileJob(t.input, texts[t.name]) for t in todo],
            lambda line: None,
            progress,
        )
        found: list[Answers] = []
        for test, outcome in zip(todo, outcomes, strict=True):
            if outcome.job is None:
                found.append(outcome.error or f"error: {test.input}: not solved")
            else:
                found.append((texts[test.name].getvalue().splitlines(), outcome.job.queued > 0))
        return found

    return solve


def _compare_on(
    c: Cluster, todo: Sequence[comparing.Output], contest: Contest, progress: ProgressBar
) -> Iterator[FileVerdicts]:
    """The verdicts of `todo`, compared by the cluster's workers in one comparison job; a
    small job (chunk.local_cases: a re-grade of a few files) is run here, through the same
    runner and records, as it is produced (no worker has to start)."""
    problem, s = contest.problem.name, c.settings

    def produce(queue: Queuer) -> tuple[int, int]:
        return comparing.produce(
            queue,
            todo,
            problem=problem,
            ignore_case=contest.ignore_case,
            on_cases=progress.add_total,
            on_file=lambda n: progress.set_files(n, len(todo)),
        )

    local = sum(len(o.expected) for o in todo) <= s.chunk.local_cases
    job = VerdictJob("compare", problem, s.chunk.max_cases)
    return verdicts(c, job, todo, produce, progress, send=c.run_here() if local else None)


def compare_here(todo: Sequence[comparing.Output], contest: Contest) -> Iterator[FileVerdicts]:
    """The verdicts of `todo`, compared in this process a file at a time (with the workers'
    code): for `grade --server`, whose machine may not reach Redis."""
    from workers.runner import compare_chunk

    problem, ignore_case = contest.problem, contest.ignore_case
    for output in todo:
        result = FileVerdicts()

        def fold(segments: list[Segment], result: FileVerdicts = result) -> None:
            payload = ComparePayload(problem.name, ignore_case, segments)
            for _, codes, shown, extra, usage in comparing.segments_of(
                *compare_chunk(problem, payload)
            ):
                comparing.add(result, codes, shown, extra, usage)

        packer = comparing.Packer(fold, comparing.CHUNK_CASES)
        if output.path is None:
            packer.file(0, output.expected, iter(()))
        else:
            with comparing.open_output(output.path) as stream:
                packer.file(0, output.expected, comparing.LineReader(stream).blocks())
        packer.flush()
        yield result
