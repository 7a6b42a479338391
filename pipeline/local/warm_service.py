"""The warm local service: owns a state folder's Redis after a command ends, keeps every
module loaded, and runs each command it is sent in a forked process, until it has been idle
for `warm_seconds`.

Started in the background by a command that owned the folder's Redis (`python -m
pipeline.launch --warm-service FOLDER SECONDS`, which hands it the command line to run); it
gives up at once when another command owns
the folder by then. Only the user who owns it can connect (its socket is 0600 in the state
folder, and the peer's user id is checked).
"""

from __future__ import annotations

import array
import contextlib
import gc
import io
import json
import os
import resource
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pipeline.children import exited, terminate
from pipeline.local import warm, warm_workers
from pipeline.local.cluster import StateDir
from pipeline.local.redis_server import RedisServer
from pipeline.local.workers import start_worker

_MAX_WORKER_RESTARTS = 3


Command = Callable[[list[str]], int]  # runs one command line: its exit status


class WarmService:
    """The listening socket, the Redis it owns and the commands it has forked; `command` runs
    each command line it is sent (in a fork, after `preload` loaded what commands use)."""

    def __init__(
        self, folder: Path, seconds: float, command: Command, preload: Callable[[], None]
    ) -> None:
        self.folder, self.seconds = folder, seconds
        self.command, self.preload = command, preload
        self.state = StateDir(folder)
        self.redis: RedisServer | None = None
        self.listener: socket.socket | None = None
        self.children: set[int] = set()
        self.worker: subprocess.Popen[bytes] | None = None  # kept for the next commands
        self.worker_spec = warm_workers.read_spec(folder)
        self.worker_restarts = 0
        self.fingerprint = warm.fingerprint()
        self.last = time.monotonic()
        self.stopping = False
        self.home: tuple[_Inode, _Inode] | None = None  # the folder's and the socket's
        self.orphaned = False  # the folder was deleted or replaced: its files are not ours

    def run(self) -> None:
        """Own the folder's Redis and serve until idle; nothing when another command owns it."""
        if not self.state.try_lock():
            return
        try:
            self.redis = RedisServer(
                self.state.redis_dir,
                appendonly=True,
                password=self.state.password(),
                tie_to_parent=True,
            ).start()
            self.state.publish(self.redis.port)
            _preload(self.preload)
            self._start_workers()  # announced before anyone can connect: a command finds them
            self.listener = _listen(self.folder / warm.SOCKET_NAME)
            self.home = self._where()
            self._log(f"serving for {self.seconds:g} s idle, Redis on port {self.redis.port}")
            self._loop()
        finally:
            self._close()

    def _loop(self) -> None:
        assert self.listener is not None
        while not self.stopping:
            ready, _, _ = select.select([self.listener], [], [], 0.5)
            if ready:
                with contextlib.suppress(OSError):
                    self._accept()
            self._reap()
            self._watch_workers()
            if (
                self.redis is not None
                and self.redis.process is not None
                and (self.redis.process.poll() is not None)
            ):
                self._log("its Redis has exited: stopping")
                return
            if not self.children and time.monotonic() - self.last > self.seconds:
                self._log("idle: stopping")
                return
            if self._where() != self.home:
                self._log("its state folder was deleted or replaced: stopping")
                self.orphaned = True
                return

    def _where(self) -> tuple[_Inode, _Inode]:
        """The state folder and the socket in it, as the file system has them now."""
        return _inode(self.folder), _inode(self.folder / warm.SOCKET_NAME)

    def _accept(self) -> None:
        assert self.listener is not None
        conn, _ = self.listener.accept()
        with conn:
            if warm.peer_uid(conn) != os.getuid():
                return
            request, fds = _receive(conn)
            try:
                if not warm.same_credentials(conn):
                    conn.sendall(b"\0\0\0\0")  # the caller runs it with its own rights
                    self._log("a caller with other credentials or namespaces runs its own")
                    return
                if request.get("fingerprint") != self.fingerprint:
                    conn.sendall(b"\0\0\0\0")  # the caller runs it with its own code
                    self._log("another version of the code asked: stopping")
                    self.stopping = True
                    return
                pid = os.fork()
                if pid == 0:
                    _child(self, conn, request, fds)  # never returns
                self.children.add(pid)
                self.last = time.monotonic()
            finally:
                for fd in fds:
                    os.close(fd)

    def _reap(self) -> None:
        for pid in list(self.children):
            with contextlib.suppress(ChildProcessError):
                done, status = os.waitpid(pid, os.WNOHANG)
                if not done:
                    continue
                self._log(f"command {pid} ended, status {os.waitstatus_to_exitcode(status)}")
            self.children.discard(pid)
            self.last = time.monotonic()

    def _close(self) -> None:
        if self.listener is not None:
            if not self.orphaned:
                with contextlib.suppress(OSError):
                    os.unlink(self.folder / warm.SOCKET_NAME)
            self.listener.close()
            self.listener = None
        for pid in list(self.children):  # commands still running: let them finish
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
        self.state.wait_for_other_users()
        if not self.orphaned:  # a new folder at the same path belongs to another service
            warm_workers.withdraw(self.folder)
        if self.worker is not None:
            terminate(self.worker, 0)  # no command is left that uses them
        if self.redis is not None:
            self.redis.stop()
        if self.orphaned:
            self.state.forget()
        else:
            self.state.unlock()

    def _start_workers(self) -> None:
        """Run the workers the last command ran, so that the next one need not start them."""
        if self.worker_spec is None or self.redis is None:
            return
        count, config = self.worker_spec
        path = None
        if config is not None:
            path = self.folder / "warm-workers.yaml"
            warm_workers.write_private(path, config)
        self.worker = start_worker(
            self.redis.url,
            count,
            self.folder / "warm-workers.log",
            config=str(path) if path else None,
            tie_to_parent=True,
            name="warm",
        )
        warm_workers.announce(self.folder, self.worker.pid, count, config)
        self._log(f"workers {self.worker.pid} started ({count} processes)")

    def _watch_workers(self) -> None:
        """Start the workers again when they died (a few times)."""
        if self.worker is None or not exited(self.worker.pid):
            return
        warm_workers.withdraw(self.folder)
        terminate(self.worker, 0)
        self.worker = None
        self.worker_restarts += 1
        self._log(f"workers exited (restart {self.worker_restarts})")
        if self.worker_restarts <= _MAX_WORKER_RESTARTS:
            self._start_workers()

    def _log(self, line: str) -> None:
        print(
            f"{time.strftime('%Y-%m-%d %H:%M:%S')} warm service {os.getpid()}: {line}",
            file=sys.stderr,
            flush=True,
        )


