"""The one Celery task: solve a chunk of cases. Thin: the work is in `workers.runner`."""

from __future__ import annotations

import logging

from celery import Celery

from pipeline.config import Settings
from pipeline.jobstore import this_process
from pipeline.messages import BadTask, task_args
from workers.runner import Outcome, Policy, run_chunk

log = logging.getLogger(__name__)


def register(app: Celery, settings: Settings) -> None:
    """Attach the chunk task to `app`."""
    from workers.celery_app import TASK_NAME, store_for

    def solve_chunk(job_id: object, index: object) -> str:
        try:
            job, chunk = task_args(job_id, index)
        except BadTask as exc:
            log.warning("gamebatch: rejected a chunk task: %s", exc)
            return Outcome.REJECTED.value
        policy = Policy(
            holder=this_process(),
            lease_seconds=settings.lease_seconds,
            max_attempts=settings.max_attempts,
        )
        outcome = run_chunk(store_for(app.conf.broker_url), job, chunk, policy)
        if outcome == Outcome.GONE:
            log.info("gamebatch: chunk %d of job %s: no such chunk (the job is gone)", chunk, job)
        return outcome.value

    app.task(name=TASK_NAME, ignore_result=True)(solve_chunk)
