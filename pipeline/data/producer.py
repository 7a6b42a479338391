"""The producer: reads an input (a file, or an object store's object) as a stream, validates
it, and queues its chunks."""

from __future__ import annotations

import hashlib
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager
from pathlib import Path
from typing import BinaryIO, Protocol

import msgspec

from pipeline.config import Settings
from pipeline.data import objects
from pipeline.data.chunking import Chunk, chunk_cases, place_cut
from pipeline.data.files import is_regular
from pipeline.data.messages import (
    ChunkPayload,
    FilePayload,
    SlicePayload,
    StoredPayload,
    digest_of,
    packed,
)
from pipeline.data.objects import ObjectUrl, open_read
from pipeline.data.objects import stat as object_stat
from pipeline.data.payload_store import PayloadFolder
from pipeline.data.slices import Deferred, Limits, SliceChunk, slice_chunks
from pipeline.errors import InputError, JobCancelled, JobLost, UsageError
from pipeline.games.problem import Problem, scanner
from pipeline.games.reader import read_batches
from pipeline.games.tokens import TokenReader
from pipeline.store.connections import this_process
from pipeline.store.jobstate import KEEP_GOING_SUFFIX, PAYLOAD_OBJECT, JobCounters, JobState, Put
from pipeline.store.protocol import Store

Send = Callable[[str, int], object]  # queue a task for (job id, chunk index); returns ignored
Opener = Callable[[], AbstractContextManager[BinaryIO]]  # a new binary stream of an input


class Submitted(msgspec.Struct, frozen=True):
    """A job whose every chunk is queued or already answered."""

    job_id: str
    input: Path | ObjectUrl
    total: int
    chunks: int
    queued: int  # chunks queued by this run (0 when a previous run did everything)
    keep_going: bool = False


class Source(Protocol):
    """An input's bytes when they are not simply a file's: its SHA-256 as announced, and a
    binary stream of them (`open("rb")`). A source whose stream ends only once its bytes
    matched that digest (an upload the server checks as it spools it, into a file no one
    else writes) says so with an attribute `verified` (True): the producer then does not hash
    them again."""

    digest: str

    def open(self, mode: str, /) -> BinaryIO: ...


def checksum(path: Path) -> str:
    """SHA-256 of the file's bytes."""
    try:
        with path.open("rb") as stream:
            return hashlib.file_digest(stream, "sha256").hexdigest()
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None


def choose_lane(path: Path | ObjectUrl, settings: Settings, wanted: str = "auto") -> str:
    """`interactive` for small inputs (or when asked), else `bulk`."""
    if wanted != "auto":
        return wanted
    size = object_stat(path).size if isinstance(path, ObjectUrl) else path.stat().st_size
    small = size <= settings.interactive_max_bytes
    return "interactive" if small else "bulk"


# A producer's claim on its job lasts this long past its last renewal (renewed every third of
# it): a producer that died is taken over after at most this, and a Redis that restarts within
# it finds the claim still held by a producer that goes on.
CLAIM_SECONDS = 30.0


def job_id_for(problem: Problem, digest: str, keep_going: bool = False) -> str:
    """Jobs are named by what they compute (the game, the input's SHA-256, whether invalid
    cases are let through), so a re-run finds its earlier job."""
    return f"{problem.name}-{digest[:24]}" + (KEEP_GOING_SUFFIX if keep_going else "")


def _ignore(value: object) -> None:
    del value


class Production(msgspec.Struct, frozen=True):
    """How `submit` reads an input and queues its chunks. `window` > 0 bounds the chunks of
    this run in flight; with `keep_going`, invalid cases are recorded instead of refusing
    the input; a `source` is an input not yet whole (an upload), `name` what messages call
    it; chunks name their place in a file's copy in the payload store (`stored`), or in a
    regular or `spooled` file (`file_payloads`), else they carry its bytes (kept in
    `stored`'s folder). `on_cases` hears the cases read, `on_progress` the job's counters."""

    window: int = 0
    lane: str = "bulk"
    keep_going: bool = False
    on_cases: Callable[[int], None] = _ignore
    on_progress: Callable[[JobCounters], None] = _ignore
    source: Source | None = None
    name: str | None = None
    spooled: bool = False
    stored: PayloadFolder | None = None


