"""Running one chunk: fetch its payload, solve every case, store the answers once."""

from __future__ import annotations

from enum import Enum

from pipeline.jobstore import JobStore
from pipeline.messages import BadPayload, ChunkPayload
from pipeline.problem import registry


class Outcome(str, Enum):
    """What happened to a chunk task."""

    SOLVED = "solved"
    DUPLICATE = "duplicate"  # already answered, or its job is gone
    FAILED = "failed"


def run_chunk(store: JobStore, job_id: str, index: int) -> Outcome:
    """Solve chunk `index` of `job_id`; safe to run any number of times."""
    raw = store.chunk_payload(job_id, index)
    if raw is None:
        return Outcome.DUPLICATE
    try:
        payload = ChunkPayload.decode(raw)
    except BadPayload as exc:
        store.fail_chunk(job_id, index, f"chunk {index}: {exc}")
        return Outcome.FAILED
    problem = registry().get(payload.problem)
    if problem is None:
        store.fail_chunk(job_id, index, f"chunk {index}: unknown problem {payload.problem!r}")
        return Outcome.FAILED
    digits = []
    for offset, case in enumerate(payload.cases):
        try:
            digits.append(chr(48 + problem.solve(case)))
        except Exception as exc:  # a solver bug must name its case, not kill the worker
            number = payload.first + offset
            store.fail_chunk(job_id, index, f"case {number}: {type(exc).__name__}: {exc}")
            return Outcome.FAILED
    saved = store.save_answers(job_id, index, "".join(digits))
    return Outcome.SOLVED if saved else Outcome.DUPLICATE
