"""How long the server keeps what it made: finished jobs' records and result files, and
gradings with their unpacked archives and reports, are removed `server.keep_seconds` after
their upload; files that no record owns are removed too."""

from __future__ import annotations

import logging
import shutil
import threading
import time

from pipeline.server.gradings import folder
from pipeline.server.spool import Spool
from pipeline.store.records import Records

log = logging.getLogger("gamebatch.server")
ORPHAN_AGE = 3600.0  # seconds before a file without a record is taken for a leftover


def sweep(records: Records, spool: Spool, keep: float, now: float | None = None) -> int:
    """Remove what is older than `keep` seconds; how many records went."""
    now = time.time() if now is None else now
    removed = 0
    for job_id in records.finished_before(now - keep):
        records.forget(job_id)
        for path in (spool.result(job_id), spool.errors(job_id)):
            spool.discard(path)
        removed += 1
    gradings = records.of_kind("grading")
    for grading_id in gradings.finished_before(now - keep):
        gradings.forget(grading_id)
        shutil.rmtree(folder(spool, grading_id), ignore_errors=True)
        removed += 1
    _orphans(records, gradings, spool, now)
    return removed


def _orphans(records: Records, gradings: Records, spool: Spool, now: float) -> None:
    for path in (spool.root / "results").iterdir():
        job_id = path.name.split(".out")[0]
        if now - path.stat().st_mtime > ORPHAN_AGE and records.get(job_id) is None:
            spool.discard(path)
    root = spool.root / "gradings"
    for path in root.iterdir() if root.is_dir() else ():
        if now - path.stat().st_mtime > ORPHAN_AGE and gradings.get(path.name) is None:
            shutil.rmtree(path, ignore_errors=True)


def keep_sweeping(records: Records, spool: Spool, keep: float, stop: threading.Event) -> None:
    """Sweep now and then until `stop` is set (a thread of the server)."""
    every = min(600.0, max(keep / 4, 1.0))
    while True:
        try:
            sweep(records, spool, keep)
        except Exception:
            log.exception("sweeping the spool")
        if stop.wait(every):
            return
