"""The producer: reads an input file as a stream, validates it, and queues its chunks."""

from __future__ import annotations

import hashlib
import os
import stat
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Protocol, Union

from pipeline.chunking import Chunk, chunk_cases
from pipeline.config import Settings
from pipeline.errors import InputError, JobFailed, JobLost, UsageError
from pipeline.jobstore import JobCounters, JobState, this_process
from pipeline.messages import ChunkPayload, FilePayload, Identity, SlicePayload, file_identity
from pipeline.problem import Problem
from pipeline.reader import read_batches
from pipeline.slices import Deferred, Limits, Scanner, SliceChunk, slice_chunks
from pipeline.store import Store
from pipeline.tokens import TokenReader

Send = Callable[[str, int], object]  # queue a task for (job id, chunk index); returns ignored


@dataclass(frozen=True)
class Submitted:
    """A job whose every chunk is queued or already answered."""

    job_id: str
    input: Path
    total: int
    chunks: int
    queued: int  # chunks queued by this run (0 when a previous run did everything)
    keep_going: bool = False


class Source(Protocol):
    """An input's bytes when they are not simply a file's: its SHA-256 as announced, and a
    binary stream of them (`open("rb")`). A source whose stream ends only once its bytes
    matched that digest (an upload the server checks as it spools it) says so with an
    attribute `verified` (True): the producer then does not hash them again."""

    digest: str

    def open(self, mode: str, /) -> BinaryIO: ...


SETTLED_SECONDS = 2.0  # a file unchanged this long before it is hashed: a write shows in stat


def checksum(path: Path) -> str:
    """SHA-256 of the file's bytes."""
    return hash_file(path)[0]


def hash_file(path: Path) -> tuple[str, Identity | None]:
    """SHA-256 of the file's bytes, and what its stat said while it was hashed when the file
    had settled: then any later write, even one that restores the size and mtime, changes
    that identity (a write sets ctime, which no program can set back), and reading the file
    again need not hash it again."""
    try:
        with path.open("rb") as stream:
            before = os.fstat(stream.fileno())
            digest = hashlib.file_digest(stream, "sha256").hexdigest()
            after = os.fstat(stream.fileno())
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    settled = (
        stat.S_ISREG(before.st_mode)
        and file_identity(before) == file_identity(after)
        and time.time() - max(before.st_mtime, before.st_ctime) > SETTLED_SECONDS
    )
    return digest, file_identity(after) if settled else None


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
    store: Store,
    send: Send,
    settings: Settings,
    *,
    window: int = 0,
    lane: str = "bulk",
    keep_going: bool = False,
    on_cases: Callable[[int], None] = lambda n: None,
    on_progress: Callable[[JobCounters], None] = lambda p: None,
    source: Source | None = None,
    name: str | None = None,
    spooled: bool = False,
) -> Submitted:
    """Validate and queue every chunk without answers; reuse a finished earlier run.

    With `window` > 0, waits while that many chunks of this run are unanswered, so that
    Redis holds a bounded part of a large input. On bad input the job is deleted and the
    InputError propagates, unless `keep_going`: then invalid cases are recorded and answered
    with a marker. A `source` gives the digest and the bytes of an input that is not (yet)
    a whole file: an upload still arriving. Error messages call the file `name` (default:
    its path). A `spooled` input is a file that is only ever appended to (an upload in the
    server's spool): with `file_payloads` its chunks name their place in it even while it
    grows, checked by a CRC-32.
    """
    digest, settled = (source.digest, None) if source is not None else hash_file(path)
    job_id = job_id_for(problem, digest) + ("-keep-going" if keep_going else "")
    manifest = store.open_job(job_id, _manifest(problem, path, settings, lane))
    progress = store.progress(job_id)
    if progress and progress.chunks is not None and progress.done_chunks == progress.chunks:
        on_cases(progress.total or 0)
        return Submitted(job_id, path, progress.total or 0, progress.chunks, 0, keep_going)
    run = _Production(problem, store, send, job_id, keep_going=keep_going, on_cases=on_cases)
    if window:
        run.window = Window(store, job_id, settings, on_progress, chunks=window)
    try:
        opener = source.open if source is not None else lambda _: path.open("rb")
        run.read(path, digest, settings, int(manifest["target_work"]), int(manifest["max_cases"]),
                 opener=opener, name=name or str(path), settled=settled,
                 spooled=spooled, verified=bool(getattr(source, "verified", False)))  # fmt: skip
    except (UsageError, InputError):
        store.delete(job_id)  # nothing of a bad or changing file is kept or written
        raise
    except OSError as exc:
        store.delete(job_id)
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    _finish_production(store, job_id, run)
    return Submitted(job_id, path, run.total, run.chunks, run.queued, keep_going)


