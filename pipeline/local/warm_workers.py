"""Local workers that the warm service keeps running between commands, and whether a command
may use them: only with the very worker settings and count it would start its own with."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

SPEC = "warm-workers.json"  # how the last command that needed workers ran them
LIVE = "warm-workers.live"  # the warm service's workers: their pid and spec


def write_private(path: Path, text: str) -> None:
    """Write a small file only its owner may read, whole (readers never see half of it)."""
    part = path.with_name(path.name + ".part")
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # settings: private
    with os.fdopen(fd, "w") as out:
        out.write(text)
    part.replace(path)


def _write(path: Path, doc: dict[str, Any]) -> None:
    write_private(path, json.dumps(doc))


def _read(path: Path) -> dict[str, Any] | None:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def leave_spec(folder: Path, count: int, config: str | None) -> None:
    """Say how this command ran its workers, for the warm service it is about to start."""
    _write(folder / SPEC, {"count": count, "config": config})


def read_spec(folder: Path) -> tuple[int, str | None] | None:
    """The workers the warm service should run, if a command said."""
    doc = _read(folder / SPEC)
    if doc is None or not isinstance(doc.get("count"), int) or doc["count"] < 1:
        return None
    config = doc.get("config")
    return doc["count"], config if isinstance(config, str) else None


def announce(folder: Path, pid: int, count: int, config: str | None) -> None:
    """The warm service: its workers run, as `pid`, with this spec."""
    _write(folder / LIVE, {"pid": pid, "count": count, "config": config})


def withdraw(folder: Path) -> None:
    """The warm service: its workers are stopping."""
    with contextlib.suppress(FileNotFoundError):
        (folder / LIVE).unlink()


def serving(folder: Path, count: int, config: str | None) -> int | None:
    """The pid of the warm service's workers when they run as this command would run its
    own, else None."""
    doc = _read(folder / LIVE)
    if doc is None or doc.get("count") != count or doc.get("config") != config:
        return None
    pid = doc.get("pid")
    if not isinstance(pid, int) or not alive(pid):
        return None
    return pid


def alive(pid: int) -> bool:
    """Whether a Celery worker runs as `pid` (a zombie, or another program that got the pid,
    does not count)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    worker = b"workers.start" in command or b"celery" in command
    return stat.rsplit(")", 1)[-1].split()[0] != "Z" and worker
