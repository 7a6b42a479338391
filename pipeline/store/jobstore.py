"""Job state in Redis: manifests, chunk payloads, answers and cancelling a job."""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable, Iterator
from typing import Any

import redis
from redis.sentinel import MasterNotFoundError

from pipeline.config import mask_url
from pipeline.errors import UsageError
from pipeline.store import keys
from pipeline.store.connections import (
    CLIENT_NAME,
    PATIENCE_SECONDS,
    LuaScript,
    close,
    connect,
    probe,
    this_process,
)
from pipeline.store.jobstate import (
    FINISHED,
    PAYLOAD_OBJECT,
    Began,
    Cancel,
    JobCounters,
    JobState,
    Put,
    counters,
)
from pipeline.urls import is_sentinel

_ANSWER_BATCH = 512  # chunks fetched per round trip by the collector


REPLICA_WAIT_MS = 200  # how long stored answers wait for a replica to have them
REPLICA_WAIT_TRIES = 5  # WAITs a write makes while a replica is online, only slow to answer
ALONE_SECONDS = 10.0  # with no replica online, how long to store without asking for one
REPLICAS_SECONDS = 5.0  # how long a count of the replicas online is trusted
FAILOVER_WINDOW = 60.0  # seconds a job's done state is written again until a replica has it
REPLICATED, ALONE, UNACKNOWLEDGED = "replicated", "alone", "unacknowledged"  # after a write
SWEEP_FURTHER = 500  # jobs a sweep looks at beyond the open set, in turn
INVALID_KEPT_SECONDS = 24 * 3600  # a producer's own list of invalid cases, if it never ends


