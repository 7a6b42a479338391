"""The composition root: wires settings, Redis, Celery, producer and collector for each command."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property, partial
from pathlib import Path
from typing import TextIO

import msgspec

from pipeline import escape
from pipeline.config import LANES, Settings, default_state_dir, lane_queue, worker_settings
from pipeline.data import collector, files, objects, producer
from pipeline.data.collector import INVALID_WORD
from pipeline.data.files import OutputError
from pipeline.data.objects import ObjectUrl, Place
from pipeline.data.payload_store import PayloadFolder, drop_payload, payload_folder, produced_with
from pipeline.errors import (
    GamebatchError,
    InputError,
    JobCancelled,
    JobFailed,
    JobLost,
    UnknownJob,
)
from pipeline.games.problem import Problem, runs_in_process, scanner
from pipeline.games.registry import get_problem
from pipeline.jobs.control import Jobs
from pipeline.jobs.recovery import Recovery, queued_messages
from pipeline.jobs.worker_watch import WorkerWatch
from pipeline.local import producers
from pipeline.local.sharing import Alone, Sharing
from pipeline.progress import ProgressBar
from pipeline.progress import note as progress_note
from pipeline.store.connections import this_process
from pipeline.store.jobstate import JobCounters, JobState, is_job_id
from pipeline.store.jobstore import JobStore
from pipeline.store.protocol import Store
from pipeline.store.records import Records
from pipeline.store.shards import ShardedStore, open_store


@dataclass
class Cluster:
    """A broker to talk to, and a health check for local workers when there are any."""

    settings: Settings  # with broker_url set
    store: JobStore | ShardedStore
    check: Callable[[], None]
    local_workers: int = 0  # worker processes this command starts on this machine
    ensure: Callable[[], None] = lambda: None  # start the local workers, if not yet done
    running: Callable[[], bool] = lambda: True  # whether workers run without being started

    def send(self, job_id: str, index: int) -> None:
        """Queue one chunk task, in its job's lane (local workers start with the first one;
        Celery is loaded only then)."""
        self.queue(job_id, index)

    def queue(self, job_id: str, index: int) -> str:
        """`send`, saying the task's id."""
        self.ensure()
        return self._queue(job_id, index)

    @cached_property
    def _queue(self) -> Callable[[str, int], str]:
        from workers.celery_app import cluster_sender

        return cluster_sender(self.settings, self.store)

    def run_here(self) -> producer.Send:
        """A `send` that runs the chunk at once in this process, as a worker would (through
        the same runner and records): small jobs need no worker to start."""
        from workers.runner import Policy, run_chunk

        policy = Policy(
            this_process(),
            self.settings.lease_seconds,
            self.settings.max_attempts,
            bool(self.settings.file_payloads),
            self.settings.judge,
            self.settings.result_ttl,
        )

        def run(job_id: str, index: int) -> None:
            run_chunk(self.store, job_id, index, policy)

        return run

    def sharing(self) -> Sharing:
        """This command's share of the chunks it queues for its local workers."""
        queues = [lane_queue(self.settings, lane) for lane in LANES]
        return Sharing(
            self.queue,
            self.run_here(),
            self.queued_messages,
            lambda ids: self.store.take_message(queues, ids),
        )

    def queued_messages(self, job_id: str | None = None) -> int:
        """Messages waiting in every lane (of the job's shard, given a job)."""
        store: Store = self.store
        if job_id is not None and isinstance(self.store, ShardedStore):
            store = self.store.shard(job_id)
        return queued_messages(store, self.settings)

    @cached_property
    def jobs(self) -> Jobs:
        """The cluster's jobs: their views (with the HTTP service's records of uploaded ones,
        on the home shard) and their cancel."""
        records = Records(self.store.client, server="")
        return Jobs(self.store, self.settings.result_ttl, records.get_many)


