"""The client side of the warm local service: a command runs in a process forked from a warm
one that has every module loaded and the state folder's Redis running, when one answers.

Only the standard library is imported here: this runs before anything else in `gamebatch`.
The request carries the command line, the working folder, the environment, the umask and
the three standard streams (passed as file descriptors), so the forked process behaves as if
it had been started here; signals sent to this process are passed on to it.
"""

from __future__ import annotations

import array
import contextlib
import json
import os
import resource
import signal
import socket
import struct
import sys
from pathlib import Path

SOCKET_NAME = "warm.sock"
LOG_NAME = "warm.log"  # what the service did, in the state folder
WARM_SERVICE = "--warm-service"  # `python -m pipeline.launch --warm-service FOLDER SECONDS`
PACKAGES = ("pipeline", "workers")  # the code a service has loaded, walked for its fingerprint
NOT_WARM = ("worker", "serve")  # long-lived commands that manage their own process groups
LIMITS = (
    "RLIMIT_AS",
    "RLIMIT_DATA",
    "RLIMIT_FSIZE",
    "RLIMIT_NOFILE",
    "RLIMIT_CPU",
    "RLIMIT_CORE",
    "RLIMIT_STACK",
)  # the caller's `ulimit`s that the command keeps
_FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_STATUS = struct.Struct("!i")


def state_folder() -> str | None:
    """The state folder as the environment names it (a config file may name another: the
    forked command then simply uses that one's Redis), or None when there is none."""
    given = os.environ.get("GAMEBATCH_STATE_DIR")
    if given is not None:
        return given or None
    base = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return os.path.join(base, "gamebatch")


def fingerprint() -> str:
    """What the loaded code depends on: the interpreter, the module path (less the script's
    own folder), and the place, size and time of every file of our packages (a new version
    makes a new service)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
    parts = [sys.executable, sys.version, root, *sys.path[1:]]
    for folder in sys.path[1:]:
        try:
            parts.append(str(os.stat(folder or ".").st_mtime_ns))  # a plugin installed
        except OSError:
            parts.append("-")
    for package in PACKAGES:
        for folder, subfolders, names in os.walk(os.path.join(root, package)):
            subfolders[:] = sorted(d for d in subfolders if d != "__pycache__")
            for name in sorted(names):
                path = os.path.join(folder, name)
                try:
                    info = os.stat(path)
                except OSError:
                    continue
                parts.append(f"{path[len(root) + 1 :]}:{info.st_size}:{info.st_mtime_ns}")
    return "\n".join(parts)


def spawn(folder: str, seconds: int) -> None:
    """Start the service for `folder` in the background (it outlives this command)."""
    import subprocess

    with open(os.path.join(folder, LOG_NAME), "ab") as log:
        subprocess.Popen(
            [sys.executable, "-m", "pipeline.launch", WARM_SERVICE, folder, str(seconds)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
            cwd="/",
            close_fds=True,
        )


def run(argv: list[str]) -> int | None:
    """The command's exit status, run by the warm service; None when no service took it
    (then nothing of it has run, and the caller runs it itself)."""
    if os.environ.get("GAMEBATCH_WARM_SECONDS", "").strip() == "0":
        return None
    folder = state_folder()
    command = next((a for a in argv if not a.startswith("-")), None)
    if folder is None or command is None or command in NOT_WARM:
        return None
    conn = _connect(os.path.join(folder, SOCKET_NAME))
    if conn is None:
        return None
    with conn:
        return _converse(conn, argv)


def _connect(path: str) -> socket.socket | None:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(path)
        if peer_uid(conn) != os.getuid():
            raise OSError("the warm service belongs to another user")
    except OSError:
        conn.close()
        return None
    return conn


def peer_uid(conn: socket.socket) -> int:
    """The user id of the process at the other end of a Unix socket."""
    return _peer(conn)[1]


def _peer(conn: socket.socket) -> tuple[int, int, int]:
    """The pid, user id and group id of the process at the other end of a Unix socket."""
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, gid = struct.unpack("3i", creds)
    return int(pid), int(uid), int(gid)


# What a forked command inherits from the service, not from its caller: the caller must have
# the same, or it runs the command itself (a caller with fewer capabilities, other groups or
# in another namespace must not borrow the service's).
_CREDENTIALS = (
    "Uid",
    "Gid",
    "Groups",
    "CapInh",
    "CapPrm",
    "CapEff",
    "CapBnd",
    "CapAmb",
    "NoNewPrivs",
    "Seccomp",
)
_NAMESPACES = ("user", "mnt", "pid", "net", "ipc", "uts", "cgroup", "time")


def credentials(pid: int | str) -> dict[str, str] | None:
    """A process's user and group ids, capabilities, and namespaces (None when it is gone)."""
    found: dict[str, str] = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            name, _, value = line.partition(":")
            if name in _CREDENTIALS:
                found[name] = " ".join(value.split())
        for space in _NAMESPACES:
            with contextlib.suppress(FileNotFoundError):  # a kernel without that namespace
                found[f"ns/{space}"] = os.readlink(f"/proc/{pid}/ns/{space}")
    except OSError:
        return None
    return found


