"""Children that die with their parent, however it dies (Linux's parent-death signal)."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
from collections.abc import Callable

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
