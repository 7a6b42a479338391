"""A cluster's jobs as every entry point handles them (the command line, and client mode and
the page through the HTTP routes): their one view, their listing and their cancel."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pipeline.jobstate import Cancel
from pipeline.jobview import LIVE, view
from pipeline.payload_store import drop_payload
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
