"""The composition root: wires settings, Redis, Celery, producer and collector for each command."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from pipeline import collector, escape, files, keys, producer, producers
from pipeline.collector import INVALID_WORD, JobLost
from pipeline.config import Settings, default_state_dir
from pipeline.errors import InputError, UnknownJob
from pipeline.jobstore import JobStore
from pipeline.jobstore import Progress as JobProgress
from pipeline.problem import Problem, get_problem
from pipeline.progress import Progress
from pipeline.recovery import Recovery, queued_messages

LOST_JOB_RETRIES = 3


@dataclass
class Cluster:
    """A broker to talk to, and a health check for local workers when there are any."""

    settings: Settings  # with broker_url set
    store: JobStore
    check: Callable[[], None]
    local_workers: int = 0  # worker processes this command started on this machine

    @cached_property
    def send(self) -> producer.Send:
        """A function that queues one chunk task, in its job's lane."""
        from workers.celery_app import create_app, lane_sender

        return lane_sender(create_app(self.settings), self.store, self.settings)

    def queued_messages(self) -> int:
        """Messages waiting in every lane."""
        return queued_messages(self.store, self.settings)


@contextmanager
def cluster(settings: Settings, *, workers: bool = True) -> Iterator[Cluster]:
    """The configured broker, or the embedded Redis (with local workers unless told not to)."""
    if settings.broker_url:
        JobStore.check_url(settings.broker_url)
        yield Cluster(settings, JobStore.from_url(settings.broker_url, command=True), lambda: None)
        return
    from pipeline.embedded import EmbeddedCluster

    count = (settings.workers or os.cpu_count() or 1) if workers else 0
    state = default_state_dir() if settings.state_dir is None else settings.state_dir
    with EmbeddedCluster(
        count, os.environ.get("GAMEBATCH_CONFIG"), Path(state) if state else None
    ) as local:
        bound = settings.model_copy(update={"broker_url": local.url})
        store = JobStore.from_url(local.url, command=True)
        try:
            yield Cluster(bound, store, local.check, count)
        finally:
            store.client.close()


@dataclass(frozen=True)
class FileJob:
    """One input file and where its result goes (None: standard output)."""

    input: Path
    output: Path | None


def solve(
    settings: Settings,
    problem: Problem,
    files: list[FileJob],
    report: Callable[[str], None],
    *,
    quiet: bool = False,
    keep_going: bool = False,
    lane: str = "auto",
) -> int:
    """Queue every file, then collect each in order; bad files are reported and skipped."""
    status = 0
    progress = Progress("solve", enabled=not quiet)
    with cluster(settings) as c:
        run = _SolveRun(c, problem, progress, report, keep_going, lane)
        queued = []
        for item, result in zip(files, run.queue_all(files), strict=True):
            if isinstance(result, str):
                report(result)
                status = 2
            else:
                queued.append((item, result))
        for item, job in queued:
            if run.collect(item, job):
                where = f"listed in {errors_file(item.output)}" if item.output else "listed above"
                report(f"error: {item.input}: invalid cases marked {INVALID_WORD} ({where})")
                status = 2
    progress.close()
    return status


