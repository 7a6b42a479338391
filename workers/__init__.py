"""Celery workers: the app (`celery -A workers worker`), the chunk task and its runner."""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    # The app is built on first use, so that importing the runner does not build it.
    if name in ("app", "celery"):
        from workers.celery_app import default_app

        return default_app()
    raise AttributeError(f"module 'workers' has no attribute {name!r}")