def submit(
    problem: Problem,
    path: Path | ObjectUrl,
    store: Store,
    send: Send,
    settings: Settings,
    *,
    how: Production = Production(),  # noqa: B008 (frozen: one default serves every call)
) -> Submitted:
    """Validate and queue every chunk without answers (as `how` says); reuse a finished
    earlier run.

    A job is named by the SHA-256 of the very bytes its chunks are cut from: its answers
    are never of other bytes. One producer at a time reads a job's input (another waits,
    or takes over from a dead one); answered chunks are reused only for the same bytes.
    Bad input removes the job and raises InputError, unless `how.keep_going`. Chunks name
    their place in an object, or see Production.
    """
    copy = bool(how.stored and how.stored.copy)  # its chunks are places in the copy
    settings = settings.replaced(file_payloads=True) if copy else settings
    keep_going = how.keep_going
    reading = _first_reading(
        problem, path, settings, how.source, keep_going, store=store, copy=copy
    )
    plan, digest = reading
    job_id = job_id_for(problem, digest, keep_going)
    cut = plan.cut if plan else None
    fields = _manifest(problem, path, settings, how.lane, stored=how.stored, cut=cut)
    token = f"{this_process()}:{secrets.token_hex(8)}"
    claimed = _claim(store, job_id, fields, token, settings, on_progress=how.on_progress)
    if isinstance(claimed, JobCounters):
        how.on_cases(claimed.total or 0)
        return Submitted(job_id, path, claimed.total or 0, claimed.chunks or 0, 0, keep_going)
    window = Window(store, job_id, settings, how.on_progress, chunks=how.window)
    queue = Queuer(store, send, job_id, window if how.window else None, token)
    run = _Production(problem, queue, keep_going=keep_going, on_cases=how.on_cases)
    named = claimed.get(PAYLOAD_OBJECT, "")
    run.carry(how.stored, compress=settings.compress_payloads, named=named)
    with _Renewal(store, job_id, token, CLAIM_SECONDS), _Owned(store, run, path):
        if plan is not None and plan.fits(claimed):
            run.queue_places(path, plan.pieces or [], plan.version)
        else:
            given = _Input(path, how.source, how.name or str(path), how.spooled)
            _read_all(run, given, digest, settings, claimed)
        _finish_production(store, job_id, run)
    return Submitted(job_id, path, run.total, run.chunks, run.queued, keep_going)


class _Piece(msgspec.Struct, frozen=True):
    """A chunk as its place in the input file, and the digest of its bytes there."""

    index: int
    first: int
    count: int
    offset: int
    length: int
    digest: str

    @property
    def name(self) -> str:
        """What the chunk's answers are named by (as _Production._queue_slice names them)."""
        return f"{self.digest}:{self.first}:{self.count}:{self.length}"


class _Plan(msgspec.Struct, frozen=True):
    """A regular file read once, for workers that read it themselves: its SHA-256, and its
    chunks as places in it, as cut with `cut` (None when the C scanner deferred)."""

    digest: str
    cut: tuple[int, int]
    pieces: list[_Piece] | None
    version: str = ""  # an object's, as it was read

    def fits(self, manifest: dict[str, str]) -> bool:
        """Whether the job cuts its chunks as this plan did."""
        wanted = (int(manifest["target_work"]), int(manifest["max_cases"]))
        return self.pieces is not None and wanted == self.cut