def same_credentials(conn: socket.socket) -> bool:
    """Whether the peer runs with exactly this process's credentials and namespaces."""
    mine = credentials("self")
    return mine is not None and credentials(_peer(conn)[0]) == mine


def _converse(conn: socket.socket, argv: list[str]) -> int | None:
    streams = [sys.stdin, sys.stdout, sys.stderr]
    try:
        cwd = os.getcwd()
    except OSError:
        return None  # a folder removed under us: let the command say what it makes of that
    request = {
        "argv": argv,
        "cwd": cwd,
        "env": dict(os.environ),
        "umask": _umask(),
        "limits": {name: resource.getrlimit(getattr(resource, name)) for name in LIMITS},
        "fingerprint": fingerprint(),
        "streams": [_stream_options(s) for s in streams],
    }
    body = json.dumps(request).encode()
    caught: list[int] = []  # taken from the start: the service may fork at once
    sent: list[bool] = []  # once the request is whole, a signal follows it at once

    def pass_on(signum: int, _frame: object) -> None:
        caught.append(signum)
        if sent:
            _pass_on(conn, signum)

    previous = {sig: signal.signal(sig, pass_on) for sig in _FORWARDED}
    try:
        status = _forked_status(conn, body, sent, caught)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if status is False:  # nothing was forked: the signals are this process's again
        for signum in caught:
            signal.raise_signal(signum)
        return None
    if status is None:
        print(
            "gamebatch: error: the command's process ended without an exit status", file=sys.stderr
        )
        return 1
    return status


def _forked_status(
    conn: socket.socket, body: bytes, sent: list[bool], caught: list[int]
) -> int | bool | None:
    """Send the request, then the signals caught meanwhile (one may go twice: the command
    takes only the first); the forked command's exit status, None when it ended without
    one, False when the service forked nothing."""
    try:
        fds = array.array("i", [0, 1, 2])
        conn.sendmsg([_STATUS.pack(len(body)), body], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
        sent.append(True)
        for signum in list(caught):
            _pass_on(conn, signum)
        reply = conn.recv(_STATUS.size)
    except OSError:
        return False  # the service is going away: run here
    if len(reply) < _STATUS.size or _STATUS.unpack(reply)[0] <= 0:
        return False  # stale (another version of the code), or closed before forking
    return _read_status(conn)


def _pass_on(conn: socket.socket, signum: int) -> None:
    with contextlib.suppress(OSError):
        conn.sendall(bytes([signum]))


def _read_status(conn: socket.socket) -> int | None:
    data = b""
    while len(data) < _STATUS.size:
        try:
            more = conn.recv(_STATUS.size - len(data))
        except OSError:
            return None
        if not more:
            return None
        data += more
    return int(_STATUS.unpack(data)[0])


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _stream_options(stream: object) -> dict[str, object] | None:
    """How Python set up this standard stream, so the forked process sets up its own alike."""
    if stream is None:
        return None
    return {
        "encoding": getattr(stream, "encoding", "utf-8"),
        "errors": getattr(stream, "errors", "strict"),
        "line_buffering": bool(getattr(stream, "line_buffering", False)),
    }
