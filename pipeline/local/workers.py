"""Celery worker processes: local ones for a command, and the supervised `gamebatch worker`."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pipeline.children import before_exec


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
    shards = [
        _Supervised(url, f"worker-s{i}" if len(broker_urls) > 1 else "worker", i)
        for i, url in enumerate(broker_urls)
    ]
    stopping = False

    def forward(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True
        for shard in shards:  # each time: a second SIGINT is Celery's cold shutdown
            shard.tell(signal.SIGTERM if signum == signal.SIGHUP else signum)  # HUP restarts it

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, forward)
    while not stopping:
        for shard in shards:
            if shard.child is None and not stopping and time.monotonic() >= shard.due:
                command, env = _celery_worker(
                    shard.url, concurrency, config=config, name=shard.name, loglevel=loglevel,
                    events=events,
                )  # fmt: skip
                shard.start(command, env)
            elif shard.child is not None and not stopping and shard.child.poll() is not None:
                shard.ended(len(shards) > 1)
        time.sleep(0.1)
    for shard in shards:
        if not shard.told:  # started as the signal came
            shard.tell(signal.SIGTERM)
        if shard.child is not None:
            shard.child.wait()
    return 0


@dataclass
class _Supervised:
    """One broker's Celery worker under `supervise_worker`."""

    url: str
    name: str
    index: int
    child: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    due: float = 0.0  # when to start it (again)
    restarts: int = 0
    told: bool = False  # the running child was given a stop signal

    def tell(self, signum: int) -> None:
        """Pass a stop signal on to the running child."""
        if self.child is not None and self.child.poll() is None:
            self.child.send_signal(signum)
            self.told = True

    def start(self, command: list[str], env: dict[str, str]) -> None:
        """Start it (it dies with the supervisor, however that ends)."""
        self.started, self.told = time.monotonic(), False
        self.child = subprocess.Popen(command, env=env, preexec_fn=before_exec(signal.SIGKILL))  # noqa: PLW1509

    def ended(self, sharded: bool) -> None:
        """It died by itself: start it again after a pause that grows while it keeps dying
        within a minute of its start."""
        assert self.child is not None
        status, self.child = self.child.returncode, None
        self.restarts = 0 if time.monotonic() - self.started > 60 else self.restarts + 1
        pause = min(2.0**self.restarts, 30.0)
        self.due = time.monotonic() + pause
        which = f" of shard {self.index}" if sharded else ""
        print(
            f"gamebatch: worker{which} exited with status {status}; starting it again in"
            f" {pause:g} s",
            file=sys.stderr,
            flush=True,
        )
