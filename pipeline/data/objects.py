"""Inputs and results named by URL (`s3://`, `gs://`, `http(s)://`, ...), through fsspec: an
object's identity, streamed and ranged reads pinned to that identity, and writes that appear
whole or not at all. Credentials and endpoints come from where each filesystem reads them
(AWS_ENDPOINT_URL, AWS_* keys, profiles); they are never printed."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, cast
from urllib.parse import unquote, urlsplit

from pipeline.data.files import OutputError
from pipeline.errors import GamebatchError, UsageError
from pipeline.urls import REMOTE, scheme

_EXTRAS = {"s3": "s3", "s3a": "s3", "gs": "gcs", "gcs": "gcs", "http": "http", "https": "http"}
READ_BLOCK = 8 << 20  # a streamed read's range requests (s3fs reads ahead 50 MiB by default)


class ObjectUrl(str):
    """An object's URL where a file's path may stand: its `name` is its last part, and
    `url / name` names an object under it."""

    @property
    def name(self) -> str:
        """The last part of its path."""
        return self.rstrip("/").rsplit("/", 1)[-1]

    def __truediv__(self, name: str) -> ObjectUrl:
        return ObjectUrl(f"{self.rstrip('/')}/{name}")


Place = Path | ObjectUrl  # where an input is read or a result is written


def place(text: str) -> Place:
    """An input or output as given on the command line: a path (a `file://` URL is one), or
    an object store's URL."""
    kind = scheme(text)
    if kind is None:
        return Path(text)
    if kind == "file":
        return Path(unquote(urlsplit(text).path))
    if kind not in REMOTE:
        known = ", ".join(f"{k}://" for k in sorted(REMOTE))
        raise UsageError(f"{shown(text)}: unknown URL scheme {kind}:// (one of {known}, file://)")
    return ObjectUrl(text)


def shown(url: str) -> str:
    """A URL as messages show it: without a user or password."""
    return re.sub(r"^([a-z][a-z0-9+.-]*://)[^/@]*@", r"\1", url, flags=re.IGNORECASE)


@dataclass(frozen=True)
class Stat:
    """An object as it is now: its size and version (VersionId, else ETag; '' if neither)."""

    size: int
    version: str


def stat(url: str) -> Stat:
    """The object's size and version; UsageError when it cannot be read."""
    fs, path = _fs(url)
    with _errors(url):
        info = fs.info(path)
    if info.get("type") == "directory":
        raise UsageError(f"cannot read {shown(url)}: it is a folder")
    version = info.get("VersionId") or info.get("ETag") or info.get("etag") or ""
    return Stat(int(info.get("size") or 0), str(version).strip('"'))


@contextmanager
def open_read(url: str) -> Iterator[BinaryIO]:
    """A binary stream of the object, read in READ_BLOCK ranges (s3fs checks every range
    against the ETag it saw at open: a changed object is an error, not mixed bytes)."""
    fs, path = _fs(url)
    with _errors(url):
        stream = fs.open(path, "rb", block_size=READ_BLOCK, cache_type="readahead")
    try:
        yield cast(BinaryIO, _Reading(stream, url))  # what readers call: read()
    finally:
        stream.close()


def read_range(url: str, offset: int, length: int) -> bytes:
    """`length` bytes at `offset` of the object, in one ranged read (the caller checks them
    against their digest)."""
    fs, path = _fs(url)
    with _errors(url):
        data: bytes = fs.cat_file(path, start=offset, end=offset + length)
    return data


@contextmanager
def write_whole(url: str) -> Iterator[BinaryIO]:
    """A binary stream that becomes the object only when the block ends without an error
    (a multipart upload completed then, or aborted): never a partial object. A failed
    write is an OutputError naming the URL."""
    fs, path = _fs(url)
    with _errors(url, OutputError):
        stream = fs.open(path, "wb", autocommit=False)
    try:
        yield cast(BinaryIO, _Writing(stream, url))  # what writers call: write()
    except BaseException:
        with contextlib.suppress(Exception):
            stream.discard()
        raise
    with _errors(url, OutputError):
        stream.close()
        stream.commit()


