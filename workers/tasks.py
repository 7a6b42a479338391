"""The one Celery task: solve a chunk of cases. Thin: the work is in `workers.runner`."""

from __future__ import annotations

from celery import Celery

from pipeline.config import Settings
from pipeline.jobstore import this_process
from workers.runner import Policy, run_chunk


def register(app: Celery, settings: Settings) -> None:
    """Attach the chunk task to `app`."""
    from workers.celery_app import TASK_NAME, store_for

    def solve_chunk(job_id: str, index: int) -> str:
        policy = Policy(
            holder=this_process(),
            lease_seconds=settings.lease_seconds,
            max_attempts=settings.max_attempts,
        )
        return run_chunk(store_for(app.conf.broker_url), job_id, int(index), policy).value

    app.task(name=TASK_NAME, ignore_result=True)(solve_chunk)
