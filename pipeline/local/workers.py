"""Celery worker processes: local ones for a command, and the supervised `gamebatch worker`."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from pipeline.local.children import before_exec


def _celery_worker(
    broker_url: str,
    concurrency: int,
    *,
    config: str | None,
    name: str,
    loglevel: str = "INFO",
    events: bool = False,
    extra_env: dict[str, str] | None = None,
) -> tuple[list[str], dict[str, str]]:
    """The command line and environment of a Celery worker process (`workers.start`)."""
    env = {**os.environ, "GAMEBATCH_BROKER_URL": broker_url, **(extra_env or {})}
    if config:
        env["GAMEBATCH_CONFIG"] = config
    command = [
        sys.executable,
        "-m",
        "workers.start",
        "--concurrency",
        str(concurrency),
        "--loglevel",
        loglevel,
        "--hostname",
        f"{name}-{os.getpid()}-{secrets.token_hex(3)}@%h",
        *(["--task-events"] if events else []),
    ]
    return command, env


def start_worker(
    broker_url: str,
    concurrency: int,
    log: Path,
    *,
    config: str | None = None,
    name: str = "local",
    extra_env: dict[str, str] | None = None,
    tie_to_parent: bool = False,
) -> subprocess.Popen[bytes]:
    """A Celery worker process for `broker_url`, logging to `log`."""
    command, env = _celery_worker(
        broker_url, concurrency, config=config, name=name, extra_env=extra_env
    )
    with log.open("ab") as out:
        return subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            env=env,
            start_new_session=True,
            # SIGKILL: a warm shutdown would retry a dead Redis for a minute; the pool
            # children die with it (see workers.celery_app), their chunks run again
            preexec_fn=before_exec(signal.SIGKILL) if tie_to_parent else None,  # noqa: PLW1509
        )


def supervise_worker(
    broker_urls: Sequence[str],
    concurrency: int,
    *,
    loglevel: str,
    events: bool,
    config: str | None,
) -> int:
    """Run a Celery worker per broker (one per shard) in the foreground, and start each
    again whenever it dies by itself.

    Celery's Redis transport can end a worker on an unlucky broker disconnect ("Unrecoverable
    error"); a supervised worker comes back. SIGTERM or SIGINT stop them with a warm shutdown.
    """
    stopping = threading.Event()
    children: dict[int, subprocess.Popen[bytes]] = {}

    def forward(signum: int, frame: object) -> None:
        stopping.set()
        for child in list(children.values()):
            if child.poll() is None:
                child.send_signal(signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, forward)
    threads = [
        threading.Thread(
            target=_keep_running,
            args=(url, f"worker-s{shard}" if len(broker_urls) > 1 else "worker"),
            kwargs={
                "concurrency": concurrency,
                "loglevel": loglevel,
                "events": events,
                "config": config,
                "stopping": stopping,
                "children": children,
                "shard": shard,
            },
            daemon=True,
        )
        for shard, url in enumerate(broker_urls)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()  # signals reach `forward` meanwhile
    return 0


def _keep_running(
    broker_url: str,
    name: str,
    *,
    concurrency: int,
    loglevel: str,
    events: bool,
    config: str | None,
    stopping: threading.Event,
    children: dict[int, subprocess.Popen[bytes]],
    shard: int,
) -> None:
    """One broker's worker, started again after each death until `stopping`."""
    restarts = 0
    while not stopping.is_set():
        command, env = _celery_worker(
            broker_url, concurrency, config=config, name=name, loglevel=loglevel, events=events
        )
        started = time.monotonic()
        child = subprocess.Popen(command, env=env, preexec_fn=before_exec(signal.SIGKILL))  # noqa: PLW1509
        children[shard] = child
        if stopping.is_set():  # told to stop as it started
            child.terminate()
        status = child.wait()
        if stopping.is_set():
            return
        restarts = 0 if time.monotonic() - started > 60 else restarts + 1
        pause = min(2.0**restarts, 30.0)
        which = f" of shard {shard}" if name != "worker" else ""
        print(
            f"gamebatch: worker{which} exited with status {status}; starting it again in"
            f" {pause:g} s",
            file=sys.stderr,
            flush=True,
        )
        stopping.wait(pause)