@contextmanager
def cluster(
    settings: Settings, *, workers: bool = True, lazy: bool = True, watch: bool = True
) -> Iterator[Cluster]:
    """The configured broker, or the embedded Redis with local workers (unless told not to),
    started once a chunk is queued or an unfinished job is waited for (unless not `lazy`):
    a command whose work is all cached starts none. On a broker, a command that waits for
    its chunks says when no worker is there to take them (unless not `watch`)."""
    if settings.broker_url:
        # its Redis may be restarting, or its primary failing over, right now
        for url in settings.shard_urls:
            JobStore.wait_for(url, _note, timeout=settings.failover_seconds)
        store = open_store(settings, command=True)
        check: Callable[[], None] = lambda: None  # noqa: E731
        if watch:
            fresh = settings.lease_seconds  # a live worker says so every lease/3 seconds
            seen = lambda: store.capacity(fresh) > 0  # noqa: E731
            check = WorkerWatch(seen, progress_note, give_up=settings.wait_for_workers)
        yield Cluster(settings, store, check)
        return
    from pipeline.local.cluster import EmbeddedCluster

    if settings.file_payloads is None and workers:  # its own workers see its files (a
        # detached `submit` carries the bytes: its input may change before they are read)
        settings = settings.replaced(file_payloads=True)
    count = (settings.workers or os.cpu_count() or 1) if workers else 0
    state = default_state_dir() if settings.state_dir is None else settings.state_dir
    folder = Path(state) if state else None
    warm = settings.warm_seconds if lazy else 0  # not after `serve`
    with EmbeddedCluster(
        count, lambda: worker_settings(settings), folder, lazy=lazy, warm_seconds=warm
    ) as local:
        bound = settings.replaced(broker_url=local.url)
        store = JobStore.from_url(local.url, command=True)
        try:
            yield Cluster(
                bound, store, local.check, count, local.ensure_workers, local.workers_running
            )
        except Exception as exc:
            if "MISCONF" not in str(exc):  # Redis refuses writes it cannot save
                raise
            cause = str(exc).splitlines()[0].rsplit(": ", 1)[-1]
            raise GamebatchError(
                f"the embedded Redis cannot save its data in {local.redis_folder}: {cause};"
                " free some space there and run the command again (finished work is kept)"
            ) from None
        finally:
            store.close()


def _note(line: str) -> None:
    print(f"gamebatch: note: {line}", file=sys.stderr, flush=True)


EARLY_WORKERS_BYTES = 32 << 20  # inputs this big start the local workers before hashing


def _size(path: Place) -> int:
    try:
        return objects.stat(path).size if isinstance(path, ObjectUrl) else os.stat(path).st_size
    except (OSError, GamebatchError):
        return 0  # the producer reports it


@dataclass(frozen=True)
class FileJob:
    """One input file and where its result goes: a file, a stream, or None (stdout). A
    `source` reads an input that is still arriving (an upload), in this process; messages
    call the input `name` (default: its path)."""

    input: Place
    output: Place | TextIO | None
    source: producer.Source | None = field(default=None, compare=False)
    name: str | None = None
    spooled: bool = False  # the input is only ever appended to (see producer.submit)


class FileOutcome(msgspec.Struct, frozen=True):
    """What became of one input of a run."""

    item: FileJob
    job: producer.Submitted | None  # None: the input was refused
    error: str | None = None  # the refused input's (or unwritten result's) error line
    invalid: int = 0  # cases marked INVALID (keep-going mode)
    status: int = 2  # the exit status an error calls for


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
    """Solve every file; bad files are reported and skipped. The exit status."""
    status = 0
    for outcome in run(
        settings, problem, files, report, quiet=quiet, keep_going=keep_going, lane=lane
    ):
        if outcome.invalid:
            output = outcome.item.output
            where = (
                f"listed in {errors_file(output)}" if isinstance(output, Path) else "listed above"
            )
            report(f"error: {outcome.item.input}: invalid cases marked {INVALID_WORD} ({where})")
        if outcome.error or outcome.invalid:
            status = max(status, outcome.status if outcome.error else 2)
    return status