def _first_reading(
    problem: Problem,
    path: Path | ObjectUrl,
    settings: Settings,
    source: Source | None,
    keep_going: bool,
    *,
    store: Store,
    copy: bool,
) -> tuple[_Plan | None, str]:
    """The input's SHA-256, and its plan when it is read once only: a regular file whose
    workers read its chunks from it, or an object (they check each chunk's digest), cut by
    the game's C scanner. The bytes the job is named by are then the very bytes its chunks
    were cut from. Chunks that are ranges of an object (the input's, or of the file's
    `copy` in the payload store) grow with the input (see chunking.place_cut); places in a
    file keep the byte chunks' cut."""
    if source is not None:
        return None, source.digest
    plain = not keep_going and scanner(problem) is not None
    if isinstance(path, ObjectUrl):
        if not plain:
            with open_read(path) as stream:
                return None, _HashingReader(stream, path).rest_digest()
        found = object_stat(path)
        spread = _spread(settings, store)
        plan = _plan(problem, path, settings, found.size, found.version, spread=spread)
        return plan, plan.digest
    if not (plain and settings.file_payloads and is_regular(path)):
        return None, checksum(path)
    spread = _spread(settings, store) if copy else 0  # 0: the byte chunks' cut
    plan = _plan(problem, path, settings, path.stat().st_size, spread=spread)
    return plan, plan.digest


MIN_SPREAD = 16  # chunks a reference input makes at least (see _spread)


def _spread(settings: Settings, store: Store) -> int:
    """How many chunks an input cut into references makes at least: `chunk.place_spread`,
    or twice the pool processes of the workers that said they live within a lease (the
    last round of each one's chunks then keeps them all busy), and at least MIN_SPREAD."""
    if settings.chunk.place_spread:
        return settings.chunk.place_spread
    return max(MIN_SPREAD, 2 * store.capacity(settings.lease_seconds))


def _opener(path: Path | ObjectUrl) -> Opener:
    """How to read an input from its start."""
    if isinstance(path, ObjectUrl):
        return lambda: open_read(path)
    return lambda: path.open("rb")


def _plan(
    problem: Problem,
    path: Path | ObjectUrl,
    settings: Settings,
    size: int,
    version: str = "",
    *,
    spread: int,
) -> _Plan:
    """Hash the input, and cut it into chunks on the way (see _first_reading): chunks that
    name their place, cut by its size into `spread` chunks at least (chunking.place_cut;
    `spread` 0: at the byte chunks' cut)."""
    scan, limits, chunk = scanner(problem), settings.limits, settings.chunk
    scale = chunk.place_scale if spread else 1
    cut = place_cut(chunk.target_work, chunk.max_cases, size, scale, max(spread, 1))
    assert scan is not None
    try:
        with _opener(path)() as raw, _HashedAside(raw) as stream:
            try:
                pieces: list[_Piece] | None = [
                    _Piece(p.index, p.first, p.count, p.offset, len(p.data), digest_of(p.data))
                    for p in slice_chunks(
                        scan, stream, Limits(*cut, limits.max_token_bytes, limits.max_file_bytes)
                    )
                ]
            except Deferred:  # the Python reader judges it, in a second reading, and its
                pieces, cut = None, (chunk.target_work, chunk.max_cases)  # chunks carry bytes
            return _Plan(stream.rest_digest(), cut, pieces, version)
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None


class _Input(msgspec.Struct, frozen=True):
    """An input as `submit` was given it."""

    path: Path | ObjectUrl
    source: Source | None
    name: str  # as messages call it
    spooled: bool


