"""Judging contestants' programs: each run on every test in the workers' sandboxes, a verdict
for every case (only (program, test) pairs whose verdicts are not stored yet); the
`grade --programs` workflow, and the set-up judging and hacking share."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pipeline import escape
from pipeline.app.cluster import Cluster, cluster
from pipeline.app.grade import Graded, Reporting, cluster_solver, write_reports
from pipeline.app.solve import Report
from pipeline.app.verdict_job import Produce, VerdictJob, start, verdicts
from pipeline.config import Settings
from pipeline.data.producer import Queuer
from pipeline.errors import UsageError
from pipeline.games.problem import Problem
from pipeline.grading import answers, comparing, layout
from pipeline.grading.rules import Scoring, Test
from pipeline.grading.run import Contest, GradeRun, files_to_grade, grade_files
from pipeline.grading.verdict_store import RedisVerdicts
from pipeline.grading.verdicts import FileVerdicts, stopped_at_first_failure
from pipeline.jobs.view import judging_line
from pipeline.judging import programs as judged
from pipeline.judging.programs import Program
from pipeline.progress import ProgressBar
from pipeline.store.jobstate import JobCounters

_SETTINGS = ("time_limit", "memory_limit_mb", "output_limit_mb")  # of JudgeSettings


@dataclass(frozen=True)
class JudgeLimits:
    """A judged program's limits given with a request (None: the configured one)."""

    time_limit: float | None = None  # CPU seconds per case
    memory_limit: int | None = None  # MB per case
    output_limit: int | None = None  # MB per run

    def __post_init__(self) -> None:
        for name in ("time", "memory", "output"):
            value = getattr(self, f"{name}_limit")
            if value is not None and value <= 0:
                raise UsageError(f"--{name}-limit must be positive")

    @classmethod
    def of(cls, given: dict[str, float]) -> JudgeLimits:
        """The limits of the judge settings they set (as `given` says them)."""
        return cls(*(given.get(name) for name in _SETTINGS))  # type: ignore[arg-type]

    def given(self) -> dict[str, float]:
        """The judge settings they set."""
        values = (self.time_limit, self.memory_limit, self.output_limit)
        return {k: v for k, v in zip(_SETTINGS, values, strict=True) if v is not None}

    def applied(self, settings: Settings) -> Settings:
        """The settings with these limits."""
        return settings.replaced(judge=settings.judge.replaced(**self.given()))


@dataclass(frozen=True)
class Prepared:
    """A judging's (or hack search's) set-up: its settings, tests, programs and notes."""

    settings: Settings
    tests: list[Test] | None
    programs: list[Program]
    notes: list[str]


def prepare(
    settings: Settings,
    limits: JudgeLimits,
    tests: Path | None,
    programs: Path,
    report: Report,
    *,
    sandbox: bool = True,
) -> Prepared:
    """The one set-up of judging and hacking, before any work: the limits applied, the
    sandbox checked when this machine's workers judge, the tests and programs found, and
    the notes on skipped folders reported as warnings (`sandbox`: unless they judge
    elsewhere)."""
    settings = limits.applied(settings)
    if sandbox and not settings.broker_url:  # local workers judge: their sandbox first
        from pipeline.judging.sandbox import Sandbox

        Sandbox(settings.judge.first_uid, settings.judge.slots).check()
    found = layout.tests_in(tests) if tests is not None else None
    entries, notes = judged.find_programs(programs, settings.judge.languages)
    for note in notes:
        report(f"warning: {escape.terminal(note)}")
    return Prepared(settings, found, entries, notes)


@dataclass(frozen=True)
class Judgment:
    """How programs are judged: by which game's answers and scoring, whether a test with an
    invalid input is let through, and whether a test stops at its first failing case."""

    problem: Problem
    scoring: Scoring = field(default_factory=Scoring)
    keep_going: bool = False
    lazy: bool = False