_Inode = tuple[int, int] | None  # a file's device and inode; None when it is gone


def _inode(path: Path) -> _Inode:
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_dev, found.st_ino


def _preload(load: Callable[[], None]) -> None:
    """Import what commands use, so that a forked command starts with it loaded."""
    load()
    gc.collect()
    gc.freeze()  # what is loaded now is never scanned again by a command's collections


def _listen(path: Path) -> socket.socket:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()  # left by a service that was killed (the folder's lock is ours)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    mask = os.umask(0o177)
    try:
        listener.bind(str(path))
    finally:
        os.umask(mask)
    listener.listen(64)
    return listener


def _receive(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    """The request and the three file descriptors that came with it."""
    conn.settimeout(5)
    head, ancillary, _, _ = conn.recvmsg(warm._STATUS.size, socket.CMSG_SPACE(3 * 4))
    fds: list[int] = []
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            passed = array.array("i")
            passed.frombytes(data[: len(data) - len(data) % passed.itemsize])
            fds += list(passed)
    if len(head) < warm._STATUS.size or len(fds) != 3:
        for fd in fds:
            os.close(fd)
        raise OSError("a malformed request")
    (size,) = warm._STATUS.unpack(head)
    body = b""
    while len(body) < size:
        more = conn.recv(size - len(body))
        if not more:
            raise OSError("a truncated request")
        body += more
    conn.settimeout(None)
    return json.loads(body), fds


def _child(
    service: WarmService, conn: socket.socket, request: dict[str, Any], fds: list[int]
) -> None:
    """In the forked process: become the caller's command, run it, send its exit status."""
    status = 1
    try:
        # The child, not the service, says it was forked: only one process writes to the
        # caller, so the exit status can never come before this (a fast command, a slow service).
        conn.sendall(warm._STATUS.pack(os.getpid()))
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for sig in _STOPS:  # until the command sets its own (under load, a while after fork)
            signal.signal(sig, _interrupted)
        _leave_service(service)
        _become_caller(request, fds)
        status = _command(conn, service.command, request["argv"])
        conn.sendall(warm._STATUS.pack(status))
    finally:
        os._exit(status & 0xFF)  # what the service's log shows


def _command(conn: socket.socket, command: Command, argv: list[str]) -> int:
    """Run the command, taking the signals its caller passes on: its exit status."""
    finished = threading.Event()
    try:
        threading.Thread(target=_signals_from, args=(conn, finished), daemon=True).start()
        return command(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
    except KeyboardInterrupt:  # a signal passed on before the command took its signals
        print("gamebatch: interrupted", file=sys.stderr)
        return 130
    except BaseException:
        traceback.print_exc()
        return 1
    finally:
        finished.set()
        for sig in _STOPS:
            signal.signal(sig, signal.SIG_IGN)
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()


_STOPS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _interrupted(signum: int, frame: object) -> None:
    for sig in _STOPS:  # one is enough
        signal.signal(sig, signal.SIG_IGN)
    raise KeyboardInterrupt


def _leave_service(service: WarmService) -> None:
    """Drop what belongs to the service: its socket and its hold on the folder."""
    if service.listener is not None:
        service.listener.close()
    service.state.forget()  # the service's own descriptors keep its locks


def _become_caller(request: dict[str, Any], fds: list[int]) -> None:
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    os.umask(int(request["umask"]))
    for name, (soft, hard) in request["limits"].items():
        with contextlib.suppress(ValueError, OSError):  # above the service's own: not given
            resource.setrlimit(getattr(resource, name), (soft, hard))
    tempfile.tempdir = None  # found again from this environment's TMPDIR
    sys.argv = ["gamebatch", *request["argv"]]
    options = request["streams"]
    sys.stdin = _stream(0, "r", options[0])
    sys.stdout = _stream(1, "w", options[1])
    sys.stderr = _stream(2, "w", options[2])


def _stream(fd: int, mode: str, options: dict[str, Any] | None) -> Any:
    options = options or {"encoding": "utf-8", "errors": "strict", "line_buffering": False}
    raw = open(fd, mode + "b", closefd=False)  # noqa: SIM115 (lives as long as the process)
    return io.TextIOWrapper(
        raw,
        encoding=options["encoding"],
        errors=options["errors"],
        line_buffering=options["line_buffering"],
        write_through=fd == 2,
    )


def _signals_from(conn: socket.socket, finished: threading.Event) -> None:
    """Raise each signal the caller passes on; the caller gone means its terminal closed."""
    while True:
        try:
            data = conn.recv(16)
        except OSError:
            data = b""
        if finished.is_set():
            return
        if not data:
            os.kill(os.getpid(), signal.SIGHUP)
            return
        for signum in data:
            os.kill(os.getpid(), signum)


def serve(folder: Path, seconds: float, command: Command, preload: Callable[[], None]) -> None:
    """Serve the state folder until idle (or SIGTERM)."""
    service = WarmService(folder, seconds, command, preload)
    signal.signal(signal.SIGTERM, lambda n, f: setattr(service, "stopping", True))
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    service.run()
