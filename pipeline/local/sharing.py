"""A command that solves chunks beside its local workers, on the core it would leave idle.

While it produces, a chunk runs in the command when messages already wait in the queue (the
workers are busy, or still starting), and is queued otherwise. While it waits, the command
takes back the messages of its job that no worker has taken yet, newest first, and runs those
chunks itself. A chunk is thus run by the command or by a worker, never by both at once (a
message is taken off the queue by one of them only), and always through the same runner and
records, so the job's state is the same whoever solved it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

Queue = Callable[[str, int], str]  # queue a chunk's task: its task id
Run = Callable[[str, int], object]  # run a chunk in this process


class Sharing:
    """The chunks one command shares with its local workers."""

    def __init__(
        self,
        queue: Queue,
        run: Run,
        waiting: Callable[[], int],
        take: Callable[[list[str]], str | None],
    ) -> None:
        """`waiting`: messages waiting in the queues; `take`: take back the newest waiting
        message if it is one of these tasks', and say whose."""
        self.queue, self.run, self.waiting, self.take = queue, run, waiting, take
        self.queued: dict[str, dict[str, int]] = {}  # job -> task id -> chunk index

    def send(self, job_id: str, index: int) -> None:
        """The producer's `send`: run the chunk here while messages wait, else queue it."""
        if self.waiting() > 0:
            self.run(job_id, index)
        else:
            self.queued.setdefault(job_id, {})[self.queue(job_id, index)] = index

    def take_back(self, job_id: str) -> bool:
        """Run one chunk of the job whose message no worker has taken yet; False when there
        is none (a worker took the newest one, so it has taken every older one too)."""
        tasks = self.queued.get(job_id)
        if not tasks:
            return False
        task_id = self.take(list(tasks))
        if task_id is None:
            del self.queued[job_id]
            return False
        self.run(job_id, tasks.pop(task_id))
        return True


class Alone:
    """A producer's `send` for a job this command solves alone: each chunk runs here,
    `threads` at once (the C kernels let go of the GIL while they solve), so a job too small
    to wait for workers to start still has every core. Leaving it waits for the last runs,
    and raises the first error of one unless another is on its way."""

    def __init__(self, run: Run, threads: int) -> None:
        self.run, self.threads = run, threads
        self.pool = ThreadPoolExecutor(threads, "gamebatch-solve") if threads > 1 else None
        self.running: deque[Future[object]] = deque()

    def __call__(self, job_id: str, index: int) -> None:
        if self.pool is None:
            self.run(job_id, index)
            return
        self.running.append(self.pool.submit(self.run, job_id, index))
        while len(self.running) > self.threads:
            self.running.popleft().result()

    def __enter__(self) -> Alone:
        return self

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        try:
            while self.running:
                run = self.running.popleft()
                if kind is None:
                    run.result()
                elif not run.cancel():
                    run.exception()  # waited for: its error is not the one on its way
        finally:
            if self.pool is not None:
                self.pool.shutdown(wait=True, cancel_futures=True)