class _HashedAside:
    """A binary stream whose SHA-256 is computed by a thread of its own, block after block,
    while the reader scans them (hashlib lets go of the GIL): the plan's one reading costs
    the time of the slower of the two, on a machine whose workers have nothing to do yet."""

    IN_FLIGHT = 4  # blocks read but not hashed yet, at most

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        self._hash = hashlib.sha256()
        self._pending: list[Future[None]] = []
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="gamebatch-hash")

    def read(self, size: int = -1, /) -> bytes:
        """Read; the bytes are hashed aside."""
        data = self._stream.read(size)
        if data:
            self._pending.append(self._thread.submit(self._hash.update, data))
            while len(self._pending) > self.IN_FLIGHT:
                self._pending.pop(0).result()
        return data

    def rest_digest(self) -> str:
        """The SHA-256 of every byte of the stream (reading what the reader left)."""
        while self.read(1 << 20):
            pass
        for done in self._pending:
            done.result()
        self._pending.clear()
        return self._hash.hexdigest()

    def __enter__(self) -> _HashedAside:
        return self

    def __exit__(self, *exc: object) -> None:
        self._thread.shutdown(wait=True, cancel_futures=True)


def _read_all(
    run: _Production, given: _Input, digest: str, settings: Settings, manifest: dict[str, str]
) -> None:
    """The production's whole reading of its input, with the chunk sizes of its manifest."""
    path, source = given.path, given.source
    opener = source.open if source is not None else lambda _: _opener(path)()
    verified = bool(getattr(source, "verified", False))
    cut = (int(manifest["target_work"]), int(manifest["max_cases"]))
    run.read(given, digest, settings, cut, opener=opener, verified=verified)


class _Owned:
    """A production's end: a bad or changing input leaves nothing of its job (unless another
    run made the job's plan final), and the claim is given up either way."""

    def __init__(self, store: Store, run: _Production, path: Path | ObjectUrl) -> None:
        self.store, self.run, self.path = store, run, path

    def __enter__(self) -> _Owned:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> None:
        job_id, token = self.run.job_id, self.run.token
        try:
            if isinstance(exc, (UsageError, InputError, OSError)):
                self.store.abandon_production(job_id, token)
        finally:
            self.store.release_production(job_id, token)
        if isinstance(exc, OSError):
            raise UsageError(f"cannot read {self.path}: {exc.strerror}") from None


def _claim(
    store: Store,
    job_id: str,
    fields: dict[str, str | int],
    token: str,
    settings: Settings,
    *,
    on_progress: Callable[[JobCounters], None],
) -> dict[str, str] | JobCounters:
    """Become the job's producer: its manifest in force. While another process produces it,
    wait (it renews its claim while it lives); a job that has every answer already needs no
    producer (its counters); a cancelled job is started afresh."""
    first = True
    while True:
        manifest = store.open_job(job_id, fields)
        progress = store.progress(job_id)
        if progress is None:
            continue  # removed meanwhile: open it again
        if progress.chunks is not None and progress.done_chunks == progress.chunks:
            return progress
        if progress.state == JobState.CANCELLED:
            if not first:  # cancelled while this command waited for it
                raise JobCancelled(f"job {job_id} was cancelled")
            store.delete(job_id)  # a cancel stops a run, it does not bar the input
            continue
        first = False
        if store.claim_production(job_id, token, CLAIM_SECONDS):
            return manifest
        holder = store.production_holder(job_id)
        if holder is not None and _died_here(holder):  # killed: no need to wait out its claim
            store.release_production(job_id, holder)
            continue
        on_progress(progress)
        time.sleep(settings.poll_interval)


def _died_here(holder: str) -> bool:
    """Whether a producer's token names a process of this host that is gone."""
    host, _, rest = holder.partition(":")
    pid = rest.partition(":")[0]
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False  # alive, another user's
    try:  # a zombie (its parent has not reaped it yet, e.g. a subreaper that never will) is gone
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state == "Z"


class _Renewal:
    """Renews a producer's claim on its job from a thread of its own, while it produces."""

    def __init__(self, store: Store, job_id: str, token: str, seconds: float) -> None:
        self.store, self.job_id, self.token, self.seconds = store, job_id, token, seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gamebatch-producer", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.seconds / 3):
            try:
                if not self.store.renew_production(self.job_id, self.token, self.seconds):
                    return  # taken over: its writes are refused from now on
            except Exception:  # a failover: the next renewal, or the next write, tells
                continue

    def __enter__(self) -> _Renewal:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _finish_production(store: Store, job_id: str, run: _Production) -> None:
    """Record the chunk plan of a job whose every chunk is queued."""
    finished = store.finish_production(job_id, run.chunks, run.total, run.token)
    if finished is None:  # Redis lost its data, or another producer took the job over
        raise JobLost(f"Redis lost job {job_id} while it was produced")
    if finished == JobState.CANCELLED:
        raise JobCancelled(f"job {job_id} was cancelled")


