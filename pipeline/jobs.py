"""A cluster's jobs as every entry point handles them (the command line, and client mode and
the page through the HTTP routes): their one view, their listing and their cancel."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from pipeline.errors import GamebatchError
from pipeline.jobstate import PAYLOAD_OBJECT, Cancel
from pipeline.jobview import LIVE, view
from pipeline.objects import ObjectUrl, is_remote, listing, remove
from pipeline.store import Store


class Jobs:
    """The jobs of one store; a cancelled job's manifest is kept `ttl` seconds."""

    def __init__(self, store: Store, ttl: int) -> None:
        self.store = store
        self.ttl = ttl

    def view(self, job_id: str, record: Mapping[str, str] | None = None) -> dict[str, Any] | None:
        """The job as clients see it, given its HTTP record when it was uploaded; None when
        there is no such job."""
        wanted = record is None or record.get("state") in LIVE
        live = self.store.progress(job_id) if wanted else None
        if record is None and live is None:
            return None
        return view(record, live)

    def views(self, job_ids: list[str] | None = None) -> list[dict[str, Any] | None]:
        """Views of these jobs (None for a missing one), or of every job oldest first."""
        ids = self.store.jobs() if job_ids is None else job_ids
        return [None if p is None else view(None, p) for p in self.store.progress_of(ids)]

    def cancel(self, job_id: str) -> Cancel:
        """Stop the job and its HTTP record in one write (`Store.cancel`); the copy of its
        input in the payload store goes."""
        cancelled = self.store.cancel(job_id, self.ttl)
        if cancelled.found and not cancelled.ended:
            drop_payload(self.store, job_id)
        return cancelled


def drop_payload(store: Store, job_id: str) -> None:
    """Delete the payload store's copy of a job's input (when it has one): its chunks will
    not be read again. A store that cannot delete it now leaves it (it is only bytes)."""
    url = (store.manifest(job_id) or {}).get(PAYLOAD_OBJECT)
    if url and is_remote(url):
        with contextlib.suppress(GamebatchError):
            remove(ObjectUrl(url))


COPY_GRACE_SECONDS = 24 * 3600  # a younger copy may be one a producer is still making


def forgotten(
    listed: list[tuple[ObjectUrl, float]], kept: set[str], now: float, grace: float
) -> list[ObjectUrl]:
    """The payload-store copies that no kept job names and that are older than `grace` (a
    producer uploads its copy before its job's manifest names it)."""
    return [url for url, written in listed if url not in kept and now - written > grace]


def sweep_payload_store(store: Store, folder: str, now: float) -> int:
    """Delete the copies in this cluster's `folder` of the payload store that no kept job
    names (their producer was killed before its job ended, or the job's keys expired): the
    number deleted. Errors leave them for another round."""
    with contextlib.suppress(GamebatchError):
        listed = listing(f"{folder}/")
        gone = forgotten(listed, store.payload_objects(), now, COPY_GRACE_SECONDS)
        for url in gone:
            remove(url)
        return len(gone)
    return 0