def upload(path: Path, url: str) -> None:
    """Copy a file to the object `url` (whole or not at all)."""
    try:
        with path.open("rb") as source, write_whole(url) as target:
            while block := source.read(READ_BLOCK):
                target.write(block)
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None


def put(url: str, data: bytes) -> None:
    """Write `data` as the object `url` (whole or not at all)."""
    with write_whole(url) as target:
        target.write(data)


def listing(prefix: str) -> list[tuple[ObjectUrl, float]]:
    """The objects under a URL prefix, each with when it was written (seconds since the
    epoch); an object whose store names no time is left out."""
    fs, path = _fs(prefix)
    found: dict[str, Any] = {}
    with _errors(prefix), contextlib.suppress(FileNotFoundError):
        found = fs.find(path, detail=True)
    kind = scheme(prefix)
    listed = []
    for name, info in found.items():
        when = info.get("LastModified") or info.get("updated") or info.get("mtime")
        if hasattr(when, "timestamp"):
            when = when.timestamp()
        if isinstance(when, int | float):
            listed.append((ObjectUrl(f"{kind}://{name}"), float(when)))
    return listed


def remove(url: str) -> None:
    """Delete the object (one that is gone already is no error)."""
    fs, path = _fs(url)
    with _errors(url), contextlib.suppress(FileNotFoundError):
        fs.rm_file(path)


def remove_all(url: str) -> None:
    """Delete the object, or every object under a folder's URL (one that ends with /)."""
    for found in [name for name, _ in listing(url)] if url.endswith("/") else [url]:
        remove(found)


class _Writing:
    """A stream whose write errors are one-line OutputErrors naming the URL."""

    def __init__(self, stream: Any, url: str) -> None:
        self._stream, self._url = stream, url

    def write(self, data: bytes, /) -> int:
        with _errors(self._url, OutputError):
            written: int = self._stream.write(data)
        return written


class _Reading:
    """A stream whose read errors are one-line UsageErrors naming the URL."""

    def __init__(self, stream: Any, url: str) -> None:
        self._stream, self._url = stream, url

    def read(self, size: int = -1, /) -> bytes:
        with _errors(self._url):
            data: bytes = self._stream.read(size)
        return data


_FILESYSTEMS: dict[tuple[int, str], Any] = {}


def _fs(url: str) -> tuple[Any, str]:
    """The filesystem of a URL (one per scheme and process: a forked worker builds its own)
    and the object's path on it."""
    kind = scheme(url)
    if kind is None:
        raise UsageError(f"{url} is not a URL")
    try:
        import fsspec
    except ImportError:
        raise UsageError(f"reading {kind}:// needs fsspec: pip install 'gamebatch[s3]'") from None
    key = (os.getpid(), kind)
    if key not in _FILESYSTEMS:
        options = {"default_cache_type": "none"} if kind in ("s3", "s3a") else {}
        try:
            _FILESYSTEMS[key] = fsspec.filesystem(kind, skip_instance_cache=True, **options)
        except (ImportError, ValueError) as exc:
            extra = _EXTRAS.get(kind, kind)
            raise UsageError(
                f"cannot use {kind}:// URLs here ({exc}): pip install 'gamebatch[{extra}]'"
            ) from None
    fs = _FILESYSTEMS[key]
    return fs, fs._strip_protocol(url)


@contextmanager
def _errors(url: str, kind: type[GamebatchError] = UsageError) -> Iterator[None]:
    """An object store's error as one line naming the URL (never its credentials)."""
    try:
        yield
    except GamebatchError:
        raise
    except FileNotFoundError:
        raise kind(f"cannot read {shown(url)}: no such object") from None
    except PermissionError:
        raise kind(f"cannot use {shown(url)}: permission denied") from None
    except Exception as exc:  # botocore, aiohttp: errors of their own, with no common base
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise kind(f"cannot use {shown(url)}: {why[:300]}") from None