LOST_JOB_RETRIES = 3  # readings of an input whose job Redis keeps losing


def retry_when_lost(
    submit: Callable[[], Submitted], path: Path | ObjectUrl, report: Callable[[str], None]
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


def _manifest(
    problem: Problem,
    path: Path | ObjectUrl,
    settings: Settings,
    lane: str,
    *,
    stored: PayloadFolder | None,
    cut: tuple[int, int] | None,
) -> dict[str, str | int]:
    """A new job's manifest; `cut` is its plan's (else the settings' chunks)."""
    target_work, max_cases = cut or (settings.chunk.target_work, settings.chunk.max_cases)
    size = path.stat().st_size if isinstance(path, Path) and is_regular(path) else None
    return {
        **({PAYLOAD_OBJECT: stored.folder} if stored else {}),
        **({"size": size} if size is not None else {}),
        "problem": problem.name,
        "input": path.name,
        "target_work": target_work,
        "max_cases": max_cases,
        "lane": lane,
        "producer": this_process(),
    }


class _Production:
    """One run of the producer over an input: chunks queued, and the invalid cases."""

    def __init__(
        self, problem: Problem, queue: Queuer, *, keep_going: bool, on_cases: Callable[[int], None]
    ) -> None:
        self.problem, self.queue, self.store, self.job_id = (
            problem,
            queue,
            queue.store,
            queue.job_id,
        )
        self.token, self.keep_going, self.on_cases = queue.token, keep_going, on_cases
        self.file: str | None = None  # chunks as places in this file (its absolute path)
        self.version = ""  # or object (its URL), as of this version
        self.mirror: ObjectUrl | None = None  # an object of the same bytes as the input file
        self.compress = False  # chunks that carry bytes carry them compressed
        self.stash: ObjectUrl | None = None  # and keep them in objects in this folder
        self.reusable = self.store.answered_digests(self.job_id)  # answered before: kept if same
        self.mine: set[int] = set()  # chunks this run queued already (by the C path)
        self.counted = 0  # chunks whose cases were reported already (by the C path)
        self.invalid: list[str] = []
        self.queued = self.total = self.chunks = 0
        self.name = self.job_id  # the input as messages call it (set by read)

    def read(
        self,
        given: _Input,
        digest: str,
        settings: Settings,
        cut: tuple[int, int],
        *,
        opener: Callable[[str], AbstractContextManager[BinaryIO]],
        verified: bool = False,
    ) -> None:
        """Read, validate, chunk and queue the whole input, hashing what is read: it must be
        the bytes the job is named by. The game's C scanner reads it when it has one; what it
        defers to is read again by the Python reader, which queues only the chunks after
        those the scanner queued (both cut the same chunks), once the bytes they were cut
        from are read again alike."""
        path, name, spooled = given.path, given.name, given.spooled
        target_work, max_cases = cut
        limits, self.name = settings.limits, name
        if isinstance(path, ObjectUrl) or self.mirror:  # workers read their ranges of it
            self.file = str(self.mirror or path)
        elif settings.file_payloads and (spooled or is_regular(path)):  # workers read it
            self.file = str(path.resolve())
        scan = scanner(self.problem)
        seen: _HashingReader | None = None
        if scan is not None and not self.keep_going:
            sizes = Limits(target_work, max_cases, limits.max_token_bytes, limits.max_file_bytes)
            try:
                with opener("rb") as raw:
                    stream = _checked(raw, verified, name)
                    for piece in slice_chunks(scan, stream, sizes):
                        self._queue_slice(piece)
                    _check_digest(stream, digest, name)
                return
            except Deferred:  # the chunks it queued are cut alike: not queued again
                self.mine = set(range(self.chunks))
                self.counted, self.total, self.chunks = self.chunks, 0, 0
                seen = stream if isinstance(stream, _HashingReader) else None
        with opener("rb") as raw:
            stream = _checked(raw, verified, name, seen)
            tokens = TokenReader(
                stream, name, max_token=limits.max_token_bytes, max_bytes=limits.max_file_bytes
            )
            on_invalid = (lambda e: self.invalid.append(str(e))) if self.keep_going else None
            batches = read_batches(self.problem, tokens, on_invalid=on_invalid)
            for chunk in chunk_cases(batches, self.problem.work, target_work, max_cases):
                self._queue(chunk)
            _check_digest(stream, digest, name)
        # an error after the last case
        self.store.add_invalid(self.job_id, self.invalid, self.token)

    def queue_places(self, path: Path | ObjectUrl, pieces: list[_Piece], version: str) -> None:
        """Queue the chunks of a plan (see _plan): places in the input, each with its
        digest."""
        if isinstance(path, ObjectUrl) or self.mirror:
            self.file = str(self.mirror or path)
        else:
            self.file = str(path.resolve())
        self.name, self.version = str(path), version
        for piece in pieces:
            place = (self.file, piece.offset, piece.length, piece.digest, version)
            payload = FilePayload(self.problem.name, piece.first, piece.count, *place)
            self._put(piece.index, piece.count, piece.name, payload.encode)

    def _queue(self, chunk: Chunk) -> None:
        payload = ChunkPayload(self.problem.name, chunk.first, chunk.cases).encode()
        sent = self._carried(chunk.index, lambda: payload)
        self._put(chunk.index, len(chunk.cases), digest_of(payload), sent)
        self.store.add_invalid(self.job_id, self.invalid, self.token)
        self.invalid.clear()

    def _queue_slice(self, piece: SliceChunk) -> None:
        """A chunk as the input's bytes, or as their place in the input file; either way
        named by the digest of those bytes and of where its cases are."""
        data = piece.data
        place = f"{piece.first}:{piece.count}:{len(data)}"
        digest = digest_of(data)
        payload: Callable[[], bytes]
        if self.file is None:
            carried = SlicePayload(self.problem.name, piece.first, piece.count, data)
            payload = self._carried(piece.index, carried.encode)
        else:
            payload = FilePayload(
                self.problem.name,
                piece.first,
                piece.count,
                self.file,
                piece.offset,
                len(data),
                digest,
                self.version,
            ).encode
        self._put(piece.index, piece.count, f"{digest}:{place}", payload)

    def carry(self, stored: PayloadFolder | None, *, compress: bool, named: str) -> None:
        """How chunks carry the input: compressed, and in the payload store (`stored`):
        as ranges of its copy of the input file, or as objects of their own. The manifest
        names the run's folder too when it `named` an earlier run's only."""
        self.compress = compress
        if stored is not None:
            self.mirror, self.stash = stored.copy, stored.folder
            if stored.folder not in named.split():
                self.store.add_payload_folder(self.job_id, stored.folder)

    def _carried(self, index: int, encode: Callable[[], bytes]) -> Callable[[], bytes]:
        """A payload that carries the input's bytes: compressed (compress_payloads), and kept
        in an object of the job's folder in the payload store when it has one (its chunk
        then names the object, and Redis carries a few hundred bytes)."""

        def made() -> bytes:
            data = packed(encode()) if self.compress else encode()
            if self.stash is None:
                return data
            url = f"{self.stash}chunk-{index}"
            objects.put(url, data)
            return StoredPayload(url, len(data), digest_of(data)).encode()

        return made

    def _put(self, index: int, cases: int, digest: str, payload: Callable[[], bytes]) -> None:
        """Queue chunk `index` unless this run queued it, or an earlier one answered the same
        bytes (its payload is made only when it is queued)."""
        self.chunks, self.total = index + 1, self.total + cases
        if index not in self.mine and self.reusable.get(index) != digest:
            put = self.queue.put(index, payload(), digest)
            if put != Put.STORED:
                self._refused(put)
            self.queued += 1
        if index >= self.counted:
            self.on_cases(cases)

    def _refused(self, put: Put) -> None:
        if put == Put.PLAN_DIFFERS:  # another run produced the job from other bytes
            raise UsageError(f"cannot read {self.name}: the file changed while it was read")
        progress = self.store.progress(self.job_id)
        if progress is not None and progress.state == JobState.CANCELLED:
            raise JobCancelled(f"job {self.job_id} was cancelled")
        raise JobLost(
            f"Redis lost job {self.job_id} while it was produced (or another producer took it over)"
        )


def _check_digest(stream: _HashingReader | _VerifiedReader, digest: str, name: str) -> None:
    """Refuse answers of other bytes than the job's name says."""
    if not stream.same_as(digest):
        raise UsageError(f"cannot read {name}: the file changed while it was read")


def _checked(
    raw: BinaryIO, verified: bool, name: str, seen: _HashingReader | None = None
) -> _HashingReader | _VerifiedReader:
    """A reader that can tell whether what it read is what was hashed (and, after `seen`
    read a first part of it, whether that part read the same again)."""
    if verified:
        return _VerifiedReader(raw)
    return _HashingReader(raw, name, seen)


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


class _HashingReader:
    """A binary stream that hashes what is read from it, so that a job is named by the
    bytes it was made of even when the file changes after it was first hashed. Given an
    `earlier` reader of the same input that stopped part way, it also checks that the bytes
    that one read are read again alike (the chunks cut from them are kept)."""

    def __init__(self, stream: BinaryIO, name: str, earlier: _HashingReader | None = None) -> None:
        self._stream, self._name = stream, name
        self._hash = hashlib.sha256()
        self.position = 0
        self._earlier = (earlier.position, earlier._hash.digest()) if earlier else None

    def read(self, size: int = -1, /) -> bytes:
        """Read and hash."""
        data = self._stream.read(size)
        if self._earlier is not None and self.position + len(data) >= self._earlier[0]:
            head = self._earlier[0] - self.position
            self._hash.update(memoryview(data)[:head])
            if self._hash.digest() != self._earlier[1]:
                raise UsageError(f"cannot read {self._name}: the file changed while it was read")
            self._earlier = None
            self._hash.update(memoryview(data)[head:])
        else:
            self._hash.update(data)
        self.position += len(data)
        return data

    def rest_digest(self) -> str:
        """The SHA-256 of every byte of the stream (reading what the reader left)."""
        while data := self.read(1 << 20):
            del data
        return self._hash.hexdigest()

    def same_as(self, digest: str) -> bool:
        """Whether every byte of the stream hashes to `digest` (and covered the earlier
        reader's part)."""
        return self.rest_digest() == digest and self._earlier is None


class Queuer:
    """The one loop of every producer (inputs, comparisons, judgings): put a chunk's payload,
    send its task, and keep the window of chunks in flight."""

    def __init__(
        self, store: Store, send: Send, job_id: str, window: Window | None = None, token: str = ""
    ) -> None:
        self.store, self.send, self.job_id = store, send, job_id
        self.window, self.token = window, token

    def put(self, index: int, payload: bytes, digest: str = "") -> Put:
        """Queue chunk `index` with `payload` (blocking while the window is full); what
        became of the payload (only a stored one is sent)."""
        put = self.store.put_chunk(self.job_id, index, payload, digest, self.token)
        if put == Put.STORED:
            self.send(self.job_id, index)
            if self.window is not None:
                self.window.add(index, len(payload))
        return put


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
                raise JobCancelled(f"job {self.job_id} was cancelled")
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
