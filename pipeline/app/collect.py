"""Collecting: wait for a job's chunks (healing local workers, re-queueing lost chunks), then
write its result file whole; the `collect` workflow of a job queued earlier."""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TextIO

import msgspec

from pipeline import escape
from pipeline.app.cluster import Cluster
from pipeline.data import collector, files
from pipeline.data.collector import INVALID_WORD
from pipeline.data.objects import ObjectUrl, Place
from pipeline.data.payload_store import drop_payload
from pipeline.errors import JobCancelled, JobFailed, JobLost, UnknownJob
from pipeline.games.problem import Problem
from pipeline.games.registry import get_problem
from pipeline.jobs.recovery import Recovery
from pipeline.progress import ProgressBar
from pipeline.store.jobstate import JobCounters, JobState, is_job_id
from pipeline.store.protocol import Store


class CollectRequest(msgspec.Struct, frozen=True):
    """`collect`: a job queued earlier, and where its result goes."""

    job: str
    output: Place
    timeout: float | None = None
    quiet: bool = False

    def check(self) -> None:
        """Before any work: a job id, and a result file that can be written."""
        check_job_id(self.job)
        if isinstance(self.output, Path):
            files.check_output(self.output)


class Collected(msgspec.Struct, frozen=True):
    """What `collect` wrote: the cases marked invalid (keep-going jobs), and their line."""

    invalid: int = 0
    error: str | None = None  # the one line saying where the invalid cases are listed

    @property
    def status(self) -> int:
        """The exit status: 2 with invalid cases, else 0."""
        return 2 if self.invalid else 0


def collect_job(c: Cluster, request: CollectRequest) -> Collected:
    """Wait for a job queued earlier and write its result."""
    problem = problem_of(c.store, request.job)
    progress = ProgressBar("collect", enabled=not request.quiet)
    counters = c.store.progress(request.job)
    progress.add_total(counters.total or 0 if counters else 0)
    try:
        waiting = Waiting(progress, request.timeout)
        _, invalid = write_result(c, problem, request.job, request.output, waiting)
    finally:
        progress.close()
    if not invalid:
        return Collected()
    where = errors_file(request.output)
    return Collected(invalid, f"invalid cases marked {INVALID_WORD} (listed in {where})")


def _no_work() -> bool:
    return False


class Waiting(msgspec.Struct, frozen=True):
    """How a command waits for a job: its progress display, for how long (None: as long as
    it takes), what it does meanwhile (`idle`, see `wait`), and whether it queued the job
    itself (`produced`)."""

    progress: ProgressBar
    timeout: float | None = None
    idle: Callable[[], bool] = _no_work
    produced: bool = False


def write_result(
    c: Cluster, problem: Problem, job_id: str, output: Place | TextIO | None, waiting: Waiting
) -> tuple[JobCounters, int]:
    """Wait for a job, write its result file (or standard output); count invalid cases.

    With invalid cases (keep-going mode) their errors go to OUTPUT.errors (or stderr).
    """
    done = _finished(c, job_id, waiting)
    invalid = c.store.invalid(job_id)
    if not isinstance(output, Path | ObjectUrl):
        stream = sys.stdout if output is None else output
        try:
            collector.write_result(c.store, job_id, problem, done, stream)
            stream.flush()
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise files.OutputError(f"cannot write to standard output: {exc.strerror}") from None
        sys.stderr.writelines(line + "\n" for line in invalid)
    else:
        try:
            if invalid:
                collector.write_text(errors_file(output), "".join(line + "\n" for line in invalid))
            collector.write_result_file(c.store, job_id, problem, done, output)
        except files.OutputError as exc:
            raise files.OutputError(
                f"{exc}; the answers are kept: `gamebatch collect {job_id} -o FILE` writes them"
            ) from None
    drop_payload(c.store, job_id)
    return done, len(invalid)


LOST_ANSWERS_ROUNDS = 3  # waits for a job whose answers failovers keep losing


def _finished(c: Cluster, job_id: str, w: Waiting) -> JobCounters:
    """Wait for every chunk of a job and mark it done, before its result is written: done
    once a replica has every answer, so a result is never written from answers that only a
    primary about to be replaced holds. Where the primary in force lacks some (a failover
    lost them), their chunks are queued again at once and waited for."""
    for _ in range(LOST_ANSWERS_ROUNDS):
        try:
            done = wait(
                c, job_id, timeout=w.timeout, progress=w.progress, idle=w.idle, produced=w.produced
            )
        except (JobFailed, JobCancelled):
            drop_payload(c.store, job_id)
            raise
        if c.store.finish(job_id, c.settings.result_ttl):
            return done
        for index in c.store.unleased(job_id):
            c.send(job_id, index)
    raise JobLost(
        f"Redis did not keep the answers of job {job_id}: no replica acknowledged them, or"
        f" failovers lost them, {LOST_ANSWERS_ROUNDS} times"
    )


def wait(
    c: Cluster,
    job_id: str,
    *,
    timeout: float | None,
    progress: ProgressBar,
    idle: Callable[[], bool] = lambda: False,
    produced: bool = False,
) -> JobCounters:
    """Wait for every chunk of a job, healing local workers and re-queueing lost chunks;
    between two looks, `idle` may do some of the work (True when it did). When this command
    `produced` the job, a job still producing lost the end of its production (a failover
    between the primary's writes and its replica's): JobLost, so that the input is read
    again, instead of a wait for chunks that no one will queue."""
    s = c.settings
    recovery = Recovery(
        c.store,
        c.send,
        partial(c.queued_messages, job_id),
        lease=s.lease_seconds,
        stall=s.stall_seconds,
    )

    def on_progress(p: JobCounters) -> None:
        if produced and p.state == JobState.PRODUCING:
            raise JobLost(f"Redis lost the end of job {job_id}'s production")
        if p.state not in (JobState.COMPLETE, JobState.DONE):
            c.ensure()  # someone has to do the rest
        c.check()
        progress.job_done(p.job_id, p.done)
        if p.judging is not None:
            progress.set_files(p.judging.ready, p.judging.programs, "programs ready")
        recovery.tick(p)

    return collector.wait_for(
        c.store,
        job_id,
        poll=s.poll_interval,
        timeout=timeout,
        on_progress=on_progress,
        idle=idle,
    )


def errors_file(output: Place) -> Place:
    """Where the errors of a keep-going job's invalid cases go, beside its result."""
    if isinstance(output, ObjectUrl):
        return ObjectUrl(output + ".errors")
    return output.with_name(output.name + ".errors")


def check_job_id(job_id: str) -> None:
    """Refuse what cannot be a job id before it reaches a Redis key."""
    if not is_job_id(job_id):
        shown = escape.terminal(escape.shorten(job_id, 60))
        raise UnknownJob(f"{shown} is not a job id (they look like strgame-<24 hex digits>)")


def problem_of(store: Store, job_id: str) -> Problem:
    """The game of an existing job."""
    manifest = store.manifest(job_id)
    if manifest is None:
        raise UnknownJob(f"job {job_id} does not exist (finished long ago, or Redis lost it)")
    return get_problem(manifest["problem"])
