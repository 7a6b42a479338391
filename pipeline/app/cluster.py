"""The cluster handle every workflow runs on: the configured broker, or the embedded Redis
with local workers; how chunks are queued there, or run in this process."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from pipeline.config import LANES, Settings, default_state_dir, lane_queue, worker_settings
from pipeline.data import producer
from pipeline.errors import GamebatchError
from pipeline.jobs.control import Jobs
from pipeline.jobs.recovery import queued_messages
from pipeline.jobs.worker_watch import WorkerWatch
from pipeline.local.sharing import Sharing
from pipeline.progress import note as progress_note
from pipeline.store.connections import this_process
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
        store = open_store(settings, command=True, said=_warn)
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


def _warn(line: str) -> None:
    print(f"gamebatch: warning: {line}", file=sys.stderr, flush=True)


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
