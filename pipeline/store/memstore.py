"""Job state in this process's memory: the Store of unit tests (as dramatiq's StubBroker).

It keeps the semantics of the Redis store and its Lua scripts (answers stored once, leases
that expire, a cancelled job refusing work); tests/unit/test_store_contract.py holds both
stores to the same behaviour. Time is a clock the test can move.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

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
from pipeline.store.protocol import Store


@dataclass
class _Job:
    manifest: dict[str, str]
    answers: dict[int, str] = field(default_factory=dict)
    errors: dict[int, str] = field(default_factory=dict)
    attempts: dict[int, int] = field(default_factory=dict)
    requeued: dict[int, int] = field(default_factory=dict)
    cursor: dict[int, int] = field(default_factory=dict)
    details: dict[int, str] = field(default_factory=dict)
    invalid: list[str] = field(default_factory=list)
    payloads: dict[int, bytes] = field(default_factory=dict)
    leases: dict[int, float] = field(default_factory=dict)  # index -> expiry on the clock
    sums: dict[int, str] = field(default_factory=dict)  # index -> its payload's digest
    found_invalid: dict[str, list[str]] = field(default_factory=dict)  # producer -> its own


class MemoryTables:
    """Shared tables, in a dict."""

    def __init__(self) -> None:
        self.values: dict[str, bytes] = {}

    def get(self, name: str) -> bytes | None:
        """A table, or None."""
        return self.values.get(name)

    def set(self, name: str, value: bytes) -> None:
        """Keep a table."""
        self.values[name] = value


class MemoryStore:
    """The Store interface over dicts; `clock` gives seconds (a test may move it)."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self._jobs: dict[str, _Job] = {}
        self._judged: dict[str, dict[str, bytes]] = {}  # program -> case key -> verdict
        self._created: dict[str, float] = {}
        self._sweep_until = self._store_sweep_until = 0.0
        self._cluster = secrets.token_hex(8)
        self._capacity: dict[str, tuple[int, float]] = {}  # worker -> (processes, when)
        self.queues: dict[str, int] = {}  # messages waiting, as a test sets them
        self._tables = MemoryTables()
        self._producers: dict[str, tuple[str, float]] = {}  # job -> (token, expiry)

    @property
    def tables(self) -> MemoryTables:
        """The games' shared tables."""
        return self._tables

    def _live(self, job_id: str) -> _Job | None:
        job = self._jobs.get(job_id)
        if job is not None:
            now = self.clock()
            job.leases = {i: t for i, t in job.leases.items() if t > now}
        return job

    # --- manifests and counters -------------------------------------------------------------

    def open_job(self, job_id: str, fields: dict[str, str | int]) -> dict[str, str]:
        """Create the manifest unless it exists; the manifest in force."""
        if job_id not in self._jobs:
            manifest = {k: str(v) for k, v in fields.items()}
            manifest.update(created=repr(self.clock()), state=JobState.PRODUCING.value)
            self._jobs[job_id] = _Job(manifest)
            self._created[job_id] = self.clock()
        return dict(self._jobs[job_id].manifest)

    def manifest(self, job_id: str) -> dict[str, str] | None:
        """The manifest, or None."""
        job = self._live(job_id)
        return dict(job.manifest) if job and job.manifest else None

    def finish_production(
        self, job_id: str, chunks: int, total: int, token: str = ""
    ) -> JobState | None:
        """Every chunk is queued: RUNNING; None when the job is gone or has another producer
        or a chunk of the plan has no digest, CANCELLED if it was cancelled."""
        job = self._live(job_id)
        if job is None or not job.manifest:
            return None
        if job.manifest.get("state") == JobState.CANCELLED.value:
            return JobState.CANCELLED
        if token and self._producer(job_id) != token:
            return None
        if token and any(index not in job.sums for index in range(chunks)):
            return None  # a chunk Redis lost (see finish_production.lua)
        if token:
            job.invalid = job.found_invalid.pop(token, [])
        job.manifest.update(chunks=str(chunks), total=str(total), state=JobState.RUNNING.value)
        return JobState.RUNNING

    def _producer(self, job_id: str) -> str | None:
        token, until = self._producers.get(job_id, ("", 0.0))
        return token if until > self.clock() else None

    def claim_production(self, job_id: str, token: str, seconds: float) -> bool:
        """Become the job's one producer, unless another process is."""
        if self._producer(job_id) not in (None, token):
            return False
        self._producers[job_id] = (token, self.clock() + seconds)
        return True

    def renew_production(self, job_id: str, token: str, seconds: float) -> bool:
        """Stay the job's producer; False when it is no longer ours."""
        return self._producer(job_id) == token and self.claim_production(job_id, token, seconds)

    def production_holder(self, job_id: str) -> str | None:
        """The token of the job's producer, if one holds it."""
        return self._producer(job_id)

    def release_production(self, job_id: str, token: str) -> None:
        """Stop being the job's producer."""
        if self._producer(job_id) == token:
            del self._producers[job_id]

    def abandon_production(self, job_id: str, token: str) -> bool:
        """Give the job up: removed if its plan is not final (see JobStore); with no token,
        an orphan that no producer holds. Whether it was removed."""
        holder = self._producer(job_id)
        if (holder is not None) if not token else (holder != token):
            return False
        if holder is not None:
            self.release_production(job_id, token)
        job = self._live(job_id)
        if job is None or job.manifest.get("state") != JobState.PRODUCING.value:
            return False
        if not token and "kind" in job.manifest:  # a verdict job has no claims
            return False
        self.delete(job_id)
        return True

    def set_state(self, job_id: str, state: JobState) -> None:
        """Change the recorded state."""
        self._set(job_id, state=state.value)

    def add_payload_folder(self, job_id: str, folder: str) -> None:
        """Name one more payload-store folder in the manifest."""
        named = self._jobs[job_id].manifest.get(PAYLOAD_OBJECT, "").split()
        if folder not in named:
            self._set(job_id, **{PAYLOAD_OBJECT: " ".join([*named, folder])})

    def _set(self, job_id: str, **fields: str) -> None:
        job = self._jobs.setdefault(job_id, _Job({}))  # HSET creates the hash, as in Redis
        job.manifest.update(fields)

    def progress(self, job_id: str) -> JobCounters | None:
        """The job's counters, or None."""
        return self.progress_of([job_id])[0]

    def progress_of(self, job_ids: list[str]) -> list[JobCounters | None]:
        """progress() of several jobs."""
        found = []
        for job_id in job_ids:
            job = self._live(job_id)
            errors = {str(k): v for k, v in job.errors.items()} if job else {}
            found.append(counters(job_id, job.manifest if job else {}, errors))
        return found

    def jobs(self) -> list[str]:
        """Known job ids, oldest first."""
        return [j for j in sorted(self._created, key=self._created.__getitem__) if j in self._jobs]

    def sweep_candidates(self, further: int = 500) -> list[str]:
        """Every job (a test's store is small)."""
        return self.jobs()

    def note_swept(self, unfinished: list[str], finished: list[str]) -> None:
        """Nothing to keep."""

    # --- chunks -----------------------------------------------------------------------------

    def answered(self, job_id: str) -> set[int]:
        """Chunks with answers."""
        job = self._live(job_id)
        return set(job.answers) if job else set()

    def answered_among(self, job_id: str, indexes: list[int]) -> list[int]:
        """Which of these chunks have answers."""
        done = self.answered(job_id)
        return [i for i in indexes if i in done]

    def has_answers(self, job_id: str, index: int) -> bool:
        """Whether chunk `index` has answers."""
        return index in self.answered(job_id)

    def answered_digests(self, job_id: str) -> dict[int, str]:
        """Chunks with answers, with the digest of the payload they answer."""
        job = self._live(job_id)
        return {i: job.sums.get(i, "") for i in job.answers} if job else {}

    def put_chunk(
        self, job_id: str, index: int, payload: bytes, digest: str = "", token: str = ""
    ) -> Put:
        """Store a payload (see JobStore.put_chunk and put_chunk.lua)."""
        if not token:
            self._jobs.setdefault(job_id, _Job({})).payloads[index] = payload
            return Put.STORED
        job = self._live(job_id)
        state = job.manifest.get("state") if job else None
        if job is None or self._producer(job_id) != token or state in (None, "cancelled"):
            return Put.NOT_PRODUCER
        if job.sums.get(index) != digest:
            if state != JobState.PRODUCING.value and index in job.sums:
                return Put.PLAN_DIFFERS
            job.manifest["state"] = JobState.PRODUCING.value  # a final plan that lost a digest
            codes = job.answers.pop(index, None)
            if codes is not None:
                m = job.manifest
                m["done_chunks"] = str(int(m.get("done_chunks", 0)) - 1)
                m["done_cases"] = str(int(m.get("done_cases", 0)) - len(codes))
            job.sums[index] = digest
        if job.errors.pop(index, None) is not None:  # a failed chunk starts afresh
            for runs in (job.attempts, job.requeued, job.cursor):
                runs.pop(index, None)
        job.payloads[index] = payload
        return Put.STORED

    def chunk_payload(self, job_id: str, index: int) -> bytes | None:
        """The payload, or None."""
        job = self._live(job_id)
        return job.payloads.get(index) if job else None

    def begin_chunk(self, job_id: str, index: int, holder: str, lease: int) -> Began:
        """The payload, a counted run and the lease (see JobStore.begin_chunk)."""
        job = self._live(job_id)
        state = job.manifest.get("state") if job else None
        if job is None or state is None or state == JobState.CANCELLED.value:
            return Began(-1)
        if index not in job.payloads:
            return Began(0 if index in self.answered(job_id) else -1)
        job.attempts[index] = job.attempts.get(index, 0) + 1
        job.manifest.setdefault("started", repr(self.clock()))
        job.leases[index] = self.clock() + lease
        return Began(job.attempts[index], job.payloads[index], job.sums.get(index, ""))

    def refresh_lease(self, job_id: str, index: int, holder: str, lease: int) -> None:
        """Keep the lease alive."""
        self._jobs.setdefault(job_id, _Job({})).leases[index] = self.clock() + lease

    def set_cursor(self, job_id: str, index: int, offset: int) -> None:
        """Record the case being solved."""
        self._jobs.setdefault(job_id, _Job({})).cursor[index] = offset

    def cursor(self, job_id: str, index: int) -> int | None:
        """The recorded case, if any."""
        job = self._live(job_id)
        return job.cursor.get(index) if job else None

    def save_answers(
        self, job_id: str, index: int, codes: str, details: str = "", digest: str = ""
    ) -> bool:
        """Store answers (and details) once, for the payload of `digest` only; False for a
        duplicate, a replaced payload or a vanished job."""
        job = self._live(job_id)
        if job is None or job.sums.get(index, "") != digest:
            return False
        job.payloads.pop(index, None)
        job.leases.pop(index, None)
        job.attempts.pop(index, None)
        job.cursor.pop(index, None)
        state = job.manifest.get("state")
        if state is None or state == JobState.CANCELLED.value or index in job.answers:
            return False
        job.answers[index] = codes
        if details:
            job.details[index] = details
        m = job.manifest
        m["done_chunks"] = str(int(m.get("done_chunks", 0)) + 1)
        m["done_cases"] = str(int(m.get("done_cases", 0)) + len(codes))
        m["answered"] = repr(self.clock())
        return True

    def fail_chunk(self, job_id: str, index: int, reason: str) -> None:
        """Record that a chunk cannot be solved."""
        job = self._live(job_id)
        if job is not None:
            job.leases.pop(index, None)
            if job.manifest:
                job.errors[index] = reason

    def abandoned(self, job_id: str) -> list[int]:
        """Started chunks whose lease expired without answers (each reported once per run)."""
        job = self._live(job_id)
        if job is None:
            return []
        found = []
        for index, runs in job.attempts.items():
            if (
                index not in job.answers
                and index not in job.leases
                and index in job.payloads
                and job.requeued.get(index) != runs
            ):
                job.requeued[index] = runs
                found.append(index)
        return found

    def unleased(self, job_id: str) -> list[int]:
        """Chunks with a payload that no worker holds."""
        job = self._live(job_id)
        return [i for i in job.payloads if i not in job.leases] if job else []

    def leased(self, job_id: str) -> bool:
        """Whether a worker holds a chunk of the job."""
        job = self._live(job_id)
        return bool(job and job.leases)

    def iter_answers(self, job_id: str, chunks: int) -> Iterator[str]:
        """Every chunk's answers in chunk order."""
        job = self._live(job_id)
        for index in range(chunks):
            if job is None or index not in job.answers:
                raise LookupError(f"chunk {index} of job {job_id} has no answers")
            yield job.answers[index]

    def iter_details(self, job_id: str, chunks: int) -> Iterator[tuple[str, str]]:
        """Every chunk's answers with its details, in chunk order."""
        job = self._live(job_id)
        for index, codes in enumerate(self.iter_answers(job_id, chunks)):
            yield codes, job.details.get(index, "") if job else ""

    # --- keep-going errors ------------------------------------------------------------------

    def add_invalid(self, job_id: str, errors: list[str], token: str = "") -> None:
        """Record invalid cases (a producer's own, until its production ends)."""
        if errors:
            job = self._jobs.setdefault(job_id, _Job({}))
            (job.found_invalid.setdefault(token, []) if token else job.invalid).extend(errors)

    def invalid(self, job_id: str) -> list[str]:
        """The invalid cases' errors, in input order."""
        job = self._live(job_id)
        return list(job.invalid) if job else []

    # --- the cluster ------------------------------------------------------------------------

    def claim_sweep(self, holder: str, seconds: float) -> bool:
        """Take the right to sweep for `seconds`, unless another has it."""
        if self.clock() < self._sweep_until:
            return False
        self._sweep_until = self.clock() + seconds
        return True

    def claim_store_sweep(self, seconds: float) -> bool:
        """Take the right to sweep the payload store for `seconds`, unless another has it."""
        if self.clock() < self._store_sweep_until:
            return False
        self._store_sweep_until = self.clock() + seconds
        return True

    def cluster_id(self) -> str:
        """This store's random id."""
        return self._cluster

    def payload_objects(self) -> set[str]:
        """The payload-store copies that kept jobs name."""
        found = (job.manifest.get(PAYLOAD_OBJECT, "") for job in self._jobs.values())
        return {url for named in found for url in named.split()}

    def note_capacity(self, worker: str, processes: int, keep: float) -> None:
        """Say that `worker` lives with `processes` pool processes."""
        now = self.clock()
        self._capacity = {w: v for w, v in self._capacity.items() if v[1] > now - keep}
        self._capacity[worker] = (processes, now)

    def capacity(self, fresh: float) -> int:
        """Pool processes of the workers that said they live in the last `fresh` seconds."""
        return sum(n for n, when in self._capacity.values() if when >= self.clock() - fresh)

    def workers_seen(self, fresh: float) -> int:
        """How many workers said they live in the last `fresh` seconds."""
        return sum(when >= self.clock() - fresh for _, when in self._capacity.values())

    def now(self) -> float:
        """The store's clock."""
        return self.clock()

    def queue_length(self, queue: str) -> int:
        """Messages waiting in a queue."""
        return self.queues.get(queue, 0)

    # --- life cycle -------------------------------------------------------------------------

    def finish(self, job_id: str, ttl: int) -> bool:
        """Mark a collected job done where every chunk has its answers (no expiry in
        memory); whether it is done."""
        job = self._jobs.get(job_id)
        m = job.manifest if job else {}
        if m.get("state") == JobState.DONE.value:
            return True
        complete = "chunks" in m and m.get("done_chunks", "0") == m["chunks"]
        if m.get("state") != JobState.RUNNING.value or not complete:
            return False
        self._set(job_id, state=JobState.DONE.value, finished=f"{self.clock():.6f}")
        return True

    def expire(self, job_id: str, ttl: int) -> None:
        """Kept until a test deletes it (no expiry in memory)."""

    def kept_verdicts(self, program: str, cases: list[str]) -> list[bytes | None]:
        """The kept verdict of each case of a program (None: not judged yet)."""
        kept = self._judged.get(program, {})
        return [kept.get(case) for case in cases]

    def keep_verdicts(self, program: str, found: dict[str, str], ttl: int) -> None:
        """Kept until the store goes (no expiry in memory)."""
        self._judged.setdefault(program, {}).update((k, v.encode()) for k, v in found.items())

    def note_judged(self, job_id: str, program: str, *, failed: bool, run: int, kept: int) -> None:
        """Count a judging chunk's program (once per job), cases run and verdicts kept."""
        job = self._live(job_id)
        if job is None or not job.manifest:
            return
        m = job.manifest
        if f"program:{program}" not in m:
            m[f"program:{program}"] = str(int(failed))
            m["programs_ready"] = str(int(m.get("programs_ready", 0)) + 1)
            if failed:
                m["programs_failed"] = str(int(m.get("programs_failed", 0)) + 1)
        m["cases_run"] = str(int(m.get("cases_run", 0)) + run)
        m["cases_kept"] = str(int(m.get("cases_kept", 0)) + kept)

    def cancel(self, job_id: str, ttl: int) -> Cancel:
        """Stop a job: drop payloads, leases and answers; keep a cancelled manifest. A job
        that has ended is left as it is."""
        job = self._live(job_id)
        if job is None or not job.manifest:
            return Cancel(found=False)
        state = job.manifest.get("state", JobState.PRODUCING.value)
        if state in FINISHED:
            return Cancel(found=True, ended=state)
        self._jobs[job_id] = _Job({**job.manifest, "state": JobState.CANCELLED.value})
        return Cancel(found=True)

    def delete(self, job_id: str) -> None:
        """Remove every trace of the job."""
        self._jobs.pop(job_id, None)
        self._created.pop(job_id, None)
        self._producers.pop(job_id, None)

    def close(self) -> None:
        """Nothing to close."""


def _conforms(store: MemoryStore) -> Store:
    return store  # mypy checks here that MemoryStore has the Store interface
