"""The embedded default: one Redis per state folder, shared by the commands that use it."""

from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from pipeline.errors import GamebatchError
from pipeline.games.registry import get_problem
from pipeline.local.cluster import EmbeddedCluster, StateDir
from pipeline.local.redis_server import RedisServer, free_port
from tests.helpers import answers, command_env, input_text, random_cases


def test_the_owner_waits_for_every_other_user_before_stopping(tmp_path: Path) -> None:
    owner, other = StateDir(tmp_path), StateDir(tmp_path)
    assert owner.try_lock() and not other.try_lock()
    other.join()
    stopped = threading.Event()

    def stop() -> None:
        owner.wait_for_other_users()
        stopped.set()

    threading.Thread(target=stop, daemon=True).start()
    assert not stopped.wait(0.5), "the owner did not wait for the other command"
    other.leave()
    assert stopped.wait(5)
    owner.unlock()
    assert other.try_lock(), "the folder could not be owned again"
    other.unlock()


def test_a_port_taken_between_its_choice_and_the_start_is_replaced(tmp_path: Path) -> None:
    """Another process binds the chosen port first: the embedded Redis starts on another;
    a port the caller named is not replaced, it is a one-line error."""
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    assert all(free_port() < low for _ in range(20))  # never a connection's own end
    server = RedisServer(tmp_path / "chosen")
    taken = server.port
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", taken))
        squatter.listen()
        with server:
            assert server.port != taken and server.process is not None
        named = RedisServer(tmp_path / "named", port=taken)
        with pytest.raises(GamebatchError, match="did not start"):
            named.start()
        assert named.process is None
    # started once, a server keeps its port when started again: its clients know that one
    try:
        with socket.socket() as squatter:
            squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # closed ones wait
            squatter.bind(("127.0.0.1", server.port))
            squatter.listen()
            with pytest.raises(GamebatchError, match="did not start"):
                server.start()
    finally:
        server.stop()  # when it did start elsewhere


def test_password_and_config_files_are_private(tmp_path: Path) -> None:
    with EmbeddedCluster(0, state=tmp_path / "state") as local:
        assert local.persistent
        for name in ("password", "redis/redis.conf"):
            mode = stat.S_IMODE((tmp_path / "state" / name).stat().st_mode)
            assert mode == 0o600, f"{name} is {oct(mode)}"
        assert stat.S_IMODE((tmp_path / "state" / "redis").stat().st_mode) == 0o700
        password = (tmp_path / "state" / "password").read_text().strip()
        listed = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True)
        assert password not in listed.stdout, "the password is on a command line"


@pytest.mark.integration
def test_a_command_attached_to_another_ones_redis_outlives_it(tmp_path: Path) -> None:
    problem = get_problem("strgame")
    small, big = tmp_path / "small.in", tmp_path / "big.in"
    small.write_text("1\n1 1\na\n")
    big.write_text(input_text(problem, random_cases(problem, "random", 20000, 300, seed=4)))
    env = command_env(GAMEBATCH_STATE_DIR=str(tmp_path / "state"))

    def solve(path: Path, *extra: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "pipeline.cli",
                "solve",
                "-q",
                "-p",
                "strgame",
                str(path),
                "-o",
                f"{path}.out",
                *extra,
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    fifo = tmp_path / "first.out"
    os.mkfifo(fifo)  # the first command writes its result there: it waits for a reader
    first = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pipeline.cli",
            "solve",
            "-q",
            "-p",
            "strgame",
            str(small),
            "-o",
            str(fifo),
            "--workers",
            "1",
        ],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:  # it owns the folder's Redis until its result is read
        port = tmp_path / "state" / "port"
        deadline = time.monotonic() + 30
        while not port.exists():
            assert first.poll() is None and time.monotonic() < deadline
            time.sleep(0.02)
        second = solve(big, "--workers", "1")  # attaches to it
        _, err = second.communicate(timeout=300)
        assert second.returncode == 0, err
        assert Path(f"{big}.out").read_text() == answers(problem, big.read_text())
        assert first.poll() is None, "the owner ended before the command attached to it"
        assert fifo.read_text() == answers(problem, small.read_text())
        _, err = first.communicate(timeout=60)
        assert first.returncode == 0, err
    finally:
        if first.poll() is None:
            first.kill()
        first.communicate()


