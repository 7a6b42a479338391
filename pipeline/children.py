"""Child processes: tied to their parent however it dies, and stopped without ever
signalling a stranger (a reaped child's pid may be reused)."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import time
from collections.abc import Callable

STOP_TIMEOUT = 15.0
_PR_SET_PDEATHSIG = 1


def tie_to_parent(sig: int = signal.SIGKILL, parent: int | None = None) -> None:
    """In a child: receive `sig` when the parent dies. With `parent` (its pid), exit at once
    when it died before the signal was set up (the child was re-parented meanwhile)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, sig)
    if parent is not None and os.getppid() != parent:
        os._exit(1)


def before_exec(sig: int) -> Callable[[], None]:
    """A `preexec_fn` for subprocess.Popen that ties the child to this process."""
    parent = os.getpid()
    return lambda: tie_to_parent(sig, parent)


def terminate(process: subprocess.Popen[bytes], grace: float = STOP_TIMEOUT) -> None:
    """SIGTERM the child's process group, then SIGKILL it after `grace` seconds.

    The group is signalled only while its leader is not reaped: until then its id cannot be
    reused, so the signal can never reach another program's processes.
    """
    if process.returncode is not None:
        return  # reaped already: the id may belong to someone else by now
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and not exited(process.pid):
        time.sleep(0.02)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)  # pool children too
    process.wait()


def exited(pid: int) -> bool:
    """Whether a child has exited, without reaping it (so its id stays reserved)."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return info is not None