def run(
    settings: Settings,
    problem: Problem,
    files: list[FileJob],
    report: Callable[[str], None],
    *,
    quiet: bool = False,
    keep_going: bool = False,
    lane: str = "auto",
    label: str = "solve",
    progress: ProgressBar | None = None,
) -> list[FileOutcome]:
    """The one orchestration of every command that solves: queue every file (in producer
    processes when that pays), then collect each in order, healing local workers, re-queueing
    lost chunks and reading an input again when Redis lost its job. A bad input is reported
    and skipped. `progress` replaces the terminal's progress display."""
    progress = progress or ProgressBar(label, enabled=not quiet)
    with cluster(settings) as c:
        outcomes = run_on(
            c, problem, files, report, keep_going=keep_going, lane=lane, progress=progress
        )
    progress.close()
    return outcomes


def run_on(
    c: Cluster,
    problem: Problem,
    files: list[FileJob],
    report: Callable[[str], None],
    *,
    keep_going: bool,
    lane: str,
    progress: ProgressBar,
) -> list[FileOutcome]:
    """`run` on a cluster that is already there (a grading's)."""
    steps = _SolveRun(c, problem, progress, report, keep_going, lane)
    outcomes, queued = [], []
    for item, result in zip(files, steps.queue_all(files), strict=True):
        if isinstance(result, str):
            report(result)
            outcomes.append(FileOutcome(item, None, result))
        else:
            queued.append((item, result))
    for item, job in queued:  # a result that cannot be written keeps the others from nothing
        try:
            outcomes.append(FileOutcome(item, job, None, steps.collect(item, job)))
        except OutputError as exc:
            report(f"error: {exc}")
            outcomes.append(FileOutcome(item, job, f"error: {exc}", status=exc.exit_code))
    order = {item: i for i, item in enumerate(files)}
    return sorted(outcomes, key=lambda o: order[o.item])


