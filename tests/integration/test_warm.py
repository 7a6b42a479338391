"""The warm local service: commands forked from it behave as if run by the caller, and it
goes away (with its Redis) when idle, when the code changes, or when told to stop."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline.games.registry import get_problem
from pipeline.local.warm import SOCKET_NAME
from tests.conftest import run_reference
from tests.helpers import answers, command_env, input_text, random_cases


class Warm:
    """A state folder whose commands leave a warm service behind."""

    def __init__(self, folder: Path, seconds: int = 60) -> None:
        self.folder = folder
        self.env = command_env(GAMEBATCH_STATE_DIR=str(folder), GAMEBATCH_WARM_SECONDS=str(seconds))

    def command(self, *args: str, cwd: Path | None = None, **env: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "pipeline.launch", *args],
            cwd=cwd,
            env={**self.env, **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def run(self, *args: str, **kw: object) -> tuple[int, str, str]:
        process = self.command(*args, **kw)  # type: ignore[arg-type]
        out, err = process.communicate(timeout=120)
        return process.returncode, out, err

    def log(self) -> str:
        path = self.folder / "warm.log"
        return path.read_text() if path.exists() else ""

    def commands_run(self) -> int:
        return len(re.findall(r"command \d+ ended", self.log()))

    def service_pids(self) -> list[int]:
        return [int(pid) for pid in re.findall(r"warm service (\d+): serving", self.log())]

    def wait_until_serving(self, count: int = 1) -> int:
        """The pid of the `count`th service once it listens."""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            pids = self.service_pids()
            if len(pids) >= count and (self.folder / SOCKET_NAME).exists():
                return pids[count - 1]
            time.sleep(0.05)
        raise AssertionError(f"no warm service started:\n{self.log()}")

    def wait_for_commands(self, count: int) -> None:
        deadline = time.monotonic() + 10
        while self.commands_run() < count:
            assert time.monotonic() < deadline, f"the service ran {self.commands_run()}"
            time.sleep(0.05)

    def redis_pid(self) -> int:
        return int((self.folder / "redis" / "redis.pid").read_text())


@pytest.fixture
def warm(tmp_path: Path) -> Iterator[Warm]:
    state = Warm(tmp_path / "state")
    yield state
    for pid in state.service_pids():  # whatever happened, nothing is left running
        if not _gone(pid):
            os.kill(pid, signal.SIGTERM)
            _wait_gone(pid)


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"


def _wait_gone(pid: int, seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while not _gone(pid):
        assert time.monotonic() < deadline, f"process {pid} is still running"
        time.sleep(0.05)


def test_a_command_in_the_warm_service_behaves_as_if_run_here(
    warm: Warm, tmp_path: Path, reference: dict[str, Path]
) -> None:
    problem = get_problem("strgame")
    text = input_text(problem, random_cases(problem, "random", 40, 12, seed=3))
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.in").write_text(text)
    (work / "bad.in").write_text("2\n1 1\na\n1 1\nB\n")
    status, _, err = warm.run("solve", "-q", "-p", "strgame", "a.in", "-o", "first.out", cwd=work)
    assert status == 0, err
    warm.wait_until_serving()
    expected = run_reference(reference["strgame"], text)

    # a relative path from the caller's folder, the answers on its standard output
    (work / "b.in").write_text(text + "\n")  # another input: solved, not found cached
    status, out, err = warm.run("solve", "-q", "-p", "strgame", "b.in", cwd=work)
    assert (status, out) == (0, expected), err
    # bad input: one line, exit status 2, no result file, through the service too
    status, out, err = warm.run("solve", "-q", "-p", "strgame", "bad.in", "-o", "bad.out", cwd=work)
    assert status == 2 and out == ""
    assert err.splitlines() == [
        "gamebatch: error: bad.in:5: case 2: string 1 of 1 has 'B' at position 1:"
        " only lowercase letters a-z are allowed"
    ]
    assert not (work / "bad.out").exists()
    # the caller's environment, not the service's
    status, out, _ = warm.run("config", "show", GAMEBATCH_RESULT_TTL="4321")
    assert status == 0 and "result_ttl: 4321" in out
    warm.wait_for_commands(3)
    assert (work / "first.out").read_text() == expected
    assert len(warm.service_pids()) == 1


def test_the_callers_limits_hold_in_the_service(warm: Warm, tmp_path: Path) -> None:
    problem = get_problem("pathgame")
    path = tmp_path / "p.in"
    path.write_text(input_text(problem, random_cases(problem, "random", 600, 6, seed=2)))
    assert warm.run("solve", "-q", "-p", "pathgame", str(path))[0] == 0
    warm.wait_until_serving()
    script = f'ulimit -f 1; exec "{sys.executable}" -m pipeline.launch solve -q -p pathgame {path}'

    def limited(out: Path, **env: str) -> tuple[int, str]:  # results over 1 KiB cannot be written
        done = subprocess.run(
            ["bash", "-c", f"{script} -o {out}"],
            env={**warm.env, **env},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        return done.returncode, done.stderr.replace(str(out), "OUT")

    before = warm.commands_run()
    here = limited(tmp_path / "here.out", GAMEBATCH_WARM_SECONDS="0")
    there = limited(tmp_path / "there.out")
    assert here == there and here[0] == 1 and "File too large" in here[1], (here, there)
    warm.wait_for_commands(before + 1)
    assert not (tmp_path / "here.out").exists() and not (tmp_path / "there.out").exists()


def test_the_socket_is_the_owners_and_the_callers_umask_holds(warm: Warm, tmp_path: Path) -> None:
    """Only the folder's user may connect (the socket is 0600); a result written by the
    service for a caller gets the mode the caller's umask gives."""
    path = tmp_path / "x.in"
    path.write_text("1\n1 1\na\n")
    assert warm.run("solve", "-q", "-p", "strgame", str(path))[0] == 0
    warm.wait_until_serving()
    assert stat.S_IMODE((warm.folder / SOCKET_NAME).stat().st_mode) == 0o600
    before = warm.commands_run()
    for mask, mode in (("077", 0o600), ("022", 0o644)):
        out = tmp_path / f"{mask}.out"
        script = f'umask {mask}; exec "{sys.executable}" -m pipeline.launch solve -q -p strgame'
        done = subprocess.run(
            ["bash", "-c", f"{script} {path} -o {out}"],
            env=warm.env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert stat.S_IMODE(out.stat().st_mode) == mode, (mask, oct(out.stat().st_mode))
    warm.wait_for_commands(before + 2)  # both ran in the service


def test_signals_reach_the_command_and_a_killed_caller_stops_it(warm: Warm, tmp_path: Path) -> None:
    small = tmp_path / "small.in"
    small.write_text("1\n1 1\na\n")
    assert warm.run("solve", "-q", "-p", "strgame", str(small))[0] == 0
    warm.wait_until_serving()
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # a result written to it waits for a reader that never comes
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
        before = warm.commands_run()
        process = warm.command("solve", "-q", "-p", "strgame", str(small), "-o", str(fifo))
        time.sleep(0.5)
        assert process.poll() is None, process.communicate()
        process.send_signal(sig)
        _, err = process.communicate(timeout=60)
        if sig != signal.SIGKILL:
            assert process.returncode == 130 and err == "gamebatch: interrupted\n", err
        warm.wait_for_commands(before + 1)  # the forked command stopped as well
        assert warm.log().splitlines()[-1].endswith("ended, status 130")


def test_a_signal_that_comes_as_soon_as_the_command_is_forked_interrupts_it(
    warm: Warm, tmp_path: Path
) -> None:
    """The caller passes a signal on before the forked command set its own handlers (under
    load that takes a while): the command is interrupted all the same, with its status. Every
    other time the service itself is held while its child runs, so the child is done before
    the service gets the processor back: what the caller reads is still the child's status."""
    small = tmp_path / "small.in"
    small.write_text("1\n1 1\na\n")
    assert warm.run("solve", "-q", "-p", "strgame", str(small))[0] == 0
    service = warm.wait_until_serving()
    children = Path(f"/proc/{service}/task/{service}/children")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for held, sig in enumerate((signal.SIGINT, signal.SIGTERM) * 3):
        before = warm.commands_run()
        known = set(children.read_text().split())
        process = warm.command("solve", "-q", "-p", "strgame", str(small), "-o", str(fifo))
        deadline = time.monotonic() + 30
        while not (forked := set(children.read_text().split()) - known):  # signal it at once
            assert time.monotonic() < deadline and process.poll() is None
            time.sleep(0.001)
        if held % 2:
            os.kill(service, signal.SIGSTOP)
        try:
            process.send_signal(sig)
            if held % 2:
                _wait_gone(int(forked.pop()))  # a zombie: its parent is held
        finally:
            os.kill(service, signal.SIGCONT)
        _, err = process.communicate(timeout=60)
        assert process.returncode == 130 and err == "gamebatch: interrupted\n", (err, warm.log())
        warm.wait_for_commands(before + 1)


def test_the_service_stops_when_idle_or_when_another_version_asks(tmp_path: Path) -> None:
    problem = get_problem("pathgame")
    path = tmp_path / "p.in"
    path.write_text(input_text(problem, random_cases(problem, "random", 5, 8, seed=1)))
    quick = Warm(tmp_path / "quick", seconds=2)
    assert quick.run("solve", "-q", "-p", "pathgame", str(path))[0] == 0
    pid = quick.wait_until_serving()
    redis = quick.redis_pid()
    _wait_gone(pid, seconds=20)  # idle for 2 s
    assert _gone(redis) and not (quick.folder / SOCKET_NAME).exists()
    assert "idle: stopping" in quick.log()

    other = Warm(tmp_path / "other")
    status, first, _ = other.run("solve", "-q", "-p", "pathgame", str(path))
    pid = other.wait_until_serving()
    # a caller whose code differs (another module path) runs the command itself
    status, again, err = other.run(
        "solve", "-q", "-p", "pathgame", str(path), PYTHONPATH=str(tmp_path)
    )
    assert (status, again) == (0, first), err
    _wait_gone(pid)
    assert "another version of the code asked" in other.log()
    assert other.commands_run() == 0
    second = other.wait_until_serving(2)  # the caller, owning the Redis, left a new one
    os.kill(second, signal.SIGTERM)
    _wait_gone(second)
    assert not (other.folder / SOCKET_NAME).exists()


@pytest.mark.parametrize("replaced", [False, True])
def test_the_service_stops_when_its_state_folder_is_deleted(
    warm: Warm, tmp_path: Path, replaced: bool
) -> None:
    """A state folder deleted (or deleted and made again) leaves nothing of its service
    running: neither it, nor its Redis, nor its workers."""
    path = tmp_path / "x.in"
    path.write_text("1\n1 1\na\n")
    assert warm.run("solve", "-q", "-p", "strgame", str(path))[0] == 0
    pid = warm.wait_until_serving()
    redis = warm.redis_pid()
    log = (warm.folder / "warm.log").open()  # kept open: the file goes with the folder
    shutil.rmtree(warm.folder)
    if replaced:
        warm.folder.mkdir()
        (warm.folder / SOCKET_NAME).write_text("another service's")
    _wait_gone(pid, seconds=10)
    assert _gone(redis)
    assert "state folder was deleted or replaced" in log.read()
    log.close()
    if replaced:
        assert (warm.folder / SOCKET_NAME).read_text() == "another service's"


@pytest.mark.skipif(os.getuid() != 0 or not shutil.which("setpriv"), reason="root, setpriv")
def test_a_caller_with_fewer_capabilities_runs_its_own_command(warm: Warm, tmp_path: Path) -> None:
    """A caller without CAP_DAC_OVERRIDE cannot read a file of mode 000, and the service,
    which can, does not read it for that caller: the caller runs the command itself."""
    readable, secret = tmp_path / "x.in", tmp_path / "secret.in"
    readable.write_text("1\n1 1\na\n")
    secret.write_text("1\n1 1\nab\n")
    secret.chmod(0)
    assert warm.run("solve", "-q", "-p", "strgame", str(readable))[0] == 0
    warm.wait_until_serving()
    weaker = subprocess.run(
        [
            "setpriv",
            "--bounding-set=-dac_override,-dac_read_search",
            sys.executable,
            "-m",
            "pipeline.launch",
            "solve",
            "-q",
            "-p",
            "strgame",
            str(secret),
        ],
        env=warm.env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert weaker.returncode == 2 and "Permission denied" in weaker.stderr, weaker.stderr
    assert weaker.stdout == ""
    assert "a caller with other credentials" in warm.log()
    assert warm.commands_run() == 0  # the first solve was the one that left the service
    assert warm.run("solve", "-q", "-p", "strgame", str(readable)) == (0, "Pure\n", "")
    warm.wait_for_commands(1)  # a caller like the service is still served


def test_no_service_is_left_when_warm_seconds_is_zero(tmp_path: Path) -> None:
    cold = Warm(tmp_path / "state", seconds=0)
    path = tmp_path / "x.in"
    path.write_text("1\n1 1\na\n")
    assert cold.run("solve", "-q", "-p", "strgame", str(path)) == (0, "Pure\n", "")
    time.sleep(1.0)
    assert cold.log() == "" and not (cold.folder / SOCKET_NAME).exists()


@pytest.mark.parametrize("unbuffered", ["1", ""])
def test_a_command_run_here_ends_with_its_output_whole_and_its_status(
    tmp_path: Path, unbuffered: str
) -> None:
    """Without a service the command runs in the caller's process, which ends at once when
    it is done (no interpreter teardown): standard output still has every line, errors and
    statuses are those of the command, and a reader that leaves early makes it exit 1, with
    no traceback; the same with an unbuffered standard output (PYTHONUNBUFFERED), whose text
    layer would drop what a short write did not take."""
    cold = Warm(tmp_path / "state", seconds=0)
    cold.env["PYTHONUNBUFFERED"] = unbuffered
    problem = get_problem("pathgame")
    path, bad = tmp_path / "x.in", tmp_path / "bad.in"
    path.write_text(input_text(problem, random_cases(problem, "small", 40000, 8, seed=5)))
    bad.write_text("2\n1\n#\n")
    status, out, err = cold.run("solve", "-q", "-p", "pathgame", str(path))
    assert (status, err) == (0, "") and out == answers(problem, path.read_text())
    assert len(out) > 200_000  # more than a pipe holds
    status, nothing, err = cold.run("solve", "-q", "-p", "pathgame", str(bad))
    assert (status, nothing) == (2, "") and err.startswith(f"gamebatch: error: {bad}:")
    assert err.count("\n") == 1
    for command in ("pipeline.launch", "pipeline.cli"):
        reader = subprocess.run(
            f'"{sys.executable}" -m {command} solve -q -p pathgame {path} | (sleep 0.5;'
            ' head -c 10); echo " ${PIPESTATUS[0]}"',
            shell=True,
            executable="/bin/bash",
            env=cold.env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert reader.stdout == out[:10] + " 1\n" and reader.stderr == "", reader.stderr


def test_the_service_keeps_the_workers_for_the_next_command_with_the_same_settings(
    warm: Warm, tmp_path: Path
) -> None:
    problem = get_problem("pathgame")
    inputs = []
    small = {  # many chunks: workers take some
        "GAMEBATCH_CHUNK__TARGET_WORK": "20000",
        "GAMEBATCH_CHUNK__PLACE_SCALE": "1",
        "GAMEBATCH_CHUNK__ALONE_BYTES": "0",  # workers start for any input over local_bytes
    }
    for seed in range(3):  # more than chunk.local_bytes: not solved by the command alone
        path = tmp_path / f"p{seed}.in"
        path.write_text(input_text(problem, random_cases(problem, "random", 400, 1000, seed)))
        inputs.append(path)
    expected = [answers(problem, path.read_text()) for path in inputs]
    status, out, err = warm.run("solve", "-q", "-p", "pathgame", str(inputs[0]), **small)
    assert (status, out) == (0, expected[0]), err
    service = warm.wait_until_serving()
    live = json.loads((warm.folder / "warm-workers.live").read_text())
    kept = warm.folder / "warm-workers.log"
    deadline = time.monotonic() + 30  # a command does not wait for them: it solves meanwhile
    while "ready." not in kept.read_text(errors="replace"):
        assert time.monotonic() < deadline, "the kept workers did not start"
        time.sleep(0.05)

    status, out, err = warm.run("solve", "-q", "-p", "pathgame", str(inputs[1]), **small)
    assert (status, out) == (0, expected[1]), err
    assert kept.read_text().count(" received") >= 1  # the kept workers took some of it
    assert not _gone(live["pid"])

    # other settings for the workers: the command starts its own beside them
    status, out, err = warm.run(
        "solve", "-q", "-p", "pathgame", str(inputs[2]), GAMEBATCH_MAX_ATTEMPTS="7", **small
    )
    assert (status, out) == (0, expected[2]), err

    os.kill(service, signal.SIGTERM)  # the service takes its workers with it
    _wait_gone(service)
    _wait_gone(live["pid"])
    assert not (warm.folder / "warm-workers.live").exists()
