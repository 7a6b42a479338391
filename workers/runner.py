"""Running one chunk: fetch its payload, solve (or compare) every case, store the result once."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from enum import StrEnum
from types import TracebackType

from pipeline.messages import (
    ANSWER_CODES,
    INVALID_CODE,
    BadPayload,
    ChunkPayload,
    ComparePayload,
    decode_payload,
    encode_answer,
)
from pipeline.problem import Problem
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
    """Solve (or compare) chunk `index` of `job_id`; safe to run any number of times."""
    raw = store.chunk_payload(job_id, index)
    if raw is None:
        return Outcome.DUPLICATE if store.has_answers(job_id, index) else Outcome.GONE
    try:
        payload = decode_payload(raw)
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
        where = _where(store, job_id, index, payload)
        store.fail_chunk(job_id, index, f"{where}: its worker died in {attempt - 1} attempts")
        return Outcome.FAILED
    with Lease(store, job_id, index, policy):
        if isinstance(payload, ComparePayload):
            try:
                codes, details = compare_chunk(problem, payload)
            except BadPayload as exc:
                store.fail_chunk(job_id, index, str(exc))
                return Outcome.FAILED
        else:
            found = _solve(store, job_id, index, problem, payload, careful=attempt > 1)
            if isinstance(found, Outcome):
                return found
            codes, details = found, ""
    saved = store.save_answers(job_id, index, codes, details)
    return Outcome.SOLVED if saved else Outcome.DUPLICATE


def _where(store: Store, job_id: str, index: int, payload: ChunkPayload | ComparePayload) -> str:
    """The case (or cases) a chunk whose worker keeps dying was at."""
    if isinstance(payload, ComparePayload):
        return f"comparison chunk {index}"
    offset = store.cursor(job_id, index)
    if offset is None and len(payload.cases) == 1:
        offset = 0
    if offset is not None:
        return f"case {payload.first + offset}"
    return f"cases {payload.first}-{payload.first + len(payload.cases) - 1}"


def _solve(
    store: Store, job_id: str, index: int, problem: Problem, payload: ChunkPayload,
    *, careful: bool,
) -> str | Outcome:  # fmt: skip
    """The answer codes of every case; with `careful` (a run died before) each case is
    recorded first, so that the culprit gets named."""
    codes = []
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
    return "".join(codes)


def compare_chunk(problem: Problem, payload: ComparePayload) -> tuple[str, str]:
    """The verdict letters of every case of every segment, and per segment (as JSON) its
    file, its number of cases, its first mismatches and its extra output."""
    from pipeline.verdicts import compare_file, compare_segment  # grading only

    words = dict(zip(ANSWER_CODES, problem.answers, strict=False))
    codes, details = [], []
    for seg in payload.segments:
        try:
            expected = [words[code] for code in seg.expected]
        except KeyError as exc:
            raise BadPayload(f"{exc} is not an answer code of {problem.name}") from None
        extra = seg.extra
        if seg.data is not None:
            letters, shown, extra = compare_file(
                expected, seg.data, ignore_case=payload.ignore_case
            )
        else:
            letters, shown = compare_segment(expected, seg.lines, seg.first,
                                             ignore_case=payload.ignore_case)  # fmt: skip
        codes.append(letters)
        details.append([seg.file, len(letters), shown, extra])
    return "".join(codes), json.dumps(details, separators=(",", ":"))