@dataclass(frozen=True)
class JudgeRequest:
    """`grade --programs`: every program of `programs` run on every test of `tests`."""

    problem: Problem
    tests: Path
    programs: Path
    limits: JudgeLimits = field(default_factory=JudgeLimits)
    scoring: Scoring = field(default_factory=Scoring)
    keep_going: bool = False
    lazy: bool = False  # stop each test at its first failing case (the rest NR)
    quiet: bool = False
    reporting: Reporting = field(default_factory=Reporting)

    def prepare(self, settings: Settings, report: Report, *, sandbox: bool = True) -> Prepared:
        """The set-up, with the report files checked against the tests."""
        prepared = prepare(
            settings, self.limits, self.tests, self.programs, report, sandbox=sandbox
        )
        self.reporting.check(t.input for t in prepared.tests or [])
        return prepared


def judge(settings: Settings, request: JudgeRequest, report: Report) -> Graded:
    """The `grade --programs` workflow: judged by the workers, then the reports; `report`
    hears how many pairs were judged now."""
    prepared = request.prepare(settings, report)
    how = Judgment(request.problem, request.scoring, request.keep_going, request.lazy)
    progress = ProgressBar("judge", enabled=not request.quiet)
    try:
        with cluster(prepared.settings) as c:
            run = judge_on(c, how, prepared.tests or [], prepared.programs, progress, report=report)
            write_reports(run, request.reporting, report)
    finally:
        progress.close()
    return Graded.of(run, prepared.notes)


def judge_on(
    c: Cluster,
    how: Judgment,
    tests: list[Test],
    programs: list[Program],
    progress: ProgressBar,
    *,
    report: Report = lambda line: None,
) -> GradeRun:
    """Judging on a cluster already open (a hack search judges many times); `report` hears
    how many pairs were judged now."""
    judging = _Judging(c, how, tests, programs, progress)
    asked, did = [0], list[JobCounters]()

    def judge_todo(todo: Sequence[comparing.Output]) -> Iterator[FileVerdicts]:
        asked[0] = len(todo)
        found = verdicts(
            c, judging.job(todo), todo, judging.produce(todo), progress, done=did.append
        )
        return (stopped_at_first_failure(v) if how.lazy else v for v in found)

    run = grade_files(judging.contest, judging.found, judging.store, judge_todo)
    subs = len(judging.contest.submissions)
    known = "; the rest were known" if asked[0] < subs else ""
    report(f"judged {asked[0]} of {subs} (program, test) pairs{known}")
    if did and did[0].judging is not None:
        report(judging_line(did[0].judging._asdict()))
    return run


def judge_ahead(
    c: Cluster, how: Judgment, tests: list[Test], programs: list[Program], progress: ProgressBar
) -> None:
    """Queue a judging's chunks now, without waiting: a `judge_on` of the same later waits for
    them instead of queueing them (a hack search queues its next round so)."""
    judging = _Judging(c, how, tests, programs, progress)
    _, todo = files_to_grade(judging.contest, judging.found, judging.store)
    if todo:
        start(c, judging.job(todo), todo, judging.produce(todo))


class _Judging:
    """A judging's set-up on a cluster: its contest, answers, verdicts' store and chunks."""

    def __init__(
        self,
        c: Cluster,
        how: Judgment,
        tests: list[Test],
        programs: list[Program],
        progress: ProgressBar,
    ) -> None:
        problem, settings = how.problem, c.settings.judge
        subs = judged.submissions(programs, tests)
        salt = {p.contestant: judged.salt(settings, p, lazy=how.lazy) for p in programs}
        made = {p.contestant: judged.made_by(settings, p) for p in programs}
        self.contest = Contest(problem, tests, subs, how.scoring, False, salt, made)
        self.chunks = judged.Chunks(problem, settings, programs, lazy=how.lazy)
        solver = cluster_solver(c, problem, progress)
        self.found = answers.expected(problem, tests, solver, how.keep_going)
        self.store = RedisVerdicts(c.store.client, c.settings.result_ttl)
        self.progress = progress

    def job(self, todo: Sequence[comparing.Output]) -> VerdictJob:
        """The judging job of `todo`."""
        programs = len({o.path for o in todo})
        chunks = self.chunks
        return VerdictJob("judge", chunks.problem.name, chunks.settings.batch_cases, programs)

    def produce(self, todo: Sequence[comparing.Output]) -> Produce:
        """How the job of `todo` queues its chunks."""

        def produce(queue: Queuer) -> tuple[int, int]:
            count, cases = self.chunks.produce(queue, todo)
            self.progress.add_total(cases)
            return count, cases

        return produce
