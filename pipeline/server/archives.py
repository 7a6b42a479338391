"""Grading archives (tar, tar.gz, zip) unpacked as hostile input: every entry is checked before
a byte of it is written, and sizes are counted as they are decompressed."""

from __future__ import annotations

import shutil
import stat
import tarfile
import unicodedata
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

_BLOCK = 1 << 20
_LAYOUT = (
    "tests/NAME.in, tests/NAME.ans, subs/CONTESTANT/NAME.out, progs/CONTESTANT/SOURCE"
    " (and its `language` file) or progs/SOURCE, scoring.yaml; package/ (a problem package)"
)


class ArchiveRefused(Exception):
    """An archive that is not unpacked; `status` is the HTTP status to answer with."""

    def __init__(self, message: str, status: int = 422) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Limits:
    """How much an archive may hold once unpacked."""

    files: int
    bytes: int


@dataclass(frozen=True)
class Unpacked:
    """Where the archive went, and what was left out of it (with the reason)."""

    root: Path
    notes: list[str]


def unpack(archive: Path, target: Path, limits: Limits) -> Unpacked:
    """Unpack `archive` (tar, tar.gz or zip, told by its first bytes) into `target`, a new
    folder; on any refusal nothing is left at `target`."""
    with archive.open("rb") as stream:
        magic = stream.read(4)
    target.mkdir(mode=0o700)
    try:
        writer = _Writer(target, limits)
        if magic.startswith(b"PK\x03\x04") or magic.startswith(b"PK\x05\x06"):
            _unzip(archive, writer)
        else:
            _untar(archive, writer)
        if not writer.names:
            raise ArchiveRefused(f"the archive holds no files (expected {_LAYOUT})")
        return Unpacked(target, writer.notes)
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)
        raise


class _Writer:
    """Checks each entry's name against the layout and the limits, then writes it."""

    def __init__(self, root: Path, limits: Limits) -> None:
        self.root, self.limits = root, limits
        self.names: dict[str, str] = {}  # normalised -> as given
        self.notes: list[str] = []
        self.written = 0
        self.entries = 0
        self.wrapper: str | None = None  # the one folder everything is in, if so

    def check(self, name: str, *, regular: bool, directory: bool = False) -> str | None:
        """The checked relative path to write, or None to skip a folder or an extra file."""
        self.entries += 1
        if self.entries > self.limits.files:
            raise ArchiveRefused(
                f"the archive has more than limits.max_archive_files ({self.limits.files}) entries",
                413,
            )
        if "\\" in name or "\0" in name:
            raise ArchiveRefused(f"entry {name[:80]!r} has a backslash or NUL in its name")
        if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
            raise ArchiveRefused(f"entry {name[:80]!r} has an absolute path")
        parts = [p for p in name.split("/") if p not in ("", ".")]
        if ".." in parts:
            raise ArchiveRefused(f"entry {name[:80]!r} climbs out of the archive ('..')")
        if directory:
            return None
        if not regular:
            raise ArchiveRefused(f"entry {name[:80]!r} is a link or a device, not a file")
        if not _in_layout(parts) and len(parts) > 1 and _in_layout(parts[1:]):
            self.wrapper = self.wrapper or parts[0]  # an archive of the contest's folder
            if parts[0] == self.wrapper:
                parts = parts[1:]
        path = "/".join(parts)
        if not _in_layout(parts):
            self.notes.append(f"{path[:120]} is not part of the layout ({_LAYOUT}): skipped")
            return None
        key = unicodedata.normalize("NFC", path).casefold()
        if key in self.names:
            raise ArchiveRefused(
                f"entries {self.names[key][:80]!r} and {name[:80]!r} name the same file"
            )
        self.names[key] = name
        return path

    def write(self, path: str, source: IO[bytes], declared: int) -> None:
        """Copy an entry, counting its bytes against the limit as they are decompressed."""
        if self.written + declared > self.limits.bytes:
            raise self._too_big()
        destination = self.root / path
        destination.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        with destination.open("xb") as out:
            while block := source.read(_BLOCK):
                self.written += len(block)
                if self.written > self.limits.bytes:
                    raise self._too_big()
                out.write(block)

    def _too_big(self) -> ArchiveRefused:
        return ArchiveRefused(
            f"the archive unpacks to more than limits.max_archive_bytes ({self.limits.bytes})", 413
        )


def _in_layout(parts: list[str]) -> bool:
    if parts == ["scoring.yaml"]:
        return True
    if len(parts) == 2 and parts[0] == "tests":
        return parts[1].endswith((".in", ".ans")) and not parts[1].startswith(".")
    if len(parts) >= 3 and parts[0] == "subs":  # deeper: a package's test paths
        return parts[-1].endswith(".out") and not any(p.startswith(".") for p in parts[1:])
    if len(parts) >= 2 and parts[0] == "package":  # a problem package, whole
        return not any(part.startswith(".") for part in parts[1:])
    if len(parts) in (2, 3) and parts[0] == "progs":  # which are programs: judging/programs.py
        return not any(part.startswith(".") for part in parts[1:])
    return False


def _untar(archive: Path, writer: _Writer) -> None:
    try:
        with tarfile.open(archive, mode="r|*") as tar:  # a stream: no seeking, no index
            for member in tar:
                path = writer.check(member.name, regular=member.isreg(), directory=member.isdir())
                if path is None:
                    continue
                source = tar.extractfile(member)
                assert source is not None
                writer.write(path, source, member.size)
    except (tarfile.TarError, EOFError, OSError) as exc:
        if isinstance(exc, ArchiveRefused):
            raise
        raise ArchiveRefused(f"not a readable tar, tar.gz or zip archive: {exc}") from None


def _unzip(archive: Path, writer: _Writer) -> None:
    try:
        with zipfile.ZipFile(archive) as zipped:
            for info in zipped.infolist():
                kind = stat.S_IFMT(info.external_attr >> 16)  # 0: no Unix type recorded
                special = kind not in (0, stat.S_IFREG, stat.S_IFDIR)
                if info.flag_bits & 0x1:
                    raise ArchiveRefused(f"entry {info.filename[:80]!r} is encrypted")
                path = writer.check(info.filename, regular=not special, directory=info.is_dir())
                if path is None:
                    continue
                with _opened(zipped, info) as source:
                    writer.write(path, source, info.file_size)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, EOFError) as exc:
        raise ArchiveRefused(f"not a readable zip archive: {exc}") from None


@contextmanager
def _opened(zipped: zipfile.ZipFile, info: zipfile.ZipInfo) -> Iterator[IO[bytes]]:
    with zipped.open(info) as source:
        yield source
