"""The Celery application: JSON-only messages, late acknowledgement, tables loaded before fork."""

from __future__ import annotations

from functools import cache
from typing import Any

from celery import Celery, signals
from kombu.entity import Queue

from pipeline.config import LANES, Settings, lane_queue, load_settings
from pipeline.errors import UsageError
from pipeline.jobstore import JobStore
from pipeline.problem import registry

TASK_NAME = "gamebatch.solve_chunk"


def create_app(settings: Settings) -> Celery:
    """An app bound to the settings' broker, with the chunk task registered."""
    if not settings.broker_url:
        raise UsageError("no broker: pass --broker URL or set GAMEBATCH_BROKER_URL")
    app = Celery("gamebatch", broker=settings.broker_url, set_as_current=False)
    app.conf.update(
        task_serializer="json",
        accept_content=["json"],
        result_accept_content=["json"],
        event_serializer="json",
        task_ignore_result=True,
        task_acks_late=True,  # a task whose worker dies is delivered again
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,  # chunks are long: do not hoard them
        # Lanes: every worker consumes both queues, the interactive one first.
        task_queues=[Queue(lane_queue(settings, lane)) for lane in LANES],  # type: ignore[no-untyped-call]
        task_default_queue=lane_queue(settings, "bulk"),
        broker_transport_options={
            "visibility_timeout": settings.visibility_timeout,
            "queue_order_strategy": "priority",
        },
        broker_connection_retry_on_startup=True,
        # ride out a Redis restart (about a minute) when queueing
        task_publish_retry_policy={
            "max_retries": 40,
            "interval_start": 0.1,
            "interval_step": 0.2,
            "interval_max": 2.0,
        },
        worker_hijack_root_logger=False,
        worker_send_task_events=settings.events,
        task_send_sent_event=settings.events,
    )
    from workers.tasks import register

    register(app, settings)
    return app


@cache
def default_app() -> Celery:
    """The app of `celery -A workers`, configured from GAMEBATCH_* and GAMEBATCH_CONFIG."""
    return create_app(load_settings())


@cache
def store_for(url: str) -> JobStore:
    """One Redis client per process (and per broker URL)."""
    return JobStore.from_url(url)


@signals.worker_init.connect  # type: ignore[untyped-decorator]
def _prepare_tables(sender: Any = None, **_: Any) -> None:
    """Load (or build and share) every game's tables once, in the parent before it forks."""
    app = getattr(sender, "app", None)
    url = app.conf.broker_url if app is not None else None
    cache_ = JobStore.from_url(url) if url else None
    for problem in registry().values():
        problem.prepare(cache_)
