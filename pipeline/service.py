"""The composition root: wires settings, Redis, Celery, producer and collector for each command."""

from __future__ import annotations

import multiprocessing
import os
import queue
import signal
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline import collector, escape, files, keys, producer
from pipeline.collector import INVALID_WORD, JobLost
from pipeline.config import Settings, default_state_dir
from pipeline.errors import GamebatchError, InputError, UnknownJob
from pipeline.jobstore import JobStore
from pipeline.jobstore import Progress as JobProgress
from pipeline.problem import Problem, get_problem
from pipeline.progress import Progress
from pipeline.recovery import Recovery, queued_messages

if TYPE_CHECKING:
    from multiprocessing.sharedctypes import Synchronized

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
            if local.redis is not None:
                store.wait_for_other_commands()


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

        def on_progress(p: JobProgress) -> None:
            c.check()
            progress.job_done(p.job_id, p.done)

        def submit(item: FileJob) -> producer.Submitted:
            return producer.submit(
                problem, item.input, c.store, c.send, c.settings,
                window=c.settings.chunk.window, keep_going=keep_going,
                lane=producer.choose_lane(item.input, c.settings, lane),
                on_cases=progress.add_total,
                on_progress=on_progress,
            )  # fmt: skip

        def submit_or_error(item: FileJob) -> producer.Submitted | str:
            try:
                return submit(item)
            except InputError as exc:
                return f"error: {exc}"

        producers = producer_count(c.settings, [item.input for item in files], c.local_workers)
        if producers > 1:
            results: Iterable[producer.Submitted | str] = _produce_in_parallel(
                c, problem, files, producers, progress, keep_going=keep_going, lane=lane
            )
        else:
            results = map(submit_or_error, files)  # one file after the other, in this process
        submitted = []
        for item, result in zip(files, results, strict=True):
            if isinstance(result, str):
                report(result)
                status = 2
            else:
                submitted.append((item, result))
        for item, first in submitted:
            job = first
            for attempt in range(1, LOST_JOB_RETRIES + 1):
                try:
                    _, invalid = collect(
                        c, problem, job.job_id, item.output, timeout=None, progress=progress
                    )  # fmt: skip
                    break
                except JobLost:
                    if attempt == LOST_JOB_RETRIES:
                        raise
                    report(f"note: Redis lost job {job.job_id}; reading {item.input} again")
                    job = submit(item)
            if invalid:
                where = f"listed in {item.output}.errors" if item.output else "listed above"
                report(f"error: {item.input}: invalid cases marked {INVALID_WORD} ({where})")
                status = 2
    progress.close()
    return status


PARALLEL_MIN_BYTES = 32 << 20  # below this much input, starting producers costs more than it saves


def producer_count(settings: Settings, inputs: list[Path], local_workers: int = 0) -> int:
    """Producer processes for these inputs: `producers`, else for large inputs one per CPU
    that local workers leave free (on a machine that also solves, more would only compete)."""
    if settings.producers is not None:
        return min(settings.producers, len(inputs))
    if len(inputs) < 2 or sum(_size(path) for path in inputs) < PARALLEL_MIN_BYTES:
        return 1
    return max(1, min((os.cpu_count() or 1) - local_workers, len(inputs)))


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0  # the producer reports it


def _produce_in_parallel(
    c: Cluster,
    problem: Problem,
    files: list[FileJob],
    producers: int,
    progress: Progress,
    *,
    keep_going: bool,
    lane: str,
) -> list[producer.Submitted | str]:
    """Queue the files from `producers` processes at once, as a single producer is the usual
    bottleneck (it reads and validates about as fast as one worker solves)."""
    context = multiprocessing.get_context("spawn")  # nothing of this process's sockets
    todo, done = context.Queue(), context.Queue()
    counted = context.Value("q", 0)
    for index, item in enumerate(files):
        lane_of = producer.choose_lane(item.input, c.settings, lane)
        todo.put((index, (c.settings, problem.name, item.input, keep_going, lane_of)))
    processes = [
        context.Process(target=_producer_process, args=(todo, done, counted), daemon=True)
        for _ in range(producers)
    ]
    for process in processes:
        todo.put(None)  # one "no more files" each
        process.start()
    results: dict[int, producer.Submitted | str | BaseException] = {}
    seen = 0
    try:
        while len(results) < len(files):
            try:
                index, result = done.get(timeout=c.settings.poll_interval * 4)
                results[index] = result
            except queue.Empty:
                if any(p.exitcode not in (None, 0) for p in processes):
                    raise GamebatchError(
                        "a producer process died (killed, or out of memory); run the command"
                        " again: what was queued is kept"
                    ) from None
            c.check()
            progress.add_total(int(counted.value) - seen)
            seen = int(counted.value)
    finally:
        for process in processes:
            if process.exitcode is None and len(results) < len(files):
                process.terminate()  # stop those in the middle of a file
            process.join()
    ordered = [results[i] for i in range(len(files))]
    for result in ordered:
        if isinstance(result, BaseException):
            raise result
    return ordered  # type: ignore[return-value]


def _producer_process(
    todo: multiprocessing.Queue[Any], done: multiprocessing.Queue[Any], counted: Synchronized[int]
) -> None:
    """A producer process: queue the files it is handed until it gets None."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # `solve` decides what an interrupt stops

    def count(cases: int) -> None:
        with counted.get_lock():
            counted.value += cases

    while (task := todo.get()) is not None:
        index, args = task
        try:
            done.put((index, _produce(*args, on_cases=count)))
        except GamebatchError as exc:
            done.put((index, exc))
        except Exception as exc:  # sent to `solve`, which reports it
            done.put((index, GamebatchError(f"{args[2]}: {type(exc).__name__}: {exc}")))


def _produce(
    settings: Settings,
    name: str,
    path: Path,
    keep_going: bool,
    lane: str,
    *,
    on_cases: Callable[[int], None],
) -> producer.Submitted | str:
    """One input file, in a producer process; a bad input comes back as its error line."""
    store = JobStore.from_url(settings.broker_url or "", command=True)
    try:
        return producer.submit(
            get_problem(name), path, store, Cluster(settings, store, lambda: None).send,
            settings, window=settings.chunk.window, keep_going=keep_going, lane=lane,
            on_cases=on_cases,
        )  # fmt: skip
    except InputError as exc:
        return f"error: {exc}"
    finally:
        store.client.close()


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
