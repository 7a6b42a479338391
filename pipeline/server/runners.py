"""Runner processes of the server: they read uploaded inputs and collect results through the
application layer (the same `run` as `solve`), each following several jobs at once."""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import multiprocessing
import os
import signal
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from pipeline.app.solve import FileJob, Solving, run
from pipeline.children import tie_to_parent
from pipeline.config import Settings
from pipeline.games.registry import get_problem
from pipeline.jobs.view import public
from pipeline.progress import ProgressBar
from pipeline.server import webhooks
from pipeline.server.lifecycle import run_recorded
from pipeline.server.spool import Spool
from pipeline.store.connections import connect
from pipeline.store.jobstate import FINISHED, JobState
from pipeline.store.records import Records

log = logging.getLogger("gamebatch.server")
SENT_KEPT = 10_000  # tasks a runner was handed that are remembered, should it die
PROGRESS_EVERY = 1.0  # seconds between progress events of one job


@dataclass(frozen=True)
class Upload:
    """A job handed to a runner: where its input is, and what was asked."""

    job_id: str
    problem: str
    name: str  # the file name as uploaded (error messages use it)
    keep_going: bool
    lane: str
    callback_url: str | None
    arriving: str | None = None  # the announced SHA-256 while the body is still uploaded

    def run(self, settings: Settings, records: Records, spool: Spool) -> None:
        """What a runner does with it."""
        run_job(settings, records, spool, self)


class Task(Protocol):
    """Work for a runner: an upload to solve, or a grading."""

    def run(self, settings: Settings, records: Records, spool: Spool) -> None: ...


class RunnerPool:
    """`count` runner processes that take uploads in turn, each following `per_runner`; each
    has a queue of its own (a runner killed in the middle of a read of a shared queue would
    leave its lock held for the others)."""

    def __init__(self, settings: Settings, spool: Spool, server: str) -> None:
        self._context = multiprocessing.get_context("spawn")
        self._args = (settings, spool.root, server)
        self._queues: list[Any] = []
        self._processes = [self._process(i) for i in range(settings.server.runners)]
        self._sent = [deque[Task](maxlen=SENT_KEPT) for _ in self._processes]
        self._turn = itertools.count()

    def _process(self, i: int) -> Any:
        queue = self._context.Queue()
        if i < len(self._queues):
            self._queues[i].close()
            self._queues[i] = queue
        else:
            self._queues.append(queue)
        return self._context.Process(
            target=_serve,
            args=(*self._args, queue, os.getpid()),
            name=f"gamebatch-runner-{i}",
            daemon=True,
        )

    def start(self) -> None:
        for process in self._processes:
            process.start()

    def submit(self, upload: Task) -> None:
        """Hand an upload (or a grading) to the next runner in turn."""
        turn = next(self._turn) % len(self._queues)
        self._sent[turn].append(upload)
        self._queues[turn].put(upload)

    def alive(self) -> bool:
        """Whether every runner process still runs."""
        return all(process.is_alive() for process in self._processes)

    def heal(self) -> list[int]:
        """Start a runner in the place of each one that died, and hand it again what was
        handed to the dead one (what has ended since ends at once); the dead ones' pids."""
        dead = []
        for i, process in enumerate(self._processes):
            if process.pid is not None and not process.is_alive():
                process.join(0)
                dead.append(process.pid)
                self._processes[i] = self._process(i)
                self._processes[i].start()
                lost, self._sent[i] = list(self._sent[i]), deque(maxlen=SENT_KEPT)
                for task in lost:
                    self.submit(task)
        return dead

    def close(self) -> None:
        """Stop the runners (jobs they follow resume when the server starts again)."""
        for process in self._processes:
            if process.is_alive():
                process.terminate()
        for process in self._processes:
            process.join(5)
        for queue in self._queues:
            queue.close()