@dataclass
class _SolveRun:
    """One `solve`: what queueing and collecting its files share."""

    c: Cluster
    problem: Problem
    progress: ProgressBar
    report: Callable[[str], None]
    keep_going: bool
    lane: str

    def queue_all(self, files: list[FileJob]) -> list[producer.Submitted | str]:
        """Every file queued (a bad one as its error line): here, or in producer processes."""
        c = self.c
        paths = [f.input for f in files if isinstance(f.input, Path)]
        count = producers.producer_count(c.settings, paths, c.local_workers)
        if count < 2 or len(paths) < len(files) or any(f.source is not None for f in files):
            return [self._queue_or_error(item) for item in files]
        c.ensure()  # producer processes queue chunks themselves
        tasks = [
            producers.FileTask(
                c.settings,
                self.problem.name,
                path,
                self.keep_going,
                producer.choose_lane(path, c.settings, self.lane),
            )
            for path in paths  # every input is a file here
        ]
        return producers.produce_in_parallel(
            tasks,
            count,
            on_cases=self.progress.add_total,
            on_wait=c.check,
            poll=c.settings.poll_interval,
        )

    def _queue_or_error(self, item: FileJob) -> producer.Submitted | str:
        try:
            return self._queue(item)
        except InputError as exc:
            return f"error: {exc}"

    def _queue(self, item: FileJob) -> producer.Submitted:
        c = self.c

        def on_progress(p: JobCounters) -> None:
            c.check()
            self.progress.job_done(p.job_id, p.done)

        here, size, chunk = self._here(item), _size(item.input), c.settings.chunk
        small = here and (
            size <= chunk.local_bytes or (size <= chunk.alone_bytes and not c.running())
        )
        threads = 1 if size <= chunk.local_bytes else max(c.local_workers, 1)
        alone = Alone(c.run_here(), threads) if small else None  # every core, no worker
        send = alone or (self.sharing.send if here else c.send)
        if not small and size >= EARLY_WORKERS_BYTES:
            c.ensure()  # a big input is likely new work: the workers' start overlaps the hashing

        def submit() -> producer.Submitted:
            stored = None if small else self._payload_folder(item)
            return produced_with(
                stored,
                lambda: producer.submit(
                    self.problem,
                    item.input,
                    c.store,
                    send,
                    c.settings,
                    window=c.settings.chunk.window,
                    keep_going=self.keep_going,
                    lane=producer.choose_lane(item.input, c.settings, self.lane),
                    on_cases=self.progress.add_total,
                    on_progress=on_progress,
                    source=item.source,
                    name=item.name,
                    spooled=item.spooled,
                    stored=stored,
                ),
            )

        with alone or contextlib.nullcontext():
            return producer.retry_when_lost(submit, item.input, self.report)

    def _payload_folder(self, item: FileJob) -> PayloadFolder | None:
        """The job's folder in the payload store (see payload_folder): its chunks carry
        bytes when the input is still arriving or the Python reader validates it."""
        carried = item.source is not None or self.keep_going or scanner(self.problem) is None
        return payload_folder(self.c.store, self.c.settings, item.input, carried=carried)

    @cached_property
    def sharing(self) -> Sharing:
        """The chunks this command shares with its local workers."""
        return self.c.sharing()

    def _here(self, item: FileJob) -> bool:
        """Whether this command may solve chunks itself: when the cluster is local and the
        game says its solver cannot take the process down with it (`in_process`). It then
        solves a small input whole, and a larger one's chunks while its workers are busy."""
        if not self.c.local_workers or item.source is not None or not isinstance(item.input, Path):
            return False
        return runs_in_process(self.problem)

    def _idle(self, item: FileJob, job_id: str) -> Callable[[], bool]:
        """What the command does while it waits for a job: take back the chunks it shares
        that no worker has taken yet, when it shares them."""
        if self._here(item):
            return partial(self.sharing.take_back, job_id)
        return lambda: False

    def collect(self, item: FileJob, job: producer.Submitted) -> int:
        """Write one file's result, reading the input again when Redis lost the job; the
        number of invalid cases."""
        for attempt in range(1, producer.LOST_JOB_RETRIES + 1):
            try:
                _, invalid = collect(
                    self.c,
                    self.problem,
                    job.job_id,
                    item.output,
                    timeout=None,
                    progress=self.progress,
                    idle=self._idle(item, job.job_id),
                    produced=True,
                )
                return invalid
            except JobLost:
                if attempt == producer.LOST_JOB_RETRIES:
                    raise
                self.report(f"note: Redis lost job {job.job_id}; reading {item.input} again")
                job = self._queue(item)
        raise AssertionError("unreachable")


def collect(
    c: Cluster,
    problem: Problem,
    job_id: str,
    output: Place | TextIO | None,
    *,
    timeout: float | None,
    progress: ProgressBar,
    idle: Callable[[], bool] = lambda: False,
    produced: bool = False,
) -> tuple[JobCounters, int]:
    """Wait for a job, write its result file (or standard output); count invalid cases.
    `idle` is given the time spent waiting, and `produced` says this command queued the
    job (see `wait`).

    With invalid cases (keep-going mode) their errors go to OUTPUT.errors (or stderr).
    """
    try:
        done = wait(c, job_id, timeout=timeout, progress=progress, idle=idle, produced=produced)
    except (JobFailed, JobCancelled):
        drop_payload(c.store, job_id)
        raise
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
    collector.finish(c.store, job_id, c.settings.result_ttl)
    drop_payload(c.store, job_id)
    return done, len(invalid)


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


def workers_alive(c: Cluster) -> list[str]:
    """Names of the workers that answer a ping, on every shard. The ping ends once as many
    answered as said they live in the last lease (each says so every third of one), else
    after a second; none is sent when none said so."""
    seen = c.store.workers_seen(c.settings.lease_seconds)
    if not seen:
        return []
    from workers.celery_app import create_app

    found = []
    for url in c.settings.shard_urls:  # a host runs a worker on each shard
        app = create_app(c.settings.replaced(broker_url=url))
        found += [name for reply in app.control.ping(timeout=1.0, limit=seen) for name in reply]
    return sorted(found)


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