@pytest.mark.parametrize("interrupt", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_owner_keeps_redis_for_the_command_attached_to_it(
    tmp_path: Path, interrupt: signal.Signals
) -> None:
    """The owner of the folder's Redis, interrupted while it waits for an attached command,
    lets that command finish with its exact answers before it stops the server."""
    problem = get_problem("strgame")
    env = command_env(GAMEBATCH_STATE_DIR=str(tmp_path / "state"), GAMEBATCH_WARM_SECONDS="0")
    commands = {}
    for name, text in (("owner", "1\n1 1\na\n"), ("attached", "2\n1 1\nab\n2 1\nab\nb\n")):
        (tmp_path / f"{name}.in").write_text(text)
        os.mkfifo(tmp_path / f"{name}.out")  # each writes its result there: it waits for a reader
    try:
        for name in ("owner", "attached"):
            commands[name] = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "pipeline.cli",
                    "solve",
                    "-q",
                    "-p",
                    "strgame",
                    str(tmp_path / f"{name}.in"),
                    "-o",
                    str(tmp_path / f"{name}.out"),
                    "--workers",
                    "1",
                ],
                env=env,
                stderr=subprocess.PIPE,
                text=True,
            )
            deadline = time.monotonic() + 30
            while not (tmp_path / "state" / "port").exists():
                assert commands[name].poll() is None and time.monotonic() < deadline
                time.sleep(0.02)
        users = tmp_path / "state" / "users"
        _wait_for_lock(users, "READ", commands["attached"].pid)  # the second has attached
        assert (tmp_path / "owner.out").read_text() == answers(problem, "1\n1 1\na\n")
        _wait_for_lock(users, "WRITE", commands["owner"].pid)  # the owner waits for it now
        commands["owner"].send_signal(interrupt)
        time.sleep(1.0)
        assert commands["owner"].poll() is None, "the owner stopped under the attached command"
        attached = (tmp_path / "attached.out").read_text()
        assert attached == answers(problem, (tmp_path / "attached.in").read_text())
        _, err = commands["attached"].communicate(timeout=60)
        assert commands["attached"].returncode == 0, err
        _, err = commands["owner"].communicate(timeout=60)
        assert "waiting for the other commands" in err and "Traceback" not in err, err
    finally:
        for command in commands.values():
            if command.poll() is None:
                command.kill()
            command.communicate()


def _wait_for_lock(path: Path, kind: str, pid: int, timeout: float = 30) -> None:
    """Until process `pid` holds (READ) or waits for (WRITE) a flock of `path`, as
    /proc/locks says: what a command does with the state folder's users file, seen
    without guessing how long it takes on a busy machine."""
    inode = f":{path.stat().st_ino} " if path.exists() else None
    deadline = time.monotonic() + timeout
    while True:
        if inode is None and path.exists():
            inode = f":{path.stat().st_ino} "
        locks = Path("/proc/locks").read_text().splitlines()
        if inode and any(
            f" {kind} " in line and f" {pid} " in line and inode in line for line in locks
        ):
            return
        assert time.monotonic() < deadline, f"process {pid} took no {kind} lock of {path}"
        time.sleep(0.02)


def test_only_our_own_dead_commands_folders_are_swept(tmp_path: Path) -> None:
    base = tmp_path / "tmp"
    base.mkdir()
    foreign = base / "gamebatch-cmd-someone-elses"  # no owner file: not ours to remove
    foreign.mkdir()
    dead = base / "gamebatch-cmd-dead"
    dead.mkdir()
    (dead / "owner").touch()  # its command was killed: nobody holds the lock
    env = command_env(TMPDIR=str(base))
    done = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "status"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in base.iterdir()) == ["gamebatch-cmd-someone-elses"]


def test_solve_passes_file_references_and_submit_the_bytes(tmp_path: Path) -> None:
    from pipeline.app.cluster import cluster
    from pipeline.config import load_settings
    from pipeline.data import producer
    from pipeline.data.messages import FilePayload, SlicePayload, decode_payload

    problem = get_problem("pathgame")
    path = tmp_path / "p.in"
    path.write_text(input_text(problem, random_cases(problem, "random", 30, 50, seed=2)))
    kinds = {}
    for workers, state in ((True, "a"), (False, "b")):  # a waiting command, a detached submit
        settings = load_settings(state_dir=str(tmp_path / state), warm_seconds=0)
        with cluster(settings, workers=workers) as c:
            job = producer.submit(problem, path, c.store, lambda j, i: None, c.settings)
            kinds[workers] = type(decode_payload(c.store.chunk_payload(job.job_id, 0) or b""))
    assert kinds == {True: FilePayload, False: SlicePayload}
