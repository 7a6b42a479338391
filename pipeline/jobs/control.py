"""A cluster's jobs as every entry point handles them (the command line, and client mode and
the page through the HTTP routes): their one view, their listing and their cancel."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pipeline.data.payload_store import drop_payload
from pipeline.jobs.view import view
from pipeline.store.jobstate import Cancel
from pipeline.store.protocol import Store

Record = Mapping[str, str]
RecordsOf = Callable[[list[str]], list[dict[str, str] | None]]  # the HTTP records of these jobs


class Jobs:
    """The jobs of one store; a cancelled job's manifest is kept `ttl` seconds; `records`
    reads uploaded jobs' HTTP records, so that a job looks the same from every client."""

    def __init__(self, store: Store, ttl: int, records: RecordsOf | None = None) -> None:
        self.store = store
        self.ttl = ttl
        self.records = records or (lambda ids: [None] * len(ids))

    def view(
        self, job_id: str, record: Record | None = None, links: dict[str, str] | None = None
    ) -> dict[str, Any] | None:
        """The job as clients see it (its HTTP record is looked up when not given); None
        when there is no such job."""
        return self.views_of([job_id], [record], [links])[0]

    def views(self, job_ids: list[str] | None = None) -> list[dict[str, Any] | None]:
        """Views of these jobs (None for a missing one), or of every job oldest first."""
        ids = self.store.jobs() if job_ids is None else job_ids
        return self.views_of(ids, [None] * len(ids))

    def views_of(
        self,
        job_ids: list[str],
        records: list[Record | None],
        links: list[dict[str, str] | None] | None = None,
    ) -> list[dict[str, Any] | None]:
        """Views of these jobs, given such HTTP records as are known already (two round
        trips in all: their counters, and the records not given)."""
        lives = self.store.progress_of(job_ids)
        missing = [i for i, r in enumerate(records) if r is None]
        found = self.records([job_ids[i] for i in missing]) if missing else []
        records = list(records)
        for i, record in zip(missing, found, strict=True):
            records[i] = record
        return [
            None if record is None and live is None else view(record, live, link)
            for record, live, link in zip(
                records, lives, links or [None] * len(job_ids), strict=True
            )
        ]

    def cancel(self, job_id: str) -> Cancel:
        """Stop the job and its HTTP record in one write (`Store.cancel`); the copy of its
        input in the payload store goes."""
        cancelled = self.store.cancel(job_id, self.ttl)
        if cancelled.found and not cancelled.ended:
            drop_payload(self.store, job_id)
        return cancelled
