"""Prometheus metrics of the server: request latency and bytes uploaded counted here, job and
queue figures read from Redis when scraped."""

from __future__ import annotations

import time
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pipeline.store.protocol import Store
from pipeline.store.records import Records

CONTENT_TYPE = CONTENT_TYPE_LATEST
REGISTRY = CollectorRegistry()
UPLOADED = Counter("gamebatch_uploaded_bytes", "Bytes of input uploaded", registry=REGISTRY)
LATENCY = Histogram(
    "gamebatch_request_seconds",
    "Time to answer a request (to its first byte)",
    ["method", "route", "status"],
    registry=REGISTRY,
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)


class _Live:
    """Figures read from Redis at each scrape."""

    def __init__(self) -> None:
        self.records: Records | None = None
        self.store: Store | None = None
        self.queues: list[str] = []

    def collect(self) -> Any:
        if self.records is None or self.store is None:
            return
        jobs = GaugeMetricFamily("gamebatch_jobs", "Uploaded jobs by state", labels=["state"])
        for state, count in sorted(self.records.count_by_state().items()):
            jobs.add_metric([state], count)
        yield jobs
        yield CounterMetricFamily(
            "gamebatch_cases_solved",
            "Cases of uploaded jobs that ended done",
            value=self.records.solved(),
        )
        depth = GaugeMetricFamily(
            "gamebatch_queue_depth", "Chunk messages waiting per lane", labels=["queue"]
        )
        for queue in self.queues:
            depth.add_metric([queue], self.store.queue_length(queue))
        yield depth


_LIVE = _Live()
REGISTRY.register(_LIVE)


def render(records: Records, store: Store, queues: list[str]) -> bytes:
    """The metrics page."""
    _LIVE.records, _LIVE.store, _LIVE.queues = records, store, queues
    return generate_latest(REGISTRY)


class Timing:
    """ASGI middleware: each request's latency by route template and status."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = {"code": 500}

        async def timed_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
                route = scope.get("route")
                path = getattr(route, "path", "other")
                LATENCY.labels(scope["method"], path, str(status["code"])).observe(
                    time.perf_counter() - started
                )
            await send(message)

        await self.app(scope, receive, timed_send)