def _finish_production(store: Store, job_id: str, run: _Production) -> None:
    """Record the chunk plan of a job whose every chunk is queued."""
    finished = store.finish_production(job_id, run.chunks, run.total)
    if finished is None:  # Redis lost its data
        raise JobLost(f"Redis lost job {job_id} while it was produced")
    if finished == JobState.CANCELLED:
        raise JobFailed(f"job {job_id} was cancelled")


LOST_JOB_RETRIES = 3  # readings of an input whose job Redis keeps losing


def retry_when_lost(
    submit: Callable[[], Submitted], path: Path, report: Callable[[str], None]
) -> Submitted:
    """Run `submit` again when Redis loses the job while it is produced (a flushed or
    restarted-empty Redis), saying so each time."""
    for attempt in range(1, LOST_JOB_RETRIES + 1):
        try:
            return submit()
        except JobLost as exc:
            if attempt == LOST_JOB_RETRIES:
                raise
            report(f"note: {exc}; reading {path} again")
    raise AssertionError("unreachable")


def _manifest(problem: Problem, path: Path, settings: Settings, lane: str) -> dict[str, str | int]:
    return {
        "problem": problem.name,
        "input": path.name,
        "target_work": settings.chunk.target_work,
        "max_cases": settings.chunk.max_cases,
        "lane": lane,
        "producer": this_process(),
    }


class _Production:
    """One run of the producer over an input: chunks queued, and the invalid cases."""

    def __init__(
        self, problem: Problem, store: Store, send: Send, job_id: str, *, keep_going: bool,
        on_cases: Callable[[int], None],
    ) -> None:  # fmt: skip
        self.problem, self.store, self.send, self.job_id = problem, store, send, job_id
        self.keep_going, self.on_cases = keep_going, on_cases
        self.window: Window | None = None
        self.file: tuple[str, Identity, bool] | None = None  # chunks as places in this file
        # (the last: whether it may grow, so that its chunks carry a CRC-32 of their bytes)
        self.skip = store.answered(job_id)  # answered by an earlier run: not queued again
        self.counted = 0  # chunks whose cases were reported already (by the C path)
        self.invalid: list[str] = []
        self.queued = self.total = self.chunks = 0
        store.reset_invalid(job_id)

    def read(
        self, path: Path, digest: str, settings: Settings, target_work: int, max_cases: int,
        *, opener: Callable[[str], BinaryIO], name: str, settled: Identity | None = None,
        spooled: bool = False, verified: bool = False,
    ) -> None:  # fmt: skip
        """Read, validate, chunk and queue the whole input; check it is what was hashed (by
        hashing it again, or by its stat when it had `settled`). The game's C scanner reads
        it when it has one; what it defers to is read again by the Python reader, which
        queues only the chunks after those the scanner queued (both cut the same chunks)."""
        limits = settings.limits
        if settings.file_payloads and settled is not None:  # workers read it themselves
            self.file = (str(path.resolve()), settled, False)
        elif settings.file_payloads and spooled:
            self.file = (str(path.resolve()), file_identity(os.stat(path)), True)
        scan: Scanner | None = getattr(self.problem, "scan_chunk", None)
        if scan is not None and not self.keep_going:
            cut = Limits(target_work, max_cases, limits.max_token_bytes, limits.max_file_bytes)
            try:
                with opener("rb") as raw:
                    stream = _checked(raw, settled, verified)
                    for piece in slice_chunks(scan, stream, cut):
                        self._queue_slice(piece)
                    _check_digest(stream, digest, name)
                return
            except Deferred:  # the chunks it queued are cut alike: not queued again
                self.skip |= set(range(self.chunks))
                self.counted, self.total, self.chunks = self.chunks, 0, 0
        with opener("rb") as raw:
            stream = _checked(raw, settled, verified)
            tokens = TokenReader(stream, name, max_token=limits.max_token_bytes,
                                 max_bytes=limits.max_file_bytes)  # fmt: skip
            on_invalid = (lambda e: self.invalid.append(str(e))) if self.keep_going else None
            batches = read_batches(self.problem, tokens, on_invalid=on_invalid)
            for chunk in chunk_cases(batches, self.problem.work, target_work, max_cases):
                self._queue(chunk)
            _check_digest(stream, digest, name)
        self.store.add_invalid(self.job_id, self.invalid)  # an error after the last case

    def _queue(self, chunk: Chunk) -> None:
        payload = lambda: ChunkPayload(self.problem.name, chunk.first, chunk.cases).encode()  # noqa: E731
        self._put(chunk.index, len(chunk.cases), payload)
        self.store.add_invalid(self.job_id, self.invalid)
        self.invalid.clear()

    def _queue_slice(self, piece: SliceChunk) -> None:
        payload: SlicePayload | FilePayload
        if self.file is None:
            payload = SlicePayload(self.problem.name, piece.first, piece.count, piece.data)
        else:
            path, identity, growing = self.file
            crc = zlib.crc32(piece.data) if growing else None
            payload = FilePayload(self.problem.name, piece.first, piece.count, path,
                                  piece.offset, len(piece.data), identity, crc)  # fmt: skip
        self._put(piece.index, piece.count, payload.encode)

    def _put(self, index: int, cases: int, payload: Callable[[], bytes]) -> None:
        """Queue chunk `index` (its payload made only when it has no answers yet)."""
        self.chunks, self.total = index + 1, self.total + cases
        if index not in self.skip:
            data = payload()
            self.store.put_chunk(self.job_id, index, data)
            self.send(self.job_id, index)
            self.queued += 1
            if self.window is not None:
                self.window.add(index, len(data))
        if index >= self.counted:
            self.on_cases(cases)


