"""A producer's claim names its process: a process of this host that is gone, or a zombie
that no one reaps, lets another producer take the job over at once."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

from pipeline.data.producer import _died_here


def _holder(pid: int) -> str:
    return f"{socket.gethostname()}:{pid}:token"


def test_a_zombie_producer_is_gone_and_a_live_one_is_not() -> None:
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        deadline = time.monotonic() + 10
        while os.waitid(os.P_PID, ended.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert _died_here(_holder(ended.pid))  # exited, not reaped: a zombie
        assert not _died_here(_holder(live.pid))
        assert not _died_here(f"another-host:{ended.pid}:token")
    finally:
        live.kill()
        live.wait()
        ended.wait()
    assert _died_here(_holder(ended.pid))  # reaped: no such process
