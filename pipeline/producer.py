"""The producer: reads an input file as a stream, validates it, and queues its chunks."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from pipeline.chunking import chunk_cases
from pipeline.config import Settings
from pipeline.errors import InputError, UsageError
from pipeline.jobstore import JobStore, Progress, this_process
from pipeline.messages import ChunkPayload
from pipeline.problem import Problem
from pipeline.reader import read_batches
from pipeline.tokens import TokenReader

Send = Callable[[str, int], None]  # queue a task for (job id, chunk index)


@dataclass(frozen=True)
class Submitted:
    """A job whose every chunk is queued or already answered."""

    job_id: str
    input: Path
    total: int
    chunks: int
    queued: int  # chunks queued by this run (0 when a previous run did everything)
    keep_going: bool = False


def checksum(path: Path) -> str:
    """SHA-256 of the file's bytes."""
    try:
        with path.open("rb") as stream:
            return hashlib.file_digest(stream, "sha256").hexdigest()
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None


def choose_lane(path: Path, settings: Settings, wanted: str = "auto") -> str:
    """`interactive` for small inputs (or when asked), else `bulk`."""
    if wanted != "auto":
        return wanted
    small = path.stat().st_size <= settings.interactive_max_bytes
    return "interactive" if small else "bulk"


def job_id_for(problem: Problem, digest: str) -> str:
    """Jobs are named by what they compute, so a re-run finds its earlier job."""
    return f"{problem.name}-{digest[:24]}"


def submit(
    problem: Problem,
    path: Path,
    store: JobStore,
    send: Send,
    settings: Settings,
    *,
    window: int = 0,
    lane: str = "bulk",
    keep_going: bool = False,
    on_cases: Callable[[int], None] = lambda n: None,
    on_progress: Callable[[Progress], None] = lambda p: None,
) -> Submitted:
    """Validate and queue every chunk without answers; reuse a finished earlier run.

    With `window` > 0, waits while that many chunks of this run are unanswered, so that
    Redis holds a bounded part of a large input. On bad input the job is deleted and the
    InputError propagates, unless `keep_going`: then invalid cases are recorded and answered
    with a marker.
    """
    digest = checksum(path)
    job_id = job_id_for(problem, digest) + ("-keep-going" if keep_going else "")
    manifest = store.open_job(
        job_id,
        {
            "problem": problem.name,
            "input": path.name,
            "target_work": settings.chunk.target_work,
            "max_cases": settings.chunk.max_cases,
            "lane": lane,
            "producer": this_process(),
        },
    )
    progress = store.progress(job_id)
    if progress and progress.chunks is not None and progress.done_chunks == progress.chunks:
        on_cases(progress.total or 0)
        return Submitted(job_id, path, progress.total or 0, progress.chunks, 0, keep_going)
    answered = store.answered(job_id)
    target, max_cases = int(manifest["target_work"]), int(manifest["max_cases"])
    queued = total = chunks = 0
    invalid: list[str] = []
    store.reset_invalid(job_id)
    in_flight = None
    if window:
        in_flight = _Window(store, job_id, settings, on_progress, chunks=window)
    try:
        with path.open("rb") as raw:
            stream = _HashingReader(raw)
            tokens = TokenReader(
                stream,
                str(path),
                max_token=settings.limits.max_token_bytes,
                max_bytes=settings.limits.max_file_bytes,
            )
            batches = read_batches(
                problem,
                tokens,
                on_invalid=(lambda e: invalid.append(str(e))) if keep_going else None,
            )
            for chunk in chunk_cases(batches, problem.work, target, max_cases):
                chunks, total = chunk.index + 1, total + len(chunk.cases)
                if chunk.index not in answered:
                    payload = ChunkPayload(problem.name, chunk.first, chunk.cases).encode()
                    store.put_chunk(job_id, chunk.index, payload)
                    send(job_id, chunk.index)
                    queued += 1
                    if in_flight is not None:
                        in_flight.add(chunk.index, len(payload))
                on_cases(len(chunk.cases))
                store.add_invalid(job_id, invalid)
                invalid.clear()
            if stream.rest_digest() != digest:  # answers of other bytes than the job's name
                raise UsageError(f"cannot read {path}: the file changed while it was read")
    except UsageError:
        store.delete(job_id)
        raise
    except InputError:
        store.delete(job_id)  # nothing of a bad file is kept or written
        raise
    except OSError as exc:
        store.delete(job_id)
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    store.add_invalid(job_id, invalid)  # an error after the last case
    store.finish_production(job_id, chunks, total)
    return Submitted(job_id, path, total, chunks, queued, keep_going)


class _HashingReader:
    """A binary stream that hashes what is read from it, so that a job is named by the
    bytes it was made of even when the file changes after it was first hashed."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        self._hash = hashlib.sha256()

    def read(self, size: int = -1, /) -> bytes:
        """Read and hash."""
        data = self._stream.read(size)
        self._hash.update(data)
        return data

    def rest_digest(self) -> str:
        """The SHA-256 of every byte of the stream (reading what the reader left)."""
        while data := self.read(1 << 20):
            del data
        return self._hash.hexdigest()


class _Window:
    """Chunks this run queued that have no answers yet, bounded in number and in bytes."""

    def __init__(
        self,
        store: JobStore,
        job_id: str,
        settings: Settings,
        on_progress: Callable[[Progress], None],
        *,
        chunks: int,
    ) -> None:
        self.store, self.job_id = store, job_id
        self.chunks, self.max_bytes = chunks, settings.chunk.window_bytes
        self.poll = settings.poll_interval
        self.on_progress = on_progress
        self.pending: dict[int, int] = {}  # chunk index -> payload bytes

    def add(self, index: int, size: int) -> None:
        """Count a queued chunk; block while the window is full."""
        self.pending[index] = size
        while self._full():
            progress = self.store.progress(self.job_id)
            if progress is None or progress.failures:
                return  # the collector reports what went wrong
            self.on_progress(progress)
            for done in self.store.answered_among(self.job_id, list(self.pending)):
                del self.pending[done]
            if self._full():
                time.sleep(self.poll)

    def _full(self) -> bool:
        return len(self.pending) >= self.chunks or (
            len(self.pending) > 1 and sum(self.pending.values()) > self.max_bytes
        )
