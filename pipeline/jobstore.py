"""Job state in Redis: manifests, chunk payloads and answers (the only module that touches keys)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from typing import Any

import redis

from pipeline import keys

# Store a chunk's answers once: a duplicate run of the chunk changes nothing.
_SAVE_ANSWERS = """
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
redis.call('DEL', KEYS[3])
if redis.call('HSETNX', KEYS[2], ARGV[1], ARGV[2]) == 1 then
  redis.call('HINCRBY', KEYS[1], 'done_chunks', 1)
  redis.call('HINCRBY', KEYS[1], 'done_cases', string.len(ARGV[2]))
  return 1
end
return 0
"""

_ANSWER_BATCH = 512  # chunks fetched per round trip by the collector


class JobState(str, Enum):
    """Where a job is in its life."""

    PRODUCING = "producing"
    RUNNING = "running"  # every chunk is queued
    COMPLETE = "complete"  # every chunk has answers
    FAILED = "failed"  # some chunk failed for good
    DONE = "done"  # the result file was written


@dataclass(frozen=True)
class Progress:
    """A job's counters as read in one round trip."""

    job_id: str
    problem: str
    state: JobState
    total: int | None  # cases; None until every chunk is queued
    done: int
    chunks: int | None
    done_chunks: int
    failures: dict[int, str]

    def as_dict(self) -> dict[str, Any]:
        """The JSON form printed by `status --json`."""
        return {
            "job": self.job_id,
            "problem": self.problem,
            "state": self.state.value,
            "total": self.total,
            "done": self.done,
            "chunks": self.chunks,
            "done_chunks": self.done_chunks,
            "failures": {str(k): v for k, v in sorted(self.failures.items())},
        }


def connect(url: str) -> redis.Redis:
    """A client for a broker URL (`redis://`, `rediss://`, `unix://`)."""
    return redis.Redis.from_url(url, socket_timeout=30, health_check_interval=30)


