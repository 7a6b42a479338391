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
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from types import TracebackType
from typing import IO

import redis

from pipeline.children import exited, terminate
from pipeline.errors import GamebatchError
from pipeline.local import warm_workers
from pipeline.local.redis_server import RedisServer
from pipeline.local.workers import start_worker

_START_TIMEOUT = 20.0
_INTERRUPTS = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
# Local workers are stopped only when no task of ours is left, so they are killed at once (a
# warm shutdown took 0.5 s): a chunk of another command's job that they were running has a
# lease, and is run again once it lapses, like any chunk of a worker that died.
_WORKER_GRACE = 0.0
_MAX_RESTARTS = 5  # of the embedded workers, per command


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
        """As the owner, before stopping the server: wait until no other command uses it.
        An interrupt (Ctrl-C, SIGTERM) meanwhile is held until then: it stops this command,
        never the server under another one."""
        if self._users is None:
            return
        try:
            fcntl.flock(self._users, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except OSError:
            pass
        print(
            "gamebatch: note: waiting for the other commands that use this Redis to end",
            file=sys.stderr,
            flush=True,
        )
        held = signal.pthread_sigmask(signal.SIG_BLOCK, _INTERRUPTS)
        try:
            fcntl.flock(self._users, fcntl.LOCK_EX)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)

    def unlock(self) -> None:
        """Let another command own the folder."""
        if self._lock is not None:
            (self.path / "port").unlink(missing_ok=True)
            self._lock.close()
            self._lock = None
        self.leave()

    def forget(self) -> None:
        """In a forked process: close the inherited handles without taking the locks from
        the process that holds them (its own descriptors keep them)."""
        for handle in (self._lock, self._users):
            if handle is not None:
                handle.close()
        self._lock = self._users = None

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


_TMP_PREFIX = "gamebatch-cmd-"  # only folders made here, each with a locked `owner` file


def _private_folder() -> tuple[Path, IO[bytes]]:
    """A temporary folder of this command, locked while it lives; folders of commands that
    died without cleaning up (SIGKILL) are removed first.

    A folder is made under another name, locked, then renamed: a folder under the prefix
    always has a locked owner while its command lives. Nothing without an `owner` file is
    ever removed (other programs' folders may share the prefix).
    """
    base = Path(tempfile.gettempdir())
    for stale in base.glob(f"{_TMP_PREFIX}*"):
        with contextlib.suppress(OSError), (stale / "owner").open("rb") as held:
            fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)  # its command is gone
            shutil.rmtree(stale, ignore_errors=True)
    making = Path(tempfile.mkdtemp(prefix=f".{_TMP_PREFIX}"))
    owner = (making / "owner").open("ab")
    fcntl.flock(owner, fcntl.LOCK_EX)
    folder = base / making.name[1:]
    making.rename(folder)
    return folder, owner


class EmbeddedCluster(AbstractContextManager["EmbeddedCluster"]):
    """A private Redis plus local workers, stopped on exit.

    With a state folder the Redis keeps its data there; when another command already runs
    that Redis, this one attaches to it (and adds its own workers). Without one, or when
    the folder cannot be used, the data lives in a temporary folder for this command only.
    """

    def __init__(
        self,
        workers: int,
        settings: Callable[[], str] | None = None,
        state: Path | None = None,
        *,
        lazy: bool = False,
        warm_seconds: int = 0,
    ) -> None:
        """`settings`: makes a config file's text for the local workers (the command's
        settings), when they start;
        `lazy`: start the workers only when `ensure_workers` is first called; `warm_seconds`:
        once done, hand the folder's Redis to a warm service that stays this long idle."""
        self.workers = workers
        self.lazy = lazy
        self.warm_seconds = warm_seconds
        self.state = StateDir(state) if state else None
        self._tmp, self._tmp_owner = _private_folder()
        self.settings = settings
        self.redis: RedisServer | None = None
        self.url = ""
        self.persistent = False
        self.worker: subprocess.Popen[bytes] | None = None
        self.shared = 0  # the pid of the warm service's workers, when this command uses them
        self.started = False  # whether this command started workers of its own
        self.restarts = 0

    @property
    def redis_folder(self) -> Path:
        """Where the Redis this command uses keeps its data."""
        return self.state.redis_dir if self.state is not None and self.persistent else self._tmp

    @property
    def log(self) -> Path:
        """Where the workers log."""
        return self._tmp / "worker.log"

    def __enter__(self) -> EmbeddedCluster:
        try:
            self._start_redis()
            if self.workers and not self.lazy:
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
                warm_workers.withdraw(state.path)  # of a service that died: not ours
                self.redis = RedisServer(
                    state.redis_dir,
                    appendonly=True,
                    password=state.password(),
                    tie_to_parent=True,
                )
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
        self.started = True
        self.worker = start_worker(
            self.url,
            self.workers,
            self.log,
            config=self._config(),
            tie_to_parent=True,
            extra_env={"TMPDIR": str(self._tmp)},  # what they leave when killed goes with it
        )

    def _config(self) -> str | None:
        """The workers' config file, written when first needed."""
        if self.settings is None:
            return None
        path = self._tmp / "settings.yaml"
        if not path.exists():
            path.touch(mode=0o600)
            path.write_text(self.settings())
        return str(path)

    def ensure_workers(self) -> None:
        """Start the local workers if they have not been started yet (a lazy cluster), unless
        the warm service that owns the folder's Redis runs them as this command would."""
        if self.workers and not self.workers_running():
            self._start_workers()

    def workers_running(self) -> bool:
        """Whether local workers run already: this command's, or the warm service's when it
        owns the folder's Redis and runs them as this command would (they are then used)."""
        attached = self.state is not None and self.persistent and self.redis is None
        if self.workers and self.worker is None and not self.shared and attached:
            assert self.state is not None
            self.shared = warm_workers.serving(self.state.path, self.workers, self._settings()) or 0
        return self.worker is not None or bool(self.shared)

    def _settings(self) -> str | None:
        return self.settings() if self.settings is not None else None

    def check(self) -> None:
        """Start the local workers again when they died; give up after a few times (when the
        warm service's workers are gone, start this command's own)."""
        if self.shared and not warm_workers.alive(self.shared):
            self.shared = 0
            self._start_workers()
            return
        if self.worker is None or not exited(self.worker.pid):
            return
        terminate(self.worker, 0)  # reaps it, and kills what is left of its pool
        self.restarts += 1
        if self.restarts > _MAX_RESTARTS:
            lines = self.log.read_text(errors="replace").strip().splitlines() or ["(no log)"]
            raise GamebatchError(f"the local workers keep exiting: {lines[-1]}")
        self._start_workers()

    def close(self) -> None:
        """Stop the workers, then Redis once no other command uses it; remove the folder;
        then start the warm service when this command owned the folder's Redis."""
        owner = self.state is not None and self.redis is not None and self.persistent
        try:
            if owner and self.state is not None:
                self.state.wait_for_other_users()
        finally:
            self._stop()
        if owner and self.warm_seconds and self.state is not None:
            from pipeline.local.warm import spawn

            with contextlib.suppress(OSError):
                if self.started:  # the service keeps such workers for the next command
                    warm_workers.leave_spec(self.state.path, self.workers, self._settings())
                spawn(str(self.state.path), self.warm_seconds)

    def _stop(self) -> None:
        if self.worker is not None:
            terminate(self.worker, _WORKER_GRACE)
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
