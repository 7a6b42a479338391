"""Judging contestants' programs: each run on every test in the workers' sandboxes, a verdict
for every case (only (program, test) pairs whose verdicts are not stored yet); the
`grade --programs` workflow, and the set-up judging and hacking share."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pipeline import escape
from pipeline.app.cluster import Cluster, cluster
from pipeline.app.grade import Graded, Reporting, cluster_solver, run_of, write_reports
from pipeline.app.solve import Report
from pipeline.app.verdict_job import VerdictJob, verdicts
from pipeline.config import Settings
from pipeline.data.producer import Queuer
from pipeline.errors import UsageError
from pipeline.games.problem import Problem
from pipeline.grading import comparing, layout
from pipeline.grading.rules import Scoring, Test
from pipeline.grading.run import Contest, GradeRun
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
    problem, settings = how.problem, c.settings.judge
    subs = judged.submissions(programs, tests)
    salt = {p.contestant: judged.salt(settings, p, lazy=how.lazy) for p in programs}
    contest = Contest(problem, tests, subs, how.scoring, False, salt)
    chunks = judged.Chunks(problem, settings, programs, lazy=how.lazy)
    asked, did = [0], list[JobCounters]()

    def judge_todo(todo: Sequence[comparing.Output]) -> Iterator[FileVerdicts]:
        asked[0] = len(todo)
        return _judged(c, todo, chunks, progress, did.append)

    store = RedisVerdicts(c.store.client, c.settings.result_ttl)
    answered = cluster_solver(c, problem, progress)
    run = run_of(contest, answered, store, judge_todo, how.keep_going)
    known = "; the rest were known" if asked[0] < len(subs) else ""
    report(f"judged {asked[0]} of {len(subs)} (program, test) pairs{known}")
    if did and did[0].judging is not None:
        report(judging_line(did[0].judging._asdict()))
    return run


def _judged(
    c: Cluster,
    todo: Sequence[comparing.Output],
    chunks: judged.Chunks,
    progress: ProgressBar,
    done: Callable[[JobCounters], None],
) -> Iterator[FileVerdicts]:
    """The verdicts of `todo`, judged by the cluster's workers in one judging job (whose
    counters `done` hears)."""

    def produce(queue: Queuer) -> tuple[int, int]:
        count, cases = chunks.produce(queue, todo)
        progress.add_total(cases)
        return count, cases

    programs = len({o.path for o in todo})
    job = VerdictJob("judge", chunks.problem.name, chunks.settings.batch_cases, programs)
    for found in verdicts(c, job, todo, produce, progress, done=done):
        yield stopped_at_first_failure(found) if chunks.lazy else found