class JobStore:
    """Reads and writes one Redis; every key is named by `pipeline.store.keys`."""

    def __init__(self, client: redis.Redis, *, replicated: bool = False) -> None:
        """`replicated`: stored answers wait for a replica (a Redis watched by Sentinel)."""
        self.client: Any = client  # redis-py's return types are too loose to check
        self.replicated = replicated
        self._alone_until = 0.0  # no replica answered a WAIT: until then, none is asked
        self._replicas, self._replicas_until = 0, 0.0  # replicas online, until when known
        self._save = LuaScript(client, "save_answers")
        self._begin = LuaScript(client, "begin_chunk")
        self._abandoned = LuaScript(client, "abandoned")
        self._finish = LuaScript(client, "finish_production")
        self._open = LuaScript(client, "open_job")
        self._take = LuaScript(client, "take_message")
        self._put = LuaScript(client, "put_chunk")
        self._producer = LuaScript(client, "producer")
        self._abandon = LuaScript(client, "abandon_production")
        self._cancel = LuaScript(client, "cancel")
        self._judged = LuaScript(client, "note_judged")
        self._swept = LuaScript(client, "note_swept")
        self._done = LuaScript(client, "finish_job")

    @classmethod
    def check_url(cls, url: str) -> None:
        """Fail fast (no retries) when the Redis at `url` is unreachable or refuses us."""
        probe(url)

    @classmethod
    def wait_for(
        cls,
        url: str,
        report: Callable[[str], None],
        pause: float = 2.0,
        timeout: float | None = None,
    ) -> None:
        """Return once the Redis at `url` answers (saying once that we wait), or raise its
        error after `timeout` seconds; a Redis that refuses our credentials is a
        configuration error, not worth waiting for. With a `timeout` (a command), only a
        Redis that is not there yet is waited for: refused connections, timeouts, a Redis
        loading its data, sentinels without a primary; another answer (a TLS port spoken to
        in plain text, say) is raised at once."""
        deadline = None if timeout is None else time.monotonic() + timeout
        waiting = False
        cut = False  # a Redis killed while it answered cuts the connection once, not twice
        while True:
            try:
                cls.check_url(url)
                return
            except redis.AuthenticationError as exc:  # before ConnectionError: a subclass
                raise UsageError(
                    f"Redis at {mask_url(url)} refused the credentials: {exc}"
                ) from None
            except (redis.ConnectionError, redis.TimeoutError) as exc:
                first_cut = not cut and _cut(exc)  # looked at again before a word is said
                cut = cut or _cut(exc)
                away = _away(exc) or first_cut
                if deadline is not None and (time.monotonic() >= deadline or not away):
                    raise
                if not waiting and not first_cut:
                    report(f"waiting for Redis at {mask_url(url)}: {exc}")
                    waiting = True
                time.sleep(pause if deadline is None else min(pause, 0.5))

    def close(self) -> None:
        """Close the connections (to the sentinels too)."""
        close(self.client)

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        command: bool = False,
        patience: float = PATIENCE_SECONDS,
        said: Callable[[str], None] | None = None,
    ) -> JobStore:
        """A store on the Redis at `url`; `command`: for a gamebatch command (not a worker),
        which retries a lost Redis for `patience` seconds, saying so through `said`."""
        name = CLIENT_NAME if command else "gamebatch-worker"
        return cls(connect(url, name, patience=patience, said=said), replicated=is_sentinel(url))

    # --- manifest -----------------------------------------------------------------------

    def open_job(self, job_id: str, fields: dict[str, str | int]) -> dict[str, str]:
        """Create the manifest unless it exists (atomically: a producer of the same input
        at the same moment gets the whole of it); return the manifest in force."""
        pairs = [
            x for k, v in {**fields, "state": JobState.PRODUCING.value}.items() for x in (k, v)
        ]
        found = self._open(
            keys=[keys.job(job_id), keys.JOBS, keys.OPEN_JOBS], args=[job_id, time.time(), *pairs]
        )
        if isinstance(found, dict):  # RESP3 replies a map
            return _decode(found)
        return {found[i].decode(): found[i + 1].decode() for i in range(0, len(found), 2)}

    def manifest(self, job_id: str) -> dict[str, str] | None:
        """The manifest, or None when the job does not exist."""
        raw = self.client.hgetall(keys.job(job_id))
        return _decode(raw) if raw else None

    def finish_production(
        self, job_id: str, chunks: int, total: int, token: str = ""
    ) -> JobState | None:
        """Record the chunk plan's size once every chunk is queued: RUNNING. Nothing is
        written when the job is gone, or `token` is no longer its producer, or a chunk of
        the plan was lost (None), or it was cancelled meanwhile (CANCELLED). On a Redis
        watched by Sentinel, None too when no replica acknowledged it and the primary in
        force does not have it (a failover lost the end of the production: read the input
        again)."""
        args: list[str | int] = [chunks, total, JobState.RUNNING, JobState.CANCELLED, token]
        keys_ = [
            keys.job(job_id),
            keys.producer(job_id),
            keys.invalid(job_id),
            keys.invalid(job_id, token),
            keys.sums(job_id),
        ]
        found = {1: JobState.RUNNING, 2: JobState.CANCELLED}.get(
            int(self._finish(keys=keys_, args=args))
        )
        if found == JobState.RUNNING and self.replicated and not self._wait_for_a_replica():
            # no replica has it: a failover in between loses it (and maybe chunks before it)
            state = self.client.hget(keys.job(job_id), "state")
            if state in (None, JobState.PRODUCING.value.encode()):
                return None
        return found

    def claim_production(self, job_id: str, token: str, seconds: float) -> bool:
        """Become the job's one producer for `seconds`, unless another process is."""
        return self._producing(job_id, token, "claim", seconds)

    def renew_production(self, job_id: str, token: str, seconds: float) -> bool:
        """Stay the job's producer for `seconds` more; False when it is no longer ours."""
        return self._producing(job_id, token, "renew", seconds)

    def production_holder(self, job_id: str) -> str | None:
        """The token of the job's producer, if one holds it."""
        value = self.client.get(keys.producer(job_id))
        return None if value is None else str(value.decode())

    def release_production(self, job_id: str, token: str) -> None:
        """Stop being the job's producer."""
        self._producing(job_id, token, "release", 0)

    def _producing(self, job_id: str, token: str, verb: str, seconds: float) -> bool:
        args: list[str | int] = [token, verb, max(int(seconds * 1000), 1)]
        return int(self._producer(keys=[keys.producer(job_id)], args=args)) == 1

    def abandon_production(self, job_id: str, token: str) -> bool:
        """Give the job up as its producer: a job whose chunk plan is not final is removed
        with all it holds; one that another run produced keeps its answers. With no `token`,
        remove an orphan (still producing, and no producer holds it). Whether it was
        removed."""
        if token:
            self.client.delete(keys.invalid(job_id, token))
        keys_ = [
            keys.producer(job_id),
            keys.job(job_id),
            keys.JOBS,
            keys.OPEN_JOBS,
            *keys.per_chunk(job_id),
        ]
        if int(self._abandon(keys=keys_, args=[token, job_id])) != 1:
            return False
        self._delete_chunks(job_id)
        return True

    def set_state(self, job_id: str, state: JobState) -> None:
        """Change the recorded state."""
        self.client.hset(keys.job(job_id), "state", state.value)

    def add_payload_folder(self, job_id: str, folder: str) -> None:
        """Name one more payload-store folder in the manifest (a later run's; its producer
        holds the job, so no other writes the field meanwhile)."""
        named = (self.client.hget(keys.job(job_id), PAYLOAD_OBJECT) or b"").decode().split()
        if folder not in named:
            self.client.hset(keys.job(job_id), PAYLOAD_OBJECT, " ".join([*named, folder]))

    def progress(self, job_id: str) -> JobCounters | None:
        """The job's counters, or None when it does not exist."""
        return self.progress_of([job_id])[0]

    def progress_of(self, job_ids: list[str]) -> list[JobCounters | None]:
        """progress() of several jobs in one round trip."""
        with self.client.pipeline(transaction=False) as pipe:
            for job_id in job_ids:
                pipe.hgetall(keys.job(job_id))
                pipe.hgetall(keys.errors(job_id))
            replies = pipe.execute()
        return [
            counters(job_id, _decode(replies[2 * i]), _decode(replies[2 * i + 1]))
            for i, job_id in enumerate(job_ids)
        ]

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

    def sweep_candidates(self, further: int = SWEEP_FURTHER) -> list[str]:
        """The jobs a sweep looks at: those not seen finished yet, and the next `further` of
        all jobs in turn (so that one missing from the open set is found within a few
        rounds), but never every finished job at each round."""
        with self.client.pipeline(transaction=False) as pipe:
            pipe.zrange(keys.OPEN_JOBS, 0, -1)
            pipe.zcard(keys.JOBS)
            pipe.incrby(keys.SWEEP_CURSOR, further)
            unfinished, count, cursor = pipe.execute()
        start = (int(cursor) - further) % max(int(count), 1)
        more = self.client.zrange(keys.JOBS, start, start + further - 1)
        return list(dict.fromkeys(v.decode() for v in [*unfinished, *more]))

    def note_swept(self, unfinished: list[str], finished: list[str]) -> None:
        """Keep the open set to the jobs that are not finished (one that finished since the
        sweep looked is not added back)."""
        if unfinished or finished:
            states = [JobState.PRODUCING.value, JobState.RUNNING.value]
            self._swept(
                keys=[keys.OPEN_JOBS, *map(keys.job, unfinished)],
                args=[time.time(), len(unfinished), *states, *unfinished, *finished],
            )

    # --- chunks ---------------------------------------------------------------------------

    def answered(self, job_id: str) -> set[int]:
        """Indexes of chunks that already have answers."""
        return {int(k) for k in self.client.hkeys(keys.answers(job_id))}

    def answered_among(self, job_id: str, indexes: list[int]) -> list[int]:
        """Which of these chunks have answers."""
        values = self.client.hmget(keys.answers(job_id), [str(i) for i in indexes])
        return [i for i, v in zip(indexes, values, strict=True) if v is not None]

    def has_answers(self, job_id: str, index: int) -> bool:
        """Whether chunk `index` has answers."""
        return bool(self.client.hexists(keys.answers(job_id), str(index)))

    def answered_digests(self, job_id: str) -> dict[int, str]:
        """Chunks that have answers, with the digest of the payload they answer."""
        with self.client.pipeline(transaction=False) as pipe:
            pipe.hkeys(keys.answers(job_id))
            pipe.hgetall(keys.sums(job_id))
            answered, sums = pipe.execute()
        digests = {int(k): v.decode() for k, v in sums.items()}
        return {int(i): digests.get(int(i), "") for i in answered}

    def put_chunk(
        self, job_id: str, index: int, payload: bytes, digest: str = "", token: str = ""
    ) -> Put:
        """Store a chunk's payload for the worker that will take it. A producer names the
        payload's `digest` and its own `token` (see put_chunk.lua); a comparison job, which
        has one producer by construction, names neither."""
        if not token:
            self.client.set(keys.chunk_input(job_id, index), payload)
            return Put.STORED
        keys_ = [
            keys.job(job_id),
            keys.chunk_input(job_id, index),
            keys.sums(job_id),
            keys.answers(job_id),
            keys.producer(job_id),
            keys.errors(job_id),
            *(keys.job_field(job_id, name) for name in ("attempts", "requeued", "cursor")),
        ]
        return Put(int(self._put(keys=keys_, args=[index, payload, digest, token])))

    def chunk_payload(self, job_id: str, index: int) -> bytes | None:
        """The payload, or None when the chunk is done or its job is gone."""
        value: bytes | None = self.client.get(keys.chunk_input(job_id, index))
        return value

    def begin_chunk(self, job_id: str, index: int, holder: str, lease: int) -> Began:
        """Take the chunk's payload, count a run of it and take its lease, at once."""
        keys_ = [
            keys.job(job_id),
            keys.job_field(job_id, "attempts"),
            keys.lease(job_id, index),
            keys.chunk_input(job_id, index),
            keys.answers(job_id),
            keys.sums(job_id),
        ]
        found = self._begin(keys=keys_, args=[index, holder, lease])
        if len(found) == 1:
            return Began(int(found[0]))
        return Began(int(found[0]), found[1], found[2].decode())

    def refresh_lease(self, job_id: str, index: int, holder: str, lease: int) -> None:
        """Keep the chunk's lease alive while it runs."""
        self.client.set(keys.lease(job_id, index), holder, ex=lease)

    def set_cursor(self, job_id: str, index: int, offset: int) -> None:
        """Record which case of a retried chunk is being solved."""
        self.client.hset(keys.job_field(job_id, "cursor"), str(index), offset)

    def cursor(self, job_id: str, index: int) -> int | None:
        """The case offset recorded by the last retried run, if any."""
        value = self.client.hget(keys.job_field(job_id, "cursor"), str(index))
        return None if value is None else int(value)

    def save_answers(
        self, job_id: str, index: int, codes: str, details: str = "", digest: str = ""
    ) -> bool:
        """Store answers (and a comparison chunk's details) atomically and once, if `digest`
        (that of the payload they answer) is still the chunk's; False for a duplicate, a
        replaced payload or a vanished job."""
        keys_ = [
            keys.job(job_id),
            keys.answers(job_id),
            keys.chunk_input(job_id, index),
            keys.job_field(job_id, "attempts"),
            keys.job_field(job_id, "cursor"),
            keys.lease(job_id, index),
            keys.job_field(job_id, "details"),
            keys.sums(job_id),
        ]
        saved = self._save(keys=keys_, args=[index, codes, details, digest]) == 1
        if saved and self.replicated:
            self._wait_for_a_replica()
        return bool(saved)

    def _wait_for_a_replica(self) -> bool:
        """Until every replica online has what was just written (so that a failover keeps
        it, before the task is acknowledged); a primary with none online (after a failover,
        or while its replica syncs) is not waited on at every chunk, but a replica only slow
        to answer (a busy machine) is waited for again. Whether the replicas said they have it."""
        return self._replicated() == REPLICATED

    def _replicated(self) -> str:
        """REPLICATED when every replica online said it has what was just written (the
        sentinels may promote any of them, and they choose by offsets seconds old: one
        replica's word is not enough), ALONE when the primary streams to none (nothing to
        wait for: its writes are as safe as they can be; not asked again for ALONE_SECONDS),
        else UNACKNOWLEDGED: a replica is online to it but says nothing (slow, or cut off
        from it: a partition, or a failover under way)."""
        if time.monotonic() < self._alone_until:
            return ALONE
        for _ in range(REPLICA_WAIT_TRIES):
            online = self._replicas_online()
            if not online:
                self._alone_until = time.monotonic() + ALONE_SECONDS
                return ALONE
            if self.client.wait(online, REPLICA_WAIT_MS) >= online:
                return REPLICATED
            self._replicas_until = 0.0  # one that did not answer may be gone: ask again
        return UNACKNOWLEDGED

    def _replicas_online(self) -> int:
        """How many replicas the primary streams its writes to now (INFO's state=online),
        asked again after REPLICAS_SECONDS (or sooner, when one did not answer a WAIT)."""
        if time.monotonic() >= self._replicas_until:
            info = self.client.info("replication")
            self._replicas = sum(
                isinstance(v, dict) and v.get("state") == "online"
                for k, v in info.items()
                if k.startswith("slave")
            )
            self._replicas_until = time.monotonic() + REPLICAS_SECONDS
        return self._replicas

    def fail_chunk(self, job_id: str, index: int, reason: str) -> None:
        """Record that a chunk cannot be solved."""
        with self.client.pipeline() as pipe:
            pipe.exists(keys.job(job_id))
            pipe.delete(keys.lease(job_id, index))
            exists, _ = pipe.execute()
        if exists:
            self.client.hset(keys.errors(job_id), str(index), reason)

    def abandoned(self, job_id: str) -> list[int]:
        """Started chunks whose lease expired without answers (each reported once per run)."""
        keys_ = [
            keys.job_field(job_id, "attempts"),
            keys.answers(job_id),
            keys.job_field(job_id, "requeued"),
        ]
        prefixes = [keys.lease_prefix(job_id), keys.chunk_input_prefix(job_id)]
        return [int(i) for i in self._abandoned(keys=keys_, args=prefixes)]

    def unleased(self, job_id: str) -> list[int]:
        """Chunks with a payload that no worker holds (queued, reserved, or lost)."""
        prefix = keys.chunk_input_prefix(job_id)
        indexes = [int(k[len(prefix) :]) for k in self._scan(prefix + "*")]
        with self.client.pipeline(transaction=False) as pipe:
            for index in indexes:
                pipe.exists(keys.lease(job_id, index))
            held = pipe.execute()
        return [i for i, h in zip(indexes, held, strict=True) if not h]

    def add_invalid(self, job_id: str, errors: list[str], token: str = "") -> None:
        """Record errors of invalid cases (keep-going mode): a producer in its own list, which
        lasts as long as its claim unless its production ends."""
        if errors:
            with self.client.pipeline(transaction=False) as pipe:
                pipe.rpush(keys.invalid(job_id, token), *errors)
                if token:
                    pipe.expire(keys.invalid(job_id, token), INVALID_KEPT_SECONDS)
                pipe.execute()

    def invalid(self, job_id: str) -> list[str]:
        """Errors of the invalid cases, in input order."""
        return [e.decode() for e in self.client.lrange(keys.invalid(job_id), 0, -1)]

    def leased(self, job_id: str) -> bool:
        """Whether any worker holds a chunk of the job right now."""
        return next(self._scan(keys.lease_prefix(job_id) + "*"), None) is not None

    def claim_sweep(self, holder: str, seconds: float) -> bool:
        """Take the right to sweep for lost chunks for `seconds`, unless another has it."""
        return bool(self.client.set(keys.SWEEP, holder, nx=True, px=max(int(seconds * 1000), 1)))

    def claim_store_sweep(self, seconds: float) -> bool:
        """Take the right to sweep the payload store for `seconds`, unless another has it."""
        return bool(self.client.set(keys.STORE_SWEEP, this_process(), nx=True, ex=int(seconds)))

    def cluster_id(self) -> str:
        """This cluster's random id, made by the first caller (see keys.CLUSTER)."""
        self.client.set(keys.CLUSTER, secrets.token_hex(8), nx=True)
        return str(self.client.get(keys.CLUSTER).decode())

    def payload_objects(self) -> set[str]:
        """The payload-store copies that kept jobs name (manifest field payload_object)."""
        ids = self.client.zrange(keys.JOBS, 0, -1)
        with self.client.pipeline(transaction=False) as pipe:
            for job_id in ids:
                pipe.hget(keys.job(job_id.decode()), PAYLOAD_OBJECT)
            return {url for named in pipe.execute() if named for url in named.decode().split()}

    def note_capacity(self, worker: str, processes: int, keep: float) -> None:
        """Say that `worker` lives with `processes` pool processes; forget workers that have
        said nothing for `keep` seconds."""
        now = self.now()
        with self.client.pipeline(transaction=False) as pipe:
            pipe.zremrangebyscore(keys.CAPACITY, "-inf", now - keep)
            pipe.zadd(keys.CAPACITY, {f"{worker}:{processes}": now})
            pipe.execute()

    def capacity(self, fresh: float) -> int:
        """Pool processes of the workers that said they live in the last `fresh` seconds."""
        listed = self.client.zrangebyscore(keys.CAPACITY, self.now() - fresh, "+inf")
        return sum(int(member.rsplit(b":", 1)[1]) for member in listed)

    def workers_seen(self, fresh: float) -> int:
        """How many workers said they live in the last `fresh` seconds."""
        listed = self.client.zrangebyscore(keys.CAPACITY, self.now() - fresh, "+inf")
        return len({member.rsplit(b":", 1)[0] for member in listed})

    def now(self) -> float:
        """The Redis clock, which job timestamps use."""
        seconds, micros = self.client.time()
        return float(seconds) + float(micros) / 1e6

    def queue_length(self, queue: str) -> int:
        """Messages waiting in a Celery queue of the Redis transport."""
        return int(self.client.llen(queue))

    def take_message(self, queues: list[str], task_ids: list[str]) -> str | None:
        """Take the newest message off the first of these queues whose newest message is one
        of these tasks' (no worker has taken it): that task's id, or None."""
        found = self._take(keys=queues, args=task_ids)
        return None if found is None else str(found, "ascii")

    def iter_answers(self, job_id: str, chunks: int) -> Iterator[str]:
        """Every chunk's answers in chunk order, a batch of chunks per round trip."""
        for start in range(0, chunks, _ANSWER_BATCH):
            fields = [str(i) for i in range(start, min(start + _ANSWER_BATCH, chunks))]
            values = self.client.hmget(keys.answers(job_id), fields)
            for index, value in zip(fields, values, strict=True):
                if value is None:
                    raise LookupError(f"chunk {index} of job {job_id} has no answers")
                yield value.decode("ascii")

    def iter_details(self, job_id: str, chunks: int) -> Iterator[tuple[str, str]]:
        """Every chunk's answer codes with its details, in chunk order."""
        for start in range(0, chunks, _ANSWER_BATCH):
            fields = [str(i) for i in range(start, min(start + _ANSWER_BATCH, chunks))]
            with self.client.pipeline(transaction=False) as pipe:
                pipe.hmget(keys.answers(job_id), fields)
                pipe.hmget(keys.job_field(job_id, "details"), fields)
                codes, details = pipe.execute()
            for index, code, detail in zip(fields, codes, details, strict=True):
                if code is None:
                    raise LookupError(f"chunk {index} of job {job_id} has no answers")
                yield code.decode("ascii"), (detail or b"").decode()

    # --- life cycle -------------------------------------------------------------------------

    def finish(self, job_id: str, ttl: int) -> bool:
        """Mark a collected job done and let its keys expire (idempotent), where every chunk
        has its answers; whether it is done. On a Redis watched by Sentinel, only once a
        replica has the done state, and so every answer written before it: a primary cut
        off from its replica (or paused, and replaced meanwhile) takes the write and loses
        it when it is demoted, so an unacknowledged write is made again on whichever Redis
        the sentinels name after a reconnect, for up to FAILOVER_WINDOW seconds. False when
        the primary in force lacks answers (a failover lost them: they are solved again),
        or no replica acknowledged in that time."""
        deadline = time.monotonic() + FAILOVER_WINDOW
        alone_before = False
        while True:
            if not self._mark_done(job_id, ttl):
                return False
            if not self.replicated:
                return True
            said = self._replicated()
            if said == REPLICATED or (said == ALONE and alone_before):
                return True  # alone twice: the primary the sentinels name has no replica
            if time.monotonic() >= deadline:
                return False
            alone_before = said == ALONE
            self._alone_until = self._replicas_until = 0.0
            self.client.connection_pool.disconnect()  # what follows asks the sentinels

    def _mark_done(self, job_id: str, ttl: int) -> bool:
        """finish_job.lua on the primary in force: whether the job is done there."""
        keys_ = [keys.job(job_id), keys.OPEN_JOBS, *keys.per_chunk(job_id)]
        done, running = JobState.DONE.value, JobState.RUNNING.value
        args: list[str | int] = [done, running, f"{self.now():.6f}", ttl, job_id]
        return bool(self._done(keys=keys_, args=args) == 1)

    @staticmethod
    def _expire_in(pipe: Any, job_id: str, ttl: int) -> None:
        for key in (keys.job(job_id), *keys.per_chunk(job_id)):
            pipe.expire(key, ttl)
        pipe.zrem(keys.OPEN_JOBS, job_id)

    def expire(self, job_id: str, ttl: int) -> None:
        """Keep the manifest and answers for `ttl` seconds (a re-run then costs nothing); the
        sweep need not look at the job again."""
        with self.client.pipeline() as pipe:
            self._expire_in(pipe, job_id, ttl)
            pipe.execute()

    def kept_verdicts(self, program: str, cases: list[str]) -> list[bytes | None]:
        """The kept verdict of each case of a program (None: not judged yet)."""
        if not cases:
            return []
        return list(self.client.hmget(keys.judged(program), cases))

    def keep_verdicts(self, program: str, found: dict[str, str], ttl: int) -> None:
        """Keep a program's verdicts of these cases for `ttl` seconds after the latest."""
        if found:
            with self.client.pipeline(transaction=False) as pipe:
                pipe.hset(keys.judged(program), mapping=found)
                pipe.expire(keys.judged(program), ttl)
                pipe.execute()

    def note_judged(self, job_id: str, program: str, *, failed: bool, run: int, kept: int) -> None:
        """Count a judging chunk's program (once per job), cases run and verdicts kept."""
        self._judged(keys=[keys.job(job_id)], args=[program, int(failed), run, kept])

    def cancel(self, job_id: str, ttl: int) -> Cancel:
        """Stop a job in one write (its manifest, and its HTTP record and event when it was
        uploaded); a job that has ended is left as it is. Its queued payloads and leases go
        after (workers drop them anyway)."""
        event = json.dumps({"type": "cancelled", "job": job_id}, separators=(",", ":"))
        found = self._cancel(
            keys=[
                keys.job(job_id),
                keys.OPEN_JOBS,
                keys.api_job(job_id),
                keys.API_EVENTS,
                *keys.per_chunk(job_id),
            ],
            args=[
                job_id,
                ttl,
                f"{time.time():.6f}",
                event,
                keys.EVENT_CAP,
                keys.api_pending(""),
                *sorted(FINISHED),
            ],
        )
        cancel = Cancel(bool(found[0]), found[1].decode())
        if cancel.found and not cancel.ended:
            self._delete_chunks(job_id)
        return cancel

    def delete(self, job_id: str) -> None:
        """Remove every key of the job (workers then drop its remaining chunks)."""
        with self.client.pipeline() as pipe:
            pipe.delete(keys.job(job_id), keys.producer(job_id), *keys.per_chunk(job_id))
            pipe.zrem(keys.JOBS, job_id)
            pipe.zrem(keys.OPEN_JOBS, job_id)
            pipe.execute()
        self._delete_chunks(job_id)

    def _delete_chunks(self, job_id: str) -> None:
        for prefix in (keys.chunk_input_prefix(job_id), keys.lease_prefix(job_id)):
            pattern = prefix + "*"
            batch = list(self._scan(pattern))
            for start in range(0, len(batch), 1000):
                self.client.delete(*batch[start : start + 1000])

    def _scan(self, pattern: str) -> Iterator[str]:
        for key in self.client.scan_iter(match=pattern, count=1000):
            yield key.decode()

    @property
    def tables(self) -> SharedTables:
        """The tables games share between workers (their TableCache)."""
        return SharedTables(self.client)


class SharedTables:
    """Tables computed once per cluster (Grundy tables), kept in Redis for every worker."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def get(self, name: str) -> bytes | None:
        """A shared table, or None when nobody computed it yet."""
        value: bytes | None = self.client.get(keys.table(name))
        return value

    def set(self, name: str, value: bytes) -> None:
        """Store a shared table for every other worker."""
        self.client.set(keys.table(name), value)


def _decode(raw: Any) -> dict[str, str]:
    return {k.decode(): v.decode() for k, v in raw.items()}


_AWAY = ("Connection refused", "No route to host", "Network is unreachable")


_CUT = ("Connection reset by peer", "Connection closed by server", "Broken pipe")


def _cut(exc: Exception) -> bool:
    """Whether a connection error says the server ended the connection (a Redis being
    stopped, or a port that speaks another protocol: TLS, say)."""
    return any(words in str(exc) for words in _CUT)


def _away(exc: Exception) -> bool:
    """Whether a connection error says the Redis is not there yet (it may come soon)."""
    if isinstance(exc, redis.TimeoutError | redis.BusyLoadingError):
        return True
    if isinstance(exc, MasterNotFoundError):
        return True  # the sentinels are promoting a replica
    return any(words in str(exc) for words in _AWAY)
