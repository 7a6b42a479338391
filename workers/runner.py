"""Running one chunk: fetch its payload, solve every case, store the answers once."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from enum import StrEnum
from types import TracebackType

from pipeline.messages import INVALID_CODE, BadPayload, ChunkPayload, encode_answer
from pipeline.registry import registry
from pipeline.store import Store


class Outcome(StrEnum):
    """What happened to a chunk task."""

    SOLVED = "solved"
    DUPLICATE = "duplicate"  # already answered (a message delivered twice)
    GONE = "gone"  # its job does not exist (any more) or was cancelled, or no such chunk
    FAILED = "failed"
    REJECTED = "rejected"  # a malformed message (see pipeline.messages.task_args)


@dataclass(frozen=True)
class Policy:
    """How a worker runs chunks."""

    holder: str = "worker"  # names the lease holder
    lease_seconds: int = 30  # an unrefreshed lease tells others the worker is gone
    max_attempts: int = 3  # runs of a chunk before it is failed as a poison chunk


class Lease:
    """Refreshes a chunk's lease from a thread while the chunk is solved."""

    def __init__(self, store: Store, job_id: str, index: int, policy: Policy) -> None:
        self._args = (job_id, index, policy.holder, policy.lease_seconds)
        self._store = store
        self._every = max(policy.lease_seconds / 3, 0.1)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self._every):
            self._store.refresh_lease(*self._args)

    def __enter__(self) -> Lease:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join()


def run_chunk(store: Store, job_id: str, index: int, policy: Policy = Policy()) -> Outcome:
    """Solve chunk `index` of `job_id`; safe to run any number of times."""
    raw = store.chunk_payload(job_id, index)
    if raw is None:
        return Outcome.DUPLICATE if store.has_answers(job_id, index) else Outcome.GONE
    try:
        payload = ChunkPayload.decode(raw)
    except BadPayload as exc:
        store.fail_chunk(job_id, index, str(exc))
        return Outcome.FAILED
    problem = registry().get(payload.problem)
    if problem is None:
        store.fail_chunk(job_id, index, f"unknown problem {payload.problem!r}")
        return Outcome.FAILED
    attempt = store.begin_attempt(job_id, index, policy.holder, policy.lease_seconds)
    if attempt < 0:
        return Outcome.GONE
    if attempt > policy.max_attempts:
        offset = store.cursor(job_id, index)
        if offset is None and len(payload.cases) == 1:
            offset = 0
        last = payload.first + len(payload.cases) - 1
        where = f"case {payload.first + offset}" if offset is not None else (
            f"cases {payload.first}-{last}"
        )  # fmt: skip
        store.fail_chunk(job_id, index, f"{where}: its worker died in {attempt - 1} attempts")
        return Outcome.FAILED
    careful = attempt > 1  # a run died before: record each case so the culprit gets named
    codes = []
    with Lease(store, job_id, index, policy):
        for offset, case in enumerate(payload.cases):
            if careful:
                store.set_cursor(job_id, index, offset)
            if case is None:
                codes.append(INVALID_CODE)
                continue
            try:
                codes.append(encode_answer(problem.solve(case)))
            except Exception as exc:  # a solver bug must name its case, not kill the worker
                number = payload.first + offset
                store.fail_chunk(job_id, index, f"case {number}: {type(exc).__name__}: {exc}")
                return Outcome.FAILED
    saved = store.save_answers(job_id, index, "".join(codes))
    return Outcome.SOLVED if saved else Outcome.DUPLICATE