def _serve(settings: Settings, root: Path, server: str, queue: Any, parent: int) -> None:
    """A runner process: take uploads until the server ends."""
    tie_to_parent(signal.SIGKILL, parent)  # never outlive the server
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the server decides when runners stop
    logging.basicConfig(level=logging.INFO, format="gamebatch serve: %(message)s")
    records = Records(connect(settings.broker_url or "", "gamebatch-server"), server)
    spool = Spool(root)
    free = threading.Semaphore(settings.server.jobs_per_runner)
    with ThreadPoolExecutor(settings.server.jobs_per_runner) as threads:
        while True:
            free.acquire()
            upload = queue.get()
            future = threads.submit(upload.run, settings, records, spool)
            future.add_done_callback(lambda _: free.release())


def run_job(settings: Settings, records: Records, spool: Spool, upload: Upload) -> None:
    """Solve one uploaded input and record how it ended (never raises)."""
    job_id = upload.job_id
    ended = run_recorded(
        records,
        job_id,
        lambda: _solve(settings, records, spool, upload),
        begun={"state": JobState.PRODUCING.value, "runner": os.getpid()},
    )
    # the record first, then the input: an upload of the same content waits for the input
    # to go before it opens a new record (see uploads._beside_an_arriving_upload)
    spool.discard_input(job_id)
    if ended is None:  # cancelled, or the upload was refused: no job, no result
        spool.discard(spool.result(job_id))
        return
    _notify(settings, records, job_id)


def _solve(
    settings: Settings, records: Records, spool: Spool, upload: Upload
) -> tuple[str, dict[str, Any]]:
    job_id, source = upload.job_id, spool.input(upload.job_id)
    progress = _EventProgress(records, job_id)
    arriving = spool.arriving(job_id, upload.arriving) if upload.arriving else None
    outcome = run(
        settings,
        Solving(get_problem(upload.problem), upload.keep_going, upload.lane),
        [FileJob(source, spool.result(job_id), arriving, upload.name, spooled=True)],
        lambda line: log.info("%s: %s", job_id, line),
        progress,
    )[0]
    if outcome.error:
        return "failed", {"error": outcome.error.removeprefix("error: "), "exit_code": 2}
    result = spool.result(job_id)
    with result.open("rb") as stream:
        sha = hashlib.file_digest(stream, "sha256").hexdigest()
    return "done", {
        "total": progress.total,
        "result_sha256": sha,
        "result_bytes": result.stat().st_size,
        "invalid": outcome.invalid,
    }


class _EventProgress(ProgressBar):
    """Progress as events, at most one per second per job."""

    def __init__(self, records: Records, job_id: str) -> None:
        super().__init__("serve", enabled=False)
        self.records, self.job_id = records, job_id
        self._last = 0.0

    def add_total(self, cases: int) -> None:
        super().add_total(cases)
        self._maybe_send()

    def set_done(self, done: int) -> None:
        super().set_done(done)
        self._maybe_send()

    def _maybe_send(self) -> None:
        now = time.monotonic()
        if now - self._last < PROGRESS_EVERY:
            return
        self._last = now
        self.records.event("progress", self.job_id, {"done": self.done, "read": self.total})


def _notify(settings: Settings, records: Records, job_id: str) -> None:
    """Queue the job's callback, and its batch's once every job of the batch ended."""
    record = records.get(job_id) or {}
    if record.get("callback_url"):
        webhooks.send(
            record["callback_url"],
            f"job.{record['state']}",
            {"job": public(record)},
            settings.server,
            lambda state: records.update(job_id, webhook=json.dumps(state)),
        )
    if record.get("batch"):
        deliver_batch(settings, records, record["batch"])


def deliver_batch(settings: Settings, records: Records, batch_id: str) -> None:
    """Queue the batch's one callback, if all its jobs ended and nobody delivered it yet."""
    batch = records.batch(batch_id)
    if batch is None:
        return
    jobs = [records.get(j) or {"id": j, "state": "failed"} for j in json.loads(batch["jobs"])]
    if any(job.get("state") not in FINISHED for job in jobs) or not records.claim_batch(batch_id):
        return
    webhooks.send(
        batch["callback_url"],
        "batch.finished",
        {"batch": batch_id, "jobs": [public(job) for job in jobs]},
        settings.server,
        lambda state: records.update_batch(batch_id, webhook=json.dumps(state)),
    )
