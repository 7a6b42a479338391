"""SIGKILL of any process the CLI starts: 5 s later nothing it started is alive, nothing leaks."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from pipeline.games.registry import get_problem
from pipeline.local.redis_server import RedisServer
from tests.helpers import command_env, input_text, random_cases

pytestmark = pytest.mark.integration

GRACE = 5.0  # seconds within which every descendant must be gone


def _processes() -> dict[int, tuple[int, int, str]]:
    """pid -> (parent pid, start time, command line) of every process."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        found[int(entry.name)] = (int(fields[1]), int(fields[19]), cmdline)
    return found


def _tree(root: int) -> dict[int, tuple[int, str]]:
    """The descendants of `root`: pid -> (start time, command line)."""
    table = _processes()
    tree, frontier = {}, [root]
    while frontier:
        parent = frontier.pop()
        for pid, (ppid, started, cmdline) in table.items():
            if ppid == parent and pid not in tree:
                tree[pid] = (started, cmdline)
                frontier.append(pid)
    return tree


def _kill_and_check(
    process: subprocess.Popen[bytes], kinds: dict[str, Callable[[str], bool]], timeout: float = 60
) -> None:
    """Wait until the process has a child of every kind, SIGKILL it, check none outlives it."""
    deadline = time.monotonic() + timeout
    try:
        while True:
            tree = _tree(process.pid)
            missing = [k for k, test in kinds.items() if not any(test(c) for _, c in tree.values())]
            if not missing:
                break
            assert process.poll() is None, f"it ended before starting {missing}"
            assert time.monotonic() < deadline, f"no {missing} among {sorted(tree.values())}"
            time.sleep(0.05)
    except AssertionError:  # leave nothing running behind a failed test
        left = _tree(process.pid)  # before it dies: then its children are re-parented
        process.kill()  # first, so that a supervisor starts nothing again
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        raise
    process.kill()
    process.wait()
    deadline = time.monotonic() + GRACE
    while True:
        table = _processes()
        alive = [
            cmd
            for pid, (started, cmd) in tree.items()
            if pid in table and table[pid][1] == started and not _zombie(pid)
        ]
        if not alive:
            return
        assert time.monotonic() < deadline, f"alive {GRACE:g} s after SIGKILL: {alive}"
        time.sleep(0.1)


def _zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rindex(")") + 2] == "Z"


def _is(*words: str) -> Callable[[str], bool]:
    return lambda cmdline: all(w in cmdline for w in words)


REDIS = _is("redis-server")


def _celery(cmdline: str) -> bool:
    """A Celery worker process (`workers.start`, or Celery's own command line)."""
    return "workers.start" in cmdline or ("celery" in cmdline and "worker" in cmdline)


CELERY = _celery

PRODUCER = _is("multiprocessing.spawn", "spawn_main")


def _celery_processes(root: subprocess.Popen[bytes], count: int) -> Callable[[str], bool]:
    """True once `root` has `count` Celery processes (the worker and its pool processes,
    which share its command line)."""
    return lambda _: sum(CELERY(c) for _, c in _tree(root.pid).values()) >= count


def _inputs(folder: Path, count: int = 2, cases: int = 3000) -> list[str]:
    problem = get_problem("strgame")
    paths = []
    for i in range(count):
        path = folder / f"{i}.in"
        path.write_text(input_text(problem, random_cases(problem, "random", cases, 200, seed=i)))
        paths.append(str(path))
    return paths


def _start(args: list[str], tmp_path: Path, **env: str) -> subprocess.Popen[bytes]:
    """The command, its output (and that of anything it leaves behind) in tmp_path/stderr."""
    (tmp_path / "tmp").mkdir(exist_ok=True)
    with (tmp_path / "stderr").open("ab") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "pipeline.cli", *args],
            stdout=subprocess.DEVNULL,
            stderr=err,
            start_new_session=True,
            env=command_env(
                TMPDIR=str(tmp_path / "tmp"),
                GAMEBATCH_CHUNK__MAX_CASES="1",
                GAMEBATCH_CHUNK__ALONE_BYTES="0",  # workers start: they are what is left
                # answers kept from an earlier test of this process would leave nothing to
                # start workers for (a second `grade` of the same tests takes 0.5 s)
                GAMEBATCH_STATE_DIR=str(tmp_path / "state"),
                **env,
            ),
        )


def test_solve_on_the_embedded_default(tmp_path: Path) -> None:
    out = tmp_path / "out"
    solve = _start(
        [
            "solve",
            "-q",
            "-p",
            "strgame",
            *_inputs(tmp_path),
            "--out-dir",
            str(out),
            "--producers",
            "2",
            "--workers",
            "2",
        ],
        tmp_path,
        GAMEBATCH_CHUNK__WINDOW="1",
    )
    kinds = {"redis": REDIS, "producer": PRODUCER, "pool": _celery_processes(solve, 3)}
    _kill_and_check(solve, kinds)
    # the next command removes the dead one's temporary folder
    status = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "status"],
        capture_output=True,
        env=command_env(TMPDIR=str(tmp_path / "tmp")),
        check=False,
    )
    assert status.returncode == 0, status.stderr
    assert list((tmp_path / "tmp").iterdir()) == []
    assert not out.exists() or list(out.iterdir()) == []
    assert "leaked" not in (tmp_path / "stderr").read_text()  # no semaphores left over


def test_solve_with_a_broker_and_producer_processes(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    solve = _start(
        [
            "solve",
            "-q",
            "-p",
            "strgame",
            *_inputs(tmp_path),
            "--out-dir",
            str(tmp_path / "out"),
            "--producers",
            "2",
            "--broker",
            redis_server.url,
        ],
        tmp_path,
        GAMEBATCH_CHUNK__WINDOW="1",
    )
    _kill_and_check(solve, {"producer": PRODUCER})


def test_worker(tmp_path: Path, redis_server: RedisServer) -> None:
    worker = _start(["worker", "--concurrency", "2", "--broker", redis_server.url], tmp_path)
    _kill_and_check(worker, {"pool": _celery_processes(worker, 3)})


def test_stress_with_a_program(tmp_path: Path) -> None:
    slow = tmp_path / "slow.sh"
    slow.write_text("#!/bin/sh\nexec sleep 600\n")
    slow.chmod(0o755)
    stress = _start(["stress", "-p", "strgame", "--program", str(slow)], tmp_path)
    _kill_and_check(stress, {"program": _is("sleep", "600")})


def test_grade_on_the_embedded_default(tmp_path: Path) -> None:
    tests, subs = tmp_path / "tests", tmp_path / "subs" / "alice"
    tests.mkdir()
    subs.mkdir(parents=True)
    for i, path in enumerate(_inputs(tmp_path, cases=6000)):
        os.replace(path, tests / f"{i}.in")
    grade = _start(
        ["grade", "-q", "-p", "strgame", "--tests", str(tests), "--submissions", str(subs.parent)],
        tmp_path,
    )
    _kill_and_check(grade, {"redis": REDIS, "celery": CELERY})
