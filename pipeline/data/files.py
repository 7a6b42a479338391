"""Output files: checked before any work, then written whole under their name or not at all."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TextIO

from pipeline.errors import GamebatchError, UsageError


class OutputError(GamebatchError):
    """A result or report that could not be written (the work itself is not lost)."""


def check_input(path: Path) -> None:
    """Refuse, before any work, an input that is not a file this process can read."""
    try:
        found = os.stat(path)
    except OSError as exc:
        why = "no such file" if exc.errno == errno.ENOENT else exc.strerror
        raise UsageError(f"cannot read {path}: {why}") from None
    if not stat.S_ISREG(found.st_mode):
        what = "it is a folder" if stat.S_ISDIR(found.st_mode) else "not a regular file"
        raise UsageError(f"cannot read {path}: {what}")
    if not os.access(path, os.R_OK):
        raise UsageError(f"cannot read {path}: Permission denied")


def is_regular(path: Path) -> bool:
    """Whether the path is a regular file (not a pipe or a device, which read only once)."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False  # its reader reports it


def check_output(path: Path, inputs: Iterable[Path] = ()) -> None:
    """Refuse, before any work, an output that cannot be written or would replace an input.

    A special file (a terminal, /dev/null, a FIFO) is written directly and is not checked
    beyond its permissions; a regular file's folder must take a new file.
    """
    given = _same_as_any(path, inputs)
    if given is not None:
        raise UsageError(f"{path} is the input file {given}: the result would replace it")
    try:
        target, mode = _resolve(path)
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror}") from None
    if mode is not None and stat.S_ISDIR(mode):
        raise UsageError(f"cannot write {path}: it is a folder")
    if mode is not None and not stat.S_ISREG(mode):
        if not os.access(target, os.W_OK):
            raise UsageError(f"cannot write {path}: permission denied")
        return
    folder = target.parent
    if not folder.is_dir():
        raise UsageError(f"cannot write {path}: folder {path.parent} does not exist")
    try:  # the only test that also sees read-only mounts and immutable folders, even as root
        fd, probe = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".check", dir=folder)
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror}") from None
    os.close(fd)
    os.unlink(probe)


def _resolve(path: Path) -> tuple[Path, int | None]:
    """Where to write and the mode of what is there (None: nothing yet). A special file is
    written through `path` itself (/dev/stdout may name a pipe, which has no path); a regular
    or new file at the end of any links, so that the rename keeps the links."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        mode = None
    if mode is not None and not stat.S_ISREG(mode):
        return path, mode
    return Path(os.path.realpath(path)), mode


def check_not_inputs(outputs: list[Path], inputs: Iterable[Path]) -> None:
    """Refuse outputs that are one of the inputs (links followed); the inputs are looked at
    once, and not at all when no output exists yet."""
    existing = {}
    for path in outputs:
        with contextlib.suppress(OSError):
            st = os.stat(path)
            existing[(st.st_dev, st.st_ino)] = path
    if not existing:
        return
    for given in inputs:
        try:
            st = os.stat(given)
        except OSError:
            continue
        if (st.st_dev, st.st_ino) in existing:
            path = existing[(st.st_dev, st.st_ino)]
            raise UsageError(f"{path} is the input file {given}: the result would replace it")


def _same_as_any(path: Path, inputs: Iterable[Path]) -> Path | None:
    """The input that is the same file as `path` (links followed), if any."""
    try:
        mine = os.stat(path)
    except OSError:
        return None  # nothing there yet: it is none of them
    for given in inputs:
        try:
            theirs = os.stat(given)
        except OSError:
            continue
        if (theirs.st_dev, theirs.st_ino) == (mine.st_dev, mine.st_ino):
            return given
    return None


def atomic_write(path: Path, text: str) -> None:
    """A whole text file under its final name, or nothing."""
    write_atomically(path, lambda out: out.write(text))


def write_atomically(path: Path, fill: Callable[[TextIO], object]) -> None:
    """Write a regular file through a temporary file beside it (fsync, rename): never a
    partial file. A special file (device, FIFO) is written directly: it is never replaced.
    A symbolic link is followed: its target gets the new content, the link stays."""
    try:
        target, mode = _resolve(path)
        if mode is not None and not stat.S_ISREG(mode):
            if stat.S_ISDIR(mode):
                raise OutputError(f"cannot write {path}: it is a folder")
            with target.open("w", encoding="utf-8", newline="\n") as out:
                fill(out)
            return
        _replace(target, fill)
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None


def write_all_atomically(paths: list[Path], fill: Callable[[list[TextIO]], object]) -> None:
    """Several files filled together, in one pass; each whole under its name, or not at all."""

    def nest(streams: list[TextIO]) -> None:
        if len(streams) == len(paths):
            fill(streams)
        else:
            write_atomically(paths[len(streams)], lambda out: nest([*streams, out]))

    nest([])


def _replace(target: Path, fill: Callable[[TextIO], object]) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    try:
        os.fchmod(fd, _new_file_mode(target))  # mkstemp makes 0600; a result file is not secret
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as out:
            fill(out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _new_file_mode(path: Path) -> int:
    """The mode `open()` would give: the existing file's, else 0666 less the umask."""
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except OSError:
        umask = os.umask(0o022)
        os.umask(umask)
        return 0o666 & ~umask
