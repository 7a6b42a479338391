"""A job's life, as every part of gamebatch sees it: its states, its counters, and what the
store answers when a chunk begins or is queued (no I/O here)."""

from __future__ import annotations

import re
from enum import IntEnum, StrEnum
from typing import Any, NamedTuple

import msgspec

_JOB_ID = re.compile(r"[A-Za-z0-9_.]+(-[A-Za-z0-9_.]+)*-[0-9a-f]{24}(-keep-going)?")


def is_job_id(text: str) -> bool:
    """Whether `text` has the shape of a job id (`<problem>-<24 hex digits>`, maybe with
    `-keep-going`, or `compare.<problem>-<24 hex digits>`), so that it can name keys."""
    return _JOB_ID.fullmatch(text) is not None


KEEP_GOING_SUFFIX = "-keep-going"  # of the id of a job that marks bad cases INVALID


class JobState(StrEnum):
    """Where a job is in its life."""

    QUEUED = "queued"  # uploaded, waiting for a runner (an HTTP record's first state)
    PRODUCING = "producing"
    RUNNING = "running"  # every chunk is queued
    COMPLETE = "complete"  # every chunk has answers
    FAILED = "failed"  # some chunk failed for good
    DONE = "done"  # the result file was written
    CANCELLED = "cancelled"


class Judging(NamedTuple):
    """What a judging job's workers did: programs (of the grading) made ready to run, those
    that did not compile, cases run and cases whose verdicts were kept from before."""

    programs: int
    ready: int
    failed: int
    cases_run: int
    cases_kept: int

    @classmethod
    def of(cls, m: dict[str, str]) -> Judging | None:
        """From a manifest (None: not a judging job)."""
        if "programs" not in m:
            return None
        names = ("programs", "programs_ready", "programs_failed", "cases_run", "cases_kept")
        return cls(*(int(m.get(name, 0)) for name in names))


class JobCounters(msgspec.Struct, frozen=True):
    """A job's counters as read in one round trip."""

    job_id: str
    problem: str
    state: JobState
    total: int | None  # cases; None until every chunk is queued
    done: int
    chunks: int | None
    done_chunks: int
    failures: dict[int, str]
    created: float | None = None  # Redis clock when the job was opened
    started: float | None = None  # Redis clock when a worker began the first chunk
    answered: float | None = None  # and when the latest answers were stored
    judging: Judging | None = None  # a judging job's programs and runs
    name: str | None = None  # the input's name, as its producer was given it
    size: int | None = None  # the input's bytes
    lane: str | None = None
    finished: float | None = None  # Redis clock when its result was written (DONE)

    @property
    def rate(self) -> float | None:
        """Cases answered per second of the job's run so far (Redis clock only, so no skew)."""
        if self.started is None or self.answered is None or self.answered <= self.started:
            return None
        return self.done / (self.answered - self.started)

    def as_dict(self) -> dict[str, Any]:
        """The counters by the names of a job's view (pipeline.jobs.view)."""
        return {
            "id": self.job_id,
            "name": self.name,
            "problem": self.problem,
            "state": self.state.value,
            "size": self.size,
            "total": self.total,
            "done": self.done,
            "chunks": self.chunks,
            "done_chunks": self.done_chunks,
            "failures": {str(k): v for k, v in sorted(self.failures.items())},
            "created": self.created,
            "started": self.started,
            "answered": self.answered,
            "finished": self.finished,
            "cases_per_second": self.rate,
            "lane": self.lane,
            "keep_going": self.job_id.endswith(KEEP_GOING_SUFFIX),
            **({"judging": self.judging._asdict()} if self.judging else {}),
        }


# the manifest's field naming the job's folders in the payload store (space-separated: a run
# after an interrupted one adds its own), or an older producer's one copy
PAYLOAD_OBJECT = "payload_object"

FINISHED = frozenset({JobState.DONE.value, JobState.FAILED.value, JobState.CANCELLED.value})
"""The states a job never leaves (on the command line, over HTTP and on the page alike)."""


class Began(NamedTuple):
    """A run of a chunk begun: its attempt number, payload and the payload's digest; attempt
    0 means the chunk has its answers already, -1 that it or its job is gone (then there is
    no payload)."""

    attempt: int
    payload: bytes | None = None
    digest: str = ""


class Cancel(NamedTuple):
    """What a cancel found: whether the job exists, and the state it had ended in already
    ('' when this cancel ended it)."""

    found: bool
    ended: str = ""


class Put(IntEnum):
    """What became of a chunk's payload handed to `put_chunk`."""

    STORED = 1
    NOT_PRODUCER = -1  # another process produces the job now, or it is gone or cancelled
    PLAN_DIFFERS = -2  # the job's chunk plan is final and this chunk's bytes are not in it


def counters(job_id: str, m: dict[str, str], errors: dict[str, str]) -> JobCounters | None:
    """A job's counters from its manifest and errors hashes (None: no manifest)."""
    if not m:
        return None
    failures = {int(k): v for k, v in errors.items()}
    state = JobState(m.get("state", JobState.PRODUCING.value))
    chunks = int(m["chunks"]) if "chunks" in m else None
    done_chunks = int(m.get("done_chunks", 0))
    if state == JobState.RUNNING and failures:
        state = JobState.FAILED
    elif state == JobState.RUNNING and done_chunks == chunks:
        state = JobState.COMPLETE
    return JobCounters(
        job_id=job_id,
        problem=m.get("problem", ""),
        state=state,
        total=int(m["total"]) if "total" in m else None,
        done=int(m.get("done_cases", 0)),
        chunks=chunks,
        done_chunks=done_chunks,
        failures=failures,
        created=float(m["created"]) if "created" in m else None,
        started=float(m["started"]) if "started" in m else None,
        answered=float(m["answered"]) if "answered" in m else None,
        judging=Judging.of(m),
        name=m.get("input") or None,
        size=int(m["size"]) if m.get("size", "").isdigit() else None,
        lane=m.get("lane") or None,
        finished=float(m["finished"]) if "finished" in m else None,
    )
