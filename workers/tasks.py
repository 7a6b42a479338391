"""The one Celery task: solve a chunk of cases. Thin: the work is in `workers.runner`."""

from __future__ import annotations

from celery import Celery

from workers.runner import run_chunk


def register(app: Celery) -> None:
    """Attach the chunk task to `app`."""
    from workers.celery_app import TASK_NAME, store_for

    def solve_chunk(job_id: str, index: int) -> str:
        return run_chunk(store_for(app.conf.broker_url), job_id, int(index)).value

    app.task(name=TASK_NAME, ignore_result=True)(solve_chunk)
