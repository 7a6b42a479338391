"""The server's spool folder: upload bodies streamed to disk and hashed as they arrive, and
the result files of finished jobs."""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import anyio.to_thread
from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import MultipartParser, parse_options_header

_FLUSH_BYTES = 1 << 20  # bytes gathered before one write to disk (off the event loop)
_MAX_FIELD_BYTES = 4096  # a form field besides the file (problem, lane, ...)


class TooLarge(Exception):
    """The body passed `limits.max_upload_bytes`."""


class BadUpload(Exception):
    """A body that is not what the route takes (the message says why)."""


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

    def __init__(self, root: Path) -> None:
        self.root = root
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

    async def receive(self, chunks: AsyncIterator[bytes], limit: int) -> Received:
        """A raw body, streamed to a temporary file; nothing is left if it fails."""
        sink = await _Sink.open(self.root / "uploads", limit)
        try:
            async for chunk in chunks:
                sink.feed(chunk)
                await sink.flush(_FLUSH_BYTES)
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
            async for chunk in chunks:
                parser.write(chunk)
                form.check()
                await sink.flush(_FLUSH_BYTES)
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


class _Sink:
    """A temporary file that hashes and counts what is written, within a limit."""

    def __init__(self, path: Path, fd: int, limit: int) -> None:
        self.path, self.fd, self.limit = path, fd, limit
        self.digest = hashlib.sha256()
        self.size = 0
        self.buffer = bytearray()

    @classmethod
    async def open(cls, folder: Path, limit: int) -> _Sink:
        fd, name = tempfile.mkstemp(dir=folder, suffix=".part")
        return cls(Path(name), fd, limit)

    def feed(self, data: bytes) -> None:
        self.size += len(data)
        if self.size > self.limit:
            raise TooLarge(f"the upload is larger than limits.max_upload_bytes ({self.limit})")
        self.digest.update(data)
        self.buffer += data

    async def flush(self, at_least: int = 0) -> None:
        if len(self.buffer) > at_least or (not at_least and self.buffer):
            data, self.buffer = bytes(self.buffer), bytearray()
            await anyio.to_thread.run_sync(_write_all, self.fd, data)

    async def close(self, filename: str | None, fields: dict[str, str]) -> Received:
        await self.flush()
        os.close(self.fd)
        return Received(self.path, self.digest.hexdigest(), self.size, filename, fields)

    async def abort(self) -> None:
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