class JobStore:
    """Reads and writes one Redis; every key is named by `pipeline.keys`."""

    def __init__(self, client: redis.Redis) -> None:
        self.client: Any = client  # redis-py's return types are too loose to check
        self._save = client.register_script(_SAVE_ANSWERS)

    @classmethod
    def from_url(cls, url: str) -> JobStore:
        """A store on the Redis at `url`."""
        return cls(connect(url))

    # --- manifest -----------------------------------------------------------------------

    def open_job(self, job_id: str, fields: dict[str, str | int]) -> dict[str, str]:
        """Create the manifest unless it exists; return the manifest in force."""
        key = keys.job(job_id)
        with self.client.pipeline() as pipe:
            pipe.hsetnx(key, "created", repr(time.time()))
            pipe.hgetall(key)
            created, manifest = pipe.execute()
        if created:
            self.client.hset(key, mapping={**fields, "state": JobState.PRODUCING.value})
            self.client.zadd(keys.JOBS, {job_id: time.time()})
            return self.manifest(job_id) or {}
        return _decode(manifest)

    def manifest(self, job_id: str) -> dict[str, str] | None:
        """The manifest, or None when the job does not exist."""
        raw = self.client.hgetall(keys.job(job_id))
        return _decode(raw) if raw else None

    def finish_production(self, job_id: str, chunks: int, total: int) -> None:
        """Record the chunk plan's size once every chunk is queued."""
        self.client.hset(
            keys.job(job_id),
            mapping={"chunks": chunks, "total": total, "state": JobState.RUNNING.value},
        )

    def set_state(self, job_id: str, state: JobState) -> None:
        """Change the recorded state."""
        self.client.hset(keys.job(job_id), "state", state.value)

    def progress(self, job_id: str) -> Progress | None:
        """The job's counters, or None when it does not exist."""
        with self.client.pipeline(transaction=False) as pipe:
            pipe.hgetall(keys.job(job_id))
            pipe.hgetall(keys.errors(job_id))
            raw, raw_errors = pipe.execute()
        if not raw:
            return None
        m = _decode(raw)
        failures = {int(k): v for k, v in _decode(raw_errors).items()}
        state = JobState(m.get("state", JobState.PRODUCING.value))
        chunks = int(m["chunks"]) if "chunks" in m else None
        done_chunks = int(m.get("done_chunks", 0))
        if state == JobState.RUNNING and failures:
            state = JobState.FAILED
        elif state == JobState.RUNNING and done_chunks == chunks:
            state = JobState.COMPLETE
        return Progress(
            job_id=job_id,
            problem=m.get("problem", ""),
            state=state,
            total=int(m["total"]) if "total" in m else None,
            done=int(m.get("done_cases", 0)),
            chunks=chunks,
            done_chunks=done_chunks,
            failures=failures,
        )

    def jobs(self) -> list[str]:
        """Known job ids, oldest first (ids whose manifest expired are dropped)."""
        ids = [v.decode() for v in self.client.zrange(keys.JOBS, 0, -1)]
        with self.client.pipeline(transaction=False) as pipe:
            for job_id in ids:
                pipe.exists(keys.job(job_id))
            alive = pipe.execute()
        gone = [job_id for job_id, ok in zip(ids, alive, strict=True) if not ok]
        if gone:
            self.client.zrem(keys.JOBS, *gone)
        return [job_id for job_id, ok in zip(ids, alive, strict=True) if ok]

    # --- chunks ---------------------------------------------------------------------------

    def answered(self, job_id: str) -> set[int]:
        """Indexes of chunks that already have answers."""
        return {int(k) for k in self.client.hkeys(keys.answers(job_id))}

    def put_chunk(self, job_id: str, index: int, payload: bytes) -> None:
        """Store a chunk's payload for the worker that will take it."""
        self.client.set(keys.chunk_input(job_id, index), payload)

    def chunk_payload(self, job_id: str, index: int) -> bytes | None:
        """The payload, or None when the chunk is done or its job is gone."""
        value: bytes | None = self.client.get(keys.chunk_input(job_id, index))
        return value

    def save_answers(self, job_id: str, index: int, digits: str) -> bool:
        """Store answers atomically and once; False for a duplicate or a vanished job."""
        keys_ = [keys.job(job_id), keys.answers(job_id), keys.chunk_input(job_id, index)]
        return bool(self._save(keys=keys_, args=[index, digits]) == 1)

    def fail_chunk(self, job_id: str, index: int, reason: str) -> None:
        """Record that a chunk cannot be solved."""
        if self.client.exists(keys.job(job_id)):
            self.client.hset(keys.errors(job_id), str(index), reason)

    def iter_answers(self, job_id: str, chunks: int) -> Iterator[str]:
        """Every chunk's answers in chunk order, a batch of chunks per round trip."""
        for start in range(0, chunks, _ANSWER_BATCH):
            fields = [str(i) for i in range(start, min(start + _ANSWER_BATCH, chunks))]
            values = self.client.hmget(keys.answers(job_id), fields)
            for index, value in zip(fields, values, strict=True):
                if value is None:
                    raise LookupError(f"chunk {index} of job {job_id} has no answers")
                yield value.decode("ascii")

    # --- life cycle -------------------------------------------------------------------------

    def expire(self, job_id: str, ttl: int) -> None:
        """Keep the manifest and answers for `ttl` seconds (a re-run then costs nothing)."""
        with self.client.pipeline() as pipe:
            for key in (keys.job(job_id), keys.answers(job_id), keys.errors(job_id)):
                pipe.expire(key, ttl)
            pipe.execute()

    def delete(self, job_id: str) -> None:
        """Remove every key of the job (workers then drop its remaining chunks)."""
        pattern = keys.chunk_input(job_id, 0)[:-1] + "*"
        with self.client.pipeline() as pipe:
            pipe.delete(keys.job(job_id), keys.answers(job_id), keys.errors(job_id))
            pipe.zrem(keys.JOBS, job_id)
            pipe.execute()
        batch = []
        for key in self.client.scan_iter(match=pattern, count=1000):
            batch.append(key)
            if len(batch) >= 1000:
                self.client.delete(*batch)
                batch.clear()
        if batch:
            self.client.delete(*batch)

    # --- shared tables (the TableCache of the games) ----------------------------------------

    def get(self, name: str) -> bytes | None:
        """A shared table."""
        value: bytes | None = self.client.get(keys.table(name))
        return value

    def set(self, name: str, value: bytes) -> None:
        """Store a shared table for every other worker."""
        self.client.set(keys.table(name), value)


def _decode(raw: Any) -> dict[str, str]:
    return {k.decode(): v.decode() for k, v in raw.items()}
