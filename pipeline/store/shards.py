"""Jobs spread over several Redis instances (shards), each job whole on one: the one its id
hashes to (rendezvous hashing), or the one that already holds it."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any

from pipeline.config import Settings
from pipeline.store.connections import PATIENCE_SECONDS
from pipeline.store.jobstate import JobCounters
from pipeline.store.jobstore import JobStore

_REMEMBERED = 100_000  # job ids whose shard a process remembers (then it forgets them all)


def pick(job_id: str, count: int) -> int:
    """The shard a new job goes to: the highest of one hash per (job, shard), so that a shard
    added to `count` takes about 1/(count + 1) of new jobs and moves none of the others."""
    return max(range(count), key=lambda i: hashlib.blake2b(f"{i}:{job_id}".encode()).digest())


def _routed(name: str) -> Any:
    """A Store method whose first argument is a job id, run on that job's shard."""

    def call(self: ShardedStore, job_id: str, *args: Any, **kwargs: Any) -> Any:
        return getattr(self.shard(job_id), name)(job_id, *args, **kwargs)

    call.__name__ = name
    call.__doc__ = f"Store.{name} on the job's shard."
    return call


class ShardedStore:
    """The Store of several Redis instances, as one: a job's calls go to its shard; what is
    the cluster's (its id, the payload store's sweep, verdicts kept for programs, the HTTP
    service's records) lives on the first, the home shard."""

    def __init__(self, stores: Sequence[Any]) -> None:
        """`stores`: a JobStore (or MemoryStore) per shard, the home one first."""
        self.stores = list(stores)
        self._where: dict[str, int] = {}

    @property
    def home(self) -> Any:
        """The first shard's store."""
        return self.stores[0]

    @property
    def client(self) -> Any:
        """The home shard's Redis client (for what lives there only)."""
        return self.home.client

    @property
    def tables(self) -> Any:
        """The home shard's cache of game tables."""
        return self.home.tables

    def index_of(self, job_id: str) -> int:
        """The shard that holds the job: the one its id picks, unless another already had it
        (shards added since it was made); a job on none goes to the one its id picks."""
        if job_id in self._where:
            return self._where[job_id]
        first = pick(job_id, len(self.stores))
        order = [first, *(i for i in range(len(self.stores)) if i != first)]
        for i in order:
            if self.stores[i].manifest(job_id) is not None:
                self._remember(job_id, i)
                return i
        return first

    def shard(self, job_id: str) -> Any:
        """The store of the job's shard."""
        return self.stores[self.index_of(job_id)]

    def _remember(self, job_id: str, index: int) -> None:
        if len(self._where) >= _REMEMBERED:
            self._where.clear()
        self._where[job_id] = index

    def open_job(self, job_id: str, fields: dict[str, str | int]) -> dict[str, str]:
        """Store.open_job on the shard that holds the job, or the one its id picks."""
        index = self.index_of(job_id)
        opened: dict[str, str] = self.stores[index].open_job(job_id, fields)
        self._remember(job_id, index)
        return opened

    manifest = _routed("manifest")
    finish_production = _routed("finish_production")
    claim_production = _routed("claim_production")
    renew_production = _routed("renew_production")
    production_holder = _routed("production_holder")
    release_production = _routed("release_production")
    abandon_production = _routed("abandon_production")
    set_state = _routed("set_state")
    add_payload_folder = _routed("add_payload_folder")
    progress = _routed("progress")
    answered = _routed("answered")
    answered_among = _routed("answered_among")
    has_answers = _routed("has_answers")
    answered_digests = _routed("answered_digests")
    put_chunk = _routed("put_chunk")
    chunk_payload = _routed("chunk_payload")
    begin_chunk = _routed("begin_chunk")
    refresh_lease = _routed("refresh_lease")
    set_cursor = _routed("set_cursor")
    cursor = _routed("cursor")
    save_answers = _routed("save_answers")
    fail_chunk = _routed("fail_chunk")
    abandoned = _routed("abandoned")
    unleased = _routed("unleased")
    leased = _routed("leased")
    iter_answers = _routed("iter_answers")
    iter_details = _routed("iter_details")
    add_invalid = _routed("add_invalid")
    invalid = _routed("invalid")
    note_judged = _routed("note_judged")
    finish = _routed("finish")
    expire = _routed("expire")
    cancel = _routed("cancel")
    delete = _routed("delete")

    # --- what spans the shards ----------------------------------------------------------

    def progress_of(self, job_ids: list[str]) -> list[JobCounters | None]:
        """Store.progress_of: every shard asked once, each job's from the shard that has it."""
        found: list[JobCounters | None] = [None] * len(job_ids)
        for index, store in enumerate(self.stores):
            for i, counters in enumerate(store.progress_of(job_ids)):
                if counters is not None and found[i] is None:
                    found[i] = counters
                    self._remember(job_ids[i], index)
        return found

    def jobs(self) -> list[str]:
        """Every shard's jobs, oldest first."""
        ids = [job_id for store in self.stores for job_id in store.jobs()]
        made = {p.job_id: p.created or 0.0 for p in self.progress_of(ids) if p is not None}
        return sorted(made, key=made.__getitem__)

    def sweep_candidates(self, further: int = 500) -> list[str]:
        """Every shard's candidates (their shards remembered, for note_swept)."""
        found = []
        for index, store in enumerate(self.stores):
            for job_id in store.sweep_candidates(further):
                self._remember(job_id, index)
                found.append(job_id)
        return found

    def note_swept(self, unfinished: list[str], finished: list[str]) -> None:
        """Store.note_swept on each job's shard."""
        for index, store in enumerate(self.stores):
            store.note_swept(
                [j for j in unfinished if self.index_of(j) == index],
                [j for j in finished if self.index_of(j) == index],
            )

    def payload_objects(self) -> set[str]:
        """Store.payload_objects of every shard."""
        return {url for store in self.stores for url in store.payload_objects()}

    def queue_length(self, queue: str) -> int:
        """Messages waiting in that queue on every shard."""
        return sum(int(store.queue_length(queue)) for store in self.stores)

    def kept_verdicts(self, program: str, cases: list[str]) -> list[bytes | None]:
        """Store.kept_verdicts of the home shard (a worker keeps them on its own shard)."""
        found: list[bytes | None] = self.home.kept_verdicts(program, cases)
        return found

    def keep_verdicts(self, program: str, found: dict[str, str], ttl: int) -> None:
        """Store.keep_verdicts on the home shard."""
        self.home.keep_verdicts(program, found, ttl)

    def claim_sweep(self, holder: str, seconds: float) -> bool:
        """Store.claim_sweep on the home shard."""
        return bool(self.home.claim_sweep(holder, seconds))

    def claim_store_sweep(self, seconds: float) -> bool:
        """Store.claim_store_sweep on the home shard."""
        return bool(self.home.claim_store_sweep(seconds))

    def cluster_id(self) -> str:
        """The home shard's cluster id."""
        return str(self.home.cluster_id())

    def note_capacity(self, worker: str, processes: int, keep: float) -> None:
        """Store.note_capacity on the home shard."""
        self.home.note_capacity(worker, processes, keep)

    def capacity(self, fresh: float) -> int:
        """The home shard's workers' pool processes: `gamebatch worker` runs one Celery
        worker per shard on each host, so every shard has as many as the home."""
        return int(self.home.capacity(fresh))

    def workers_seen(self, fresh: float) -> int:
        """The home shard's workers (each of them has one on every shard)."""
        return int(self.home.workers_seen(fresh))

    def now(self) -> float:
        """The home shard's clock."""
        return float(self.home.now())

    def take_message(self, queues: list[str], task_ids: list[str]) -> str | None:
        """JobStore.take_message on the home shard (sharing is for local workers only)."""
        found: str | None = self.home.take_message(queues, task_ids)
        return found

    def close(self) -> None:
        """Close every shard's connections."""
        for store in self.stores:
            store.close()


def open_store(
    settings: Settings, *, command: bool = False, said: Callable[[str], None] | None = None
) -> JobStore | ShardedStore:
    """The store of the settings' Redis: one JobStore, or a ShardedStore with shards. A
    command's retries a lost Redis for `failover_seconds`, saying so through `said`."""
    patience = settings.failover_seconds if command else PATIENCE_SECONDS
    stores = [
        JobStore.from_url(url, command=command, patience=patience, said=said)
        for url in settings.shard_urls
    ]
    return stores[0] if len(stores) == 1 else ShardedStore(stores)