@dataclass
class _SolveRun:
    """One `solve`: what queueing and collecting its files share."""

    c: Cluster
    problem: Problem
    progress: Progress
    report: Callable[[str], None]
    keep_going: bool
    lane: str

    def queue_all(self, files: list[FileJob]) -> list[producer.Submitted | str]:
        """Every file queued (a bad one as its error line): here, or in producer processes."""
        c = self.c
        count = producers.producer_count(c.settings, [f.input for f in files], c.local_workers)
        if count < 2:
            return [self._queue_or_error(item) for item in files]
        tasks = [
            producers.FileTask(c.settings, self.problem.name, item.input, self.keep_going,
                               producer.choose_lane(item.input, c.settings, self.lane))
            for item in files
        ]  # fmt: skip
        return producers.produce_in_parallel(
            tasks, count, on_cases=self.progress.add_total, on_wait=c.check,
            poll=c.settings.poll_interval,
        )  # fmt: skip

    def _queue_or_error(self, item: FileJob) -> producer.Submitted | str:
        try:
            return self._queue(item)
        except InputError as exc:
            return f"error: {exc}"

    def _queue(self, item: FileJob) -> producer.Submitted:
        c = self.c

        def on_progress(p: JobProgress) -> None:
            c.check()
            self.progress.job_done(p.job_id, p.done)

        return producer.submit(
            self.problem, item.input, c.store, c.send, c.settings,
            window=c.settings.chunk.window, keep_going=self.keep_going,
            lane=producer.choose_lane(item.input, c.settings, self.lane),
            on_cases=self.progress.add_total, on_progress=on_progress,
        )  # fmt: skip

    def collect(self, item: FileJob, job: producer.Submitted) -> int:
        """Write one file's result, reading the input again when Redis lost the job; the
        number of invalid cases."""
        for attempt in range(1, LOST_JOB_RETRIES + 1):
            try:
                _, invalid = collect(
                    self.c, self.problem, job.job_id, item.output, timeout=None,
                    progress=self.progress,
                )  # fmt: skip
                return invalid
            except JobLost:
                if attempt == LOST_JOB_RETRIES:
                    raise
                self.report(f"note: Redis lost job {job.job_id}; reading {item.input} again")
                job = self._queue(item)
        raise AssertionError("unreachable")


def collect(
    c: Cluster,
    problem: Problem,
    job_id: str,
    output: Path | None,
    *,
    timeout: float | None,
    progress: Progress,
) -> tuple[JobProgress, int]:
    """Wait for a job, write its result file (or standard output); count invalid cases.

    With invalid cases (keep-going mode) their errors go to OUTPUT.errors (or stderr).
    """
    s = c.settings
    recovery = Recovery(
        c.store, c.send, c.queued_messages, lease=s.lease_seconds, stall=s.stall_seconds
    )

    def on_progress(p: JobProgress) -> None:
        c.check()
        progress.job_done(p.job_id, p.done)
        recovery.tick(p)

    done = collector.wait_for(
        c.store, job_id, poll=c.settings.poll_interval, timeout=timeout, on_progress=on_progress
    )
    invalid = c.store.invalid(job_id)
    if output is None:
        try:
            collector.write_result(c.store, job_id, problem, done, sys.stdout)
            sys.stdout.flush()
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise files.OutputError(f"cannot write to standard output: {exc.strerror}") from None
        sys.stderr.writelines(line + "\n" for line in invalid)
    else:
        try:
            if invalid:
                files.atomic_write(errors_file(output), "".join(line + "\n" for line in invalid))
            collector.write_result_file(c.store, job_id, problem, done, output)
        except files.OutputError as exc:
            raise files.OutputError(
                f"{exc}; the answers are kept: `gamebatch collect {job_id} -o FILE` writes them"
            ) from None
    collector.finish(c.store, job_id, c.settings.result_ttl)
    return done, len(invalid)


def errors_file(output: Path) -> Path:
    """Where the errors of a keep-going job's invalid cases go, beside its result."""
    return output.with_name(output.name + ".errors")


def workers_alive(c: Cluster) -> list[str]:
    """Names of the workers that answer a ping on this broker."""
    from workers.celery_app import create_app

    replies = create_app(c.settings).control.ping(timeout=1.0)
    return sorted(name for reply in replies for name in reply)


def check_job_id(job_id: str) -> None:
    """Refuse what cannot be a job id before it reaches a Redis key."""
    if not keys.is_job_id(job_id):
        shown = escape.terminal(escape.shorten(job_id, 60))
        raise UnknownJob(f"{shown} is not a job id (they look like strgame-<24 hex digits>)")


def problem_of(store: JobStore, job_id: str) -> Problem:
    """The game of an existing job."""
    manifest = store.manifest(job_id)
    if manifest is None:
        raise UnknownJob(f"job {job_id} does not exist (finished long ago, or Redis lost it)")
    return get_problem(manifest["problem"])
