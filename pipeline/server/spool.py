"""The server's spool folder: upload bodies streamed to disk and hashed as they arrive, and
the result files of finished jobs."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import tempfile
import time
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, cast

from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.datastructures import Headers
from starlette.responses import (
    FileResponse,
    JSONResponse,
    MalformedRangeHeader,
    RangeNotSatisfiable,
)
from starlette.types import Receive, Scope, Send

from pipeline.errors import UsageError

_GATHER_BYTES = 8 << 20  # bytes gathered while the writer thread is busy, at most
_MAX_FIELD_BYTES = 4096  # a form field besides the file (problem, lane, ...)


class TooLarge(Exception):
    """The body passed `limits.max_upload_bytes`."""


class BadUpload(Exception):
    """A body that is not what the route takes (the message says why)."""


class BodyStalled(Exception):
    """A request body that sent nothing for `server.body_timeout` seconds (answered 408)."""


@dataclass(frozen=True)
class Received:
    """An upload on disk: its temporary path, SHA-256, size, file name and form fields."""

    path: Path
    sha256: str
    size: int
    filename: str | None
    fields: dict[str, str]


class Spool:
    """uploads/ (bodies while they arrive), inputs/ (kept until the job ends), results/."""

    def __init__(self, root: Path, body_timeout: float | None = None) -> None:
        self.root = root
        self.body_timeout = body_timeout  # seconds a body may send nothing; None: no limit
        for name in ("uploads", "inputs", "results"):
            (root / name).mkdir(parents=True, exist_ok=True, mode=0o700)

    def input(self, job_id: str) -> Path:
        """Where a job's uploaded input waits for its runner."""
        return self.root / "inputs" / f"{job_id}.in"

    def result(self, job_id: str) -> Path:
        """A job's result file (it exists only when complete)."""
        return self.root / "results" / f"{job_id}.out"

    def errors(self, job_id: str) -> Path:
        """A keep-going job's list of invalid cases."""
        return self.root / "results" / f"{job_id}.out.errors"

    def keep(self, received: Received, job_id: str) -> None:
        """Move a received body to the job's input (replacing a stale copy)."""
        os.replace(received.path, self.input(job_id))

    def discard(self, path: Path) -> None:
        """Remove a spool file that is no longer needed."""
        with contextlib.suppress(FileNotFoundError):
            path.unlink()

    def sweep_uploads(self) -> None:
        """Remove bodies left by a server that stopped while they arrived."""
        for stale in (self.root / "uploads").iterdir():
            self.discard(stale)

    def arrived(self, job_id: str) -> Path:
        """Marks an input written in place (`receive(into=...)`) as whole and checked."""
        return self.root / "inputs" / f"{job_id}.in.arrived"

    def broken(self, job_id: str) -> Path:
        """Marks an input written in place as never to be whole (the upload failed)."""
        return self.root / "inputs" / f"{job_id}.in.broken"

    def mark(self, marker: Path) -> None:
        """Create a marker file."""
        marker.touch()

    def discard_input(self, job_id: str) -> None:
        """Remove a job's input and its markers."""
        for path in (self.input(job_id), self.arrived(job_id), self.broken(job_id)):
            self.discard(path)

    def arriving(self, job_id: str, digest: str) -> Arriving:
        """A job's input while its upload is still written in place."""
        return Arriving(self.input(job_id), digest, self.arrived(job_id), self.broken(job_id))

    async def receive(
        self, chunks: AsyncIterator[bytes], limit: int, *, into: Path | None = None
    ) -> Received:
        """A raw body, streamed to a temporary file (or `into`, where a runner may already be
        reading it); nothing is left if it fails."""
        sink = await (_Sink.at(into, limit) if into else _Sink.open(self.root / "uploads", limit))
        try:
            async for chunk in self._paced(chunks):
                sink.feed(chunk)
                await sink.flush()
            return await sink.close(None, {})
        except BaseException:
            await sink.abort()
            raise

    async def receive_form(
        self, chunks: AsyncIterator[bytes], content_type: str, limit: int
    ) -> Received:
        """A multipart/form-data body: its `file` part streamed to disk (never buffered
        whole), small text fields kept."""
        _, options = parse_options_header(content_type)
        boundary = options.get(b"boundary")
        if not boundary:
            raise BadUpload("multipart body without a boundary")
        sink = await _Sink.open(self.root / "uploads", limit)
        form = _Form(sink)
        try:
            parser = MultipartParser(boundary, form.callbacks())  # type: ignore[arg-type]
            async for chunk in self._paced(chunks):
                parser.write(chunk)
                form.check()
                await sink.flush()
            parser.finalize()
            if form.filename is None:
                raise BadUpload("multipart body without a 'file' part")
            return await sink.close(form.filename, form.fields)
        except MultipartParseError as exc:
            await sink.abort()
            raise BadUpload(f"malformed multipart body: {exc}") from None
        except BaseException:
            await sink.abort()
            raise

    async def read_small(self, chunks: AsyncIterator[bytes], limit: int) -> bytes:
        """A small body, held in memory (TooLarge past `limit` bytes)."""
        body = bytearray()
        async for chunk in self._paced(chunks):
            body += chunk
            if len(body) > limit:
                raise TooLarge(f"the body is larger than {limit} bytes")
        return bytes(body)

    async def _paced(self, chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        """The body's blocks; BodyStalled when none arrives for `body_timeout` seconds."""
        blocks = aiter(chunks)
        while True:
            try:
                block = await asyncio.wait_for(anext(blocks), self.body_timeout)
            except StopAsyncIteration:
                return
            except TimeoutError:
                raise BodyStalled(
                    f"the request body sent nothing for {self.body_timeout:g} s"
                    " (server.body_timeout)"
                ) from None
            yield block


class SpoolFile(FileResponse):
    """A spool file with Range, whose bad ranges get JSON errors (416, or 400)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Headers(scope=scope)
        wanted, if_range = request.get("range"), request.get("if-range")
        if wanted is not None and (if_range is None or if_range == self.headers.get("etag")):
            if self.stat_result is None:
                self.stat_result = await asyncio.to_thread(os.stat, self.path)
                self.set_stat_headers(self.stat_result)
            size = self.stat_result.st_size
            try:
                self._parse_range_header(wanted, size)
            except RangeNotSatisfiable:
                message = f"the range {wanted[:80]!r} is not within the {size} bytes of the file"
                headers = {"Content-Range": f"bytes */{size}"}
                await JSONResponse({"error": message}, 416, headers)(scope, receive, send)
                return
            except MalformedRangeHeader as exc:
                error = {"error": f"malformed Range header: {exc.content}"}
                await JSONResponse(error, 400)(scope, receive, send)
                return
        await super().__call__(scope, receive, send)


class _Sink:
    """A temporary file that hashes and counts what is written, within a limit. Hashing and
    writing run in a thread of their own (hashlib lets go of the GIL), one block at a time,
    while the event loop receives the next block."""

    def __init__(self, path: Path, fd: int, limit: int) -> None:
        self.path, self.fd, self.limit = path, fd, limit
        self.digest = hashlib.sha256()
        self.size = 0
        self.blocks: list[bytes] = []
        self.gathered = 0
        self.writer = ThreadPoolExecutor(1, thread_name_prefix="gamebatch-upload")
        self.writing: asyncio.Future[None] | None = None

    @classmethod
    async def open(cls, folder: Path, limit: int) -> _Sink:
        fd, name = tempfile.mkstemp(dir=folder, suffix=".part")
        return cls(Path(name), fd, limit)

    @classmethod
    async def at(cls, path: Path, limit: int) -> _Sink:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        return cls(path, fd, limit)

    def feed(self, data: bytes) -> None:
        self.size += len(data)
        if self.size > self.limit:
            raise TooLarge(f"the upload is larger than limits.max_upload_bytes ({self.limit})")
        self.blocks.append(bytes(data))
        self.gathered += len(data)

    async def flush(self) -> None:
        """Hand what arrived to the writer thread when it is free (so that a reader of the
        file sees it at once); while it is busy, gather up to _GATHER_BYTES."""
        if not self.blocks:
            return
        if self.writing is not None and not self.writing.done() and self.gathered < _GATHER_BYTES:
            return
        if self.writing is not None:
            await self.writing
        data = b"".join(self.blocks)
        self.blocks, self.gathered = [], 0
        self.writing = asyncio.get_running_loop().run_in_executor(self.writer, self._store, data)

    def _store(self, data: bytes) -> None:
        self.digest.update(data)
        _write_all(self.fd, data)

    async def close(self, filename: str | None, fields: dict[str, str]) -> Received:
        if self.writing is not None:
            await self.writing
        await self.flush()
        if self.writing is not None:
            await self.writing
        self.writer.shutdown()
        os.close(self.fd)
        return Received(self.path, self.digest.hexdigest(), self.size, filename, fields)

    async def abort(self) -> None:
        if self.writing is not None:
            with contextlib.suppress(OSError):
                await self.writing
        self.writer.shutdown()
        with contextlib.suppress(OSError):
            os.close(self.fd)
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class _Form:
    """The multipart parser's callbacks: the `file` part goes to the sink, text fields to a
    small dictionary."""

    def __init__(self, sink: _Sink) -> None:
        self.sink = sink
        self.fields: dict[str, str] = {}
        self.filename: str | None = None
        self._header = b""
        self._value = b""
        self._disposition = b""
        self._name: str | None = None
        self._text = bytearray()
        self._in_file = False
        self._error: BadUpload | None = None

    def callbacks(self) -> dict[str, object]:
        return {
            "on_part_begin": self._part_begin,
            "on_header_field": self._header_field,
            "on_header_value": self._header_value,
            "on_header_end": self._header_end,
            "on_headers_finished": self._headers_finished,
            "on_part_data": self._data,
            "on_part_end": self._part_end,
        }

    def check(self) -> None:
        if self._error is not None:
            raise self._error

    def _part_begin(self) -> None:
        self._disposition, self._name, self._in_file = b"", None, False
        self._text = bytearray()

    def _header_field(self, data: bytes, start: int, end: int) -> None:
        self._header += data[start:end]

    def _header_value(self, data: bytes, start: int, end: int) -> None:
        self._value += data[start:end]

    def _header_end(self) -> None:
        if self._header.lower() == b"content-disposition":
            self._disposition = self._value
        self._header = self._value = b""

    def _headers_finished(self) -> None:
        _, options = parse_options_header(self._disposition)
        self._name = options.get(b"name", b"").decode("utf-8", "replace")
        if self._name == "file":
            if self.filename is not None:
                self._error = BadUpload("more than one 'file' part")
            self._in_file = True
            self.filename = options.get(b"filename", b"upload").decode("utf-8", "replace")

    def _data(self, data: bytes, start: int, end: int) -> None:
        if self._in_file:
            if self._error is None:
                self.sink.feed(data[start:end])
            return
        self._text += data[start:end]
        if len(self._text) > _MAX_FIELD_BYTES:
            self._error = BadUpload(f"form field {self._name!r} is too long")

    def _part_end(self) -> None:
        if not self._in_file and self._name:
            self.fields[self._name] = self._text.decode("utf-8", "replace")


STALL_SECONDS = 600.0  # an upload that does not grow for this long is given up


class Arriving:
    """An input being uploaded into `path`, for a producer that reads while it arrives: its
    digest as the client announced it (the producer checks it against what it read)."""

    verified = True  # its stream ends only once the server found the announced digest

    def __init__(self, path: Path, digest: str, arrived: Path, broken: Path) -> None:
        self.path, self.digest = path, digest
        self.arrived, self.broken = arrived, broken

    def open(self, mode: str = "rb", /) -> BinaryIO:
        return cast(BinaryIO, _Following(self))  # read() is all the producer uses


class _Following:
    """A binary stream over a growing file: at its end it waits for more bytes, until the
    upload is marked whole (then the end is the end) or broken (an error)."""

    def __init__(self, source: Arriving) -> None:
        self.source = source
        self.file = source.path.open("rb")

    def read(self, size: int = -1, /) -> bytes:
        pause, waited = 0.001, 0.0
        while True:
            data = self.file.read(size)
            if data:
                return data
            if self.source.arrived.exists():
                return self.file.read(size)  # what was written before the mark
            if self.source.broken.exists():
                raise UsageError("the upload did not arrive whole")
            if waited > STALL_SECONDS:
                raise UsageError(f"the upload stalled for {STALL_SECONDS:.0f} s")
            time.sleep(pause)
            waited += pause
            pause = min(pause * 2, 0.05)

    def __enter__(self) -> _Following:
        return self

    def __exit__(self, *exc: object) -> None:
        self.file.close()
