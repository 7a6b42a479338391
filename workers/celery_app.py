"""The Celery application: JSON-only messages, late acknowledgement, tables loaded before fork."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from functools import cache
from typing import Any

from celery import Celery, signals
from kombu.entity import Queue

from pipeline.children import tie_to_parent
from pipeline.config import LANES, Settings, lane_queue, load_settings
from pipeline.errors import UsageError
from pipeline.games.registry import registry
from pipeline.store.connections import (
    BROKER_HEALTH_CHECK_SECONDS,
    BROKER_SOCKET_TIMEOUT,
    SENTINEL_SOCKET_TIMEOUT,
    this_process,
)
from pipeline.store.jobstore import JobStore
from pipeline.store.shards import ShardedStore
from pipeline.urls import SentinelUrl, is_sentinel
from workers.tasks import TASK_NAME, register
from workers.transport import install as install_transport


def create_app(settings: Settings) -> Celery:
    """An app bound to the settings' broker, with the chunk task registered."""
    if not settings.broker_url:
        raise UsageError("no broker: pass --broker URL or set GAMEBATCH_BROKER_URL")
    install_transport()  # malformed messages are dropped, not fatal
    broker, options, hosts = _broker(settings.broker_url)
    app = Celery("gamebatch", broker=broker, set_as_current=False)
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
        broker_transport_options={"visibility_timeout": settings.visibility_timeout, **options},
        broker_connection_retry_on_startup=True,
        broker_connection_max_retries=None,  # a worker waits for its broker however long
        # ride out a Redis restart or a failover (about a minute) when queueing; kombu waits
        # only once per round of the hosts of a sentinel URL, and counts every host tried
        task_publish_retry_policy={
            "max_retries": 40 * hosts,
            "interval_start": 0.1,
            "interval_step": 0.2,
            "interval_max": 2.0,
        },
        worker_consumer="workers.consumer:Consumer",  # back on a lost broker within 2 s
        worker_hijack_root_logger=False,
        worker_send_task_events=settings.events,
        task_send_sent_event=settings.events,
    )
    register(app, settings)
    app.gamebatch_settings = settings  # for the sweeper
    return app


def _broker(url: str) -> tuple[str, dict[str, Any], int]:
    """What kombu is given for a broker URL: its URL, its transport options and how many
    hosts it names (kombu reads a sentinel URL's hosts from the URL, the rest from options);
    a silent broker is a lost one (socket timeouts, and kombu's BRPOP health check)."""
    options: dict[str, Any] = {"queue_order_strategy": "priority"}
    timeout, hosts = BROKER_SOCKET_TIMEOUT, 1
    if is_sentinel(url):
        found = SentinelUrl.parse(url)
        url, hosts, timeout = found.kombu_url(), len(found.hosts), SENTINEL_SOCKET_TIMEOUT
        options |= found.transport_options()
        # the sentinels' own connections too: redis-py gives them none of the data
        # connections' options once sentinel_kwargs is set
        options["sentinel_kwargs"] = {
            **options.get("sentinel_kwargs", {}),
            "socket_timeout": timeout,
            "socket_connect_timeout": timeout,
        }
    options |= {
        "socket_timeout": timeout,
        "socket_connect_timeout": timeout,
        "health_check_interval": BROKER_HEALTH_CHECK_SECONDS,
    }
    return url, options, hosts


def lane_sender(app: Celery, store: JobStore, settings: Settings) -> Callable[[str, int], str]:
    """A function that queues one chunk task of a job, in the job's lane: its task id."""
    lanes: dict[str, str] = {}

    def send(job_id: str, index: int) -> str:
        if job_id not in lanes:
            manifest = store.manifest(job_id) or {}
            lanes[job_id] = lane_queue(settings, manifest.get("lane", "bulk"))
        return str(app.send_task(TASK_NAME, args=[job_id, index], queue=lanes[job_id]).id)

    return send


def cluster_sender(settings: Settings, store: JobStore | ShardedStore) -> Callable[[str, int], str]:
    """`lane_sender` of the settings' cluster: each chunk to the broker of its job's shard."""
    if not isinstance(store, ShardedStore):
        return lane_sender(create_app(settings), store, settings)
    senders = [
        lane_sender(create_app(settings.replaced(broker_url=url)), shard, settings)
        for url, shard in zip(settings.shard_urls, store.stores, strict=True)
    ]
    return lambda job_id, index: senders[store.index_of(job_id)](job_id, index)


CAPACITY_KEPT_SECONDS = 600  # a worker silent this long is forgotten by gb:capacity


@cache
def default_app() -> Celery:
    """The app of `celery -A workers`, configured from GAMEBATCH_* and GAMEBATCH_CONFIG."""
    return create_app(load_settings())


_main_pid = 0  # the worker's main process, set before it forks its pool


@signals.worker_process_init.connect  # type: ignore[untyped-decorator]
def _die_with_main_process(**_: Any) -> None:
    """A pool process ends with its worker, however the worker ends (no orphans that keep
    retrying a dead Redis); its chunk is delivered again."""
    if _main_pid:
        tie_to_parent(signal.SIGKILL, _main_pid)


@signals.worker_init.connect  # type: ignore[untyped-decorator]
def _prepare_tables(sender: Any = None, **_: Any) -> None:
    """Load (or build and share) every game's tables once, in the parent before it forks."""
    global _main_pid  # noqa: PLW0603 - read by the pool processes it forks
    _main_pid = os.getpid()
    settings = getattr(getattr(sender, "app", None), "gamebatch_settings", None)
    url = settings.broker_url if settings is not None else None  # sentinels too
    cache_ = JobStore.from_url(url).tables if url else None
    for problem in registry().values():
        problem.prepare(cache_)


@signals.worker_ready.connect  # type: ignore[untyped-decorator]
def _start_sweeper(sender: Any = None, **_: Any) -> None:
    """In each worker's main process: look for chunks lost with their worker, so that jobs
    recover even when no `solve` or `collect` is waiting on them."""
    settings = getattr(getattr(sender, "app", None), "gamebatch_settings", None)
    if settings is not None:
        processes = int(getattr(getattr(sender, "controller", None), "concurrency", 0) or 1)
        threading.Thread(
            target=_sweep_forever,
            args=(sender.app, settings, (str(sender.hostname), processes)),
            name="gamebatch-sweeper",
            daemon=True,
        ).start()


def _sweep_forever(app: Celery, settings: Settings, worker: tuple[str, int]) -> None:
    """Every lease/3 seconds: say this worker lives (with its pool processes), and sweep
    when no other worker does this round."""
    from pipeline.jobs.recovery import sweep

    store = JobStore.from_url(settings.broker_url or "")
    send = lane_sender(app, store, settings)
    holder, every = this_process(), settings.lease_seconds / 3
    while True:
        try:
            store.note_capacity(*worker, keep=CAPACITY_KEPT_SECONDS)
            if store.claim_sweep(holder, every):  # one sweeper per interval in the cluster
                sweep(store, send, settings)
        except Exception as exc:  # a Redis outage: the next round tries again
            logging.getLogger(__name__).warning("gamebatch sweeper: %s", exc)
        time.sleep(every)