Checked = Union["_HashingReader", "_StatReader", "_VerifiedReader"]


def _check_digest(stream: Checked, digest: str, name: str) -> None:
    """Refuse answers of other bytes than the job's name says."""
    if not stream.same_as(digest):
        raise UsageError(f"cannot read {name}: the file changed while it was read")


def _checked(raw: BinaryIO, settled: Identity | None, verified: bool = False) -> Checked:
    """A reader that can tell whether what it read is what was hashed."""
    if verified:
        return _VerifiedReader(raw)
    return _HashingReader(raw) if settled is None else _StatReader(raw, settled)


class _VerifiedReader:
    """A binary stream whose writer checks its bytes against the digest: it ends only once
    they matched (a mismatch is a read error), so reaching its end is the check."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream

    def read(self, size: int = -1, /) -> bytes:
        """Read."""
        return self._stream.read(size)

    def same_as(self, digest: str) -> bool:
        """Read to the end (past what the reader left)."""
        while self._stream.read(1 << 20):
            pass
        return True


class _StatReader:
    """A binary stream of a file that had settled when it was hashed: what is read is what
    was hashed if the file's identity is the same while it is read and after."""

    def __init__(self, stream: BinaryIO, settled: Identity) -> None:
        self._stream, self._settled = stream, settled
        self._opened = file_identity(os.fstat(stream.fileno()))  # a file put in its place differs

    def read(self, size: int = -1, /) -> bytes:
        """Read."""
        return self._stream.read(size)

    def same_as(self, digest: str) -> bool:
        """Whether the file is still the one that was hashed."""
        now = file_identity(os.fstat(self._stream.fileno()))
        return self._opened == self._settled == now


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

    def same_as(self, digest: str) -> bool:
        """Whether every byte of the stream hashes to `digest`."""
        return self.rest_digest() == digest


class Window:
    """Chunks this run queued that have no answers yet, bounded in number and in bytes."""

    def __init__(
        self,
        store: Store,
        job_id: str,
        settings: Settings,
        on_progress: Callable[[JobCounters], None],
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
            if progress is None:
                raise JobLost(f"Redis lost job {self.job_id} while it was produced")
            if progress.state == JobState.CANCELLED:
                raise JobFailed(f"job {self.job_id} was cancelled")
            if progress.failures:
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
