"""The Celery consumer, back on a lost broker within seconds: kombu waits 2, 4, 6 ... up to
30 s between rounds of reconnecting, so a worker that lost its Redis in a failover came back
up to 30 s after the new primary was ready. Here the rounds are 0.5 s apart, at most 2 s."""

from __future__ import annotations

from typing import Any

from celery.worker.consumer import Consumer as CeleryConsumer

INTERVALS = {"interval_start": 0.5, "interval_step": 0.5, "interval_max": 2.0}


class Consumer(CeleryConsumer):  # type: ignore[misc]
    """Celery's consumer with short reconnect intervals (app.conf.worker_consumer)."""

    def ensure_connected(self, conn: Any) -> Any:
        ensure = conn.ensure_connection

        def quickly(*args: Any, **kwargs: Any) -> Any:
            return ensure(*args, **{**INTERVALS, **kwargs})

        conn.ensure_connection = quickly
        return super().ensure_connected(conn)
