"""The one Celery task: solve a chunk of cases. Thin: the work is in `workers.runner`."""

from __future__ import annotations

import logging
from functools import cache

from celery import Celery

from pipeline.config import Settings
from pipeline.data.messages import BadTask, task_args
from pipeline.store.connections import this_process
from pipeline.store.jobstore import JobStore
from workers.runner import Outcome, Policy, run_chunk

log = logging.getLogger(__name__)

TASK_NAME = "gamebatch.solve_chunk"


@cache
def store_for(url: str) -> JobStore:
    """One Redis client per process (and per broker URL)."""
    return JobStore.from_url(url)


def register(app: Celery, settings: Settings) -> None:
    """Attach the chunk task to `app`."""

    def solve_chunk(*args: object, **kwargs: object) -> str:
        try:
            if len(args) != 2 or kwargs:
                raise BadTask(f"{len(args)} arguments and {len(kwargs)} keywords, not 2 and 0")
            job, chunk = task_args(*args)
        except BadTask as exc:
            log.warning("gamebatch: rejected a chunk task: %s", exc)
            return Outcome.REJECTED.value
        policy = Policy(
            holder=this_process(),
            lease_seconds=settings.lease_seconds,
            max_attempts=settings.max_attempts,
            file_payloads=bool(settings.file_payloads),
            judge=settings.judge,
            verdict_ttl=settings.result_ttl,
        )
        outcome = run_chunk(store_for(settings.broker_url or ""), job, chunk, policy)
        if outcome == Outcome.GONE:
            log.info("gamebatch: chunk %d of job %s: no such chunk (the job is gone)", chunk, job)
        return outcome.value

    app.task(name=TASK_NAME, ignore_result=True)(solve_chunk)
