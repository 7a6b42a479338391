"""Fault tests: killed workers, pool children, collectors and Redis; poison cases; bad files."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis

from pipeline.games.registry import get_problem
from pipeline.local.redis_server import RedisServer
from pipeline.store.jobstate import JobState
from pipeline.store.jobstore import JobStore
from tests.conftest import Workers, run_reference
from tests.helpers import answers, command_env, input_text, random_cases, said
from tests.unit.test_input_errors import CORPUS

pytestmark = pytest.mark.integration

# One case per chunk makes thousands of tasks, so that a kill lands in the middle of the job;
# short leases and stall times make recovery quick enough for a test.
FAULT_ENV = {
    "GAMEBATCH_CHUNK__MAX_CASES": "1",
    "GAMEBATCH_LEASE_SECONDS": "2",
    "GAMEBATCH_STALL_SECONDS": "3",
    "GAMEBATCH_CHUNK__ALONE_BYTES": "0",  # the faults are the workers': none solved alone
}
CASES = 1000  # of the fault dataset (one chunk each): a kill at a fifth of it leaves 800
PLUGIN_DIR = Path(__file__).resolve().parents[1] / "plugin_nim"


_ORACLE: dict[str, Path] = {}  # the compiled reference program, when there is one


@pytest.fixture(autouse=True)
def _independent_oracle(request: pytest.FixtureRequest) -> None:
    """Expected answers come from the reference program, not from the solver under test."""
    try:
        _ORACLE.update(request.getfixturevalue("reference"))
    except pytest.skip.Exception:
        _ORACLE.clear()  # no g++ here: the solver's answers, checked elsewhere by stress


def dataset(folder: Path, cases: int = CASES) -> tuple[Path, str]:
    """A strgame file and its expected result (the reference program's when available)."""
    problem = get_problem("strgame")
    path = folder / "data.in"
    path.write_text(input_text(problem, random_cases(problem, "random", cases, 200, seed=5)))
    if "strgame" in _ORACLE:
        return path, run_reference(_ORACLE["strgame"], path.read_text())
    return path, answers(problem, path.read_text())


def start_solve(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "pipeline.cli", "solve", "-q", "-p", "strgame", *args],
        env=command_env(**{**FAULT_ENV, **(env or {})}),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for_progress(url: str, fraction: float, total: int, timeout: float = 60) -> None:
    """Block until the only job on `url` has answered `fraction` of its cases."""
    store = JobStore.from_url(url)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        jobs = store.jobs()
        progress = store.progress(jobs[0]) if jobs else None
        if progress and progress.done >= fraction * total:
            assert progress.done < total, "the job finished before the fault was injected"
            return
        time.sleep(0.02)
    raise AssertionError("no progress")


def finish(process: subprocess.Popen[str], timeout: float = 180) -> str:
    out, err = process.communicate(timeout=timeout)
    assert process.returncode == 0, err
    return out


def test_whole_worker_killed_mid_job(
    tmp_path: Path, redis_server: RedisServer, workers: Workers
) -> None:
    path, expected = dataset(tmp_path)
    first = workers.start(concurrency=2, **FAULT_ENV)
    solve = start_solve(str(path), "-o", str(tmp_path / "out"), "--broker", redis_server.url)
    wait_for_progress(redis_server.url, 0.2, CASES)
    os.killpg(first.pid, signal.SIGKILL)  # the worker and its pool, like a machine lost
    workers.start(concurrency=2, **FAULT_ENV)
    finish(solve)
    assert (tmp_path / "out").read_text() == expected


@pytest.mark.parametrize("messages_lost", [False, True])
def test_workers_recover_a_detached_job_from_a_lost_worker(
    tmp_path: Path, redis_server: RedisServer, workers: Workers, messages_lost: bool
) -> None:
    path, expected = dataset(tmp_path)
    first = workers.start(concurrency=2, **FAULT_ENV)
    env, broker = command_env(**FAULT_ENV), ["--broker", redis_server.url]
    submit = subprocess.Popen(
        [sys.executable, "-m", "pipeline.cli", "submit", "-p", "strgame", str(path), *broker],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # watched while it queues: on a busy machine the workers may keep pace with production
    wait_for_progress(redis_server.url, 0.2, CASES)
    os.killpg(first.pid, signal.SIGKILL)  # a machine lost, its chunks unacknowledged for an hour
    submitted, errors = submit.communicate(timeout=60)
    assert submit.returncode == 0, errors
    job = submitted.split()[-1]
    if messages_lost:  # and the queued messages with it (the broker's data lost, say)
        client = JobStore.from_url(redis_server.url).client
        lanes = list(client.scan_iter(match="gamebatch.*"))
        assert lanes and client.delete(*lanes)
    workers.start(concurrency=2, **FAULT_ENV)
    # Nobody waits on the job: only the workers' sweep can queue the lost chunks again.
    store = JobStore.from_url(redis_server.url)
    deadline = time.monotonic() + 60
    while (store.progress(job) or pytest.fail("job gone")).state != JobState.COMPLETE:
        assert time.monotonic() < deadline, store.progress(job)
        time.sleep(0.1)
    out = tmp_path / "out"
    collected = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "collect", job, "-o", str(out), *broker],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert collected.returncode == 0, collected.stderr
    assert out.read_text() == expected


def test_pool_child_killed_mid_job(
    tmp_path: Path, redis_server: RedisServer, workers: Workers
) -> None:
    """A pool process killed while it holds a chunk: Celery delivers the chunk again at once
    (task_reject_on_worker_lost). Leases of ten minutes rule out any other recovery."""
    path, expected = dataset(tmp_path)
    slow_recovery = {"GAMEBATCH_LEASE_SECONDS": "600", "GAMEBATCH_STALL_SECONDS": "600"}
    worker = workers.start(concurrency=2, **{**FAULT_ENV, **slow_recovery})
    solve = start_solve(
        str(path), "-o", str(tmp_path / "out"), "--broker", redis_server.url, env=slow_recovery
    )
    try:
        wait_for_progress(redis_server.url, 0.2, CASES)
        (celery,) = _children(worker.pid)  # gamebatch worker -> celery worker -> pool processes
        pool = _children(celery)
        client = redis.Redis.from_url(redis_server.url)
        deadline = time.monotonic() + 10
        while not (holders := _lease_holders(client) & set(pool)):
            assert time.monotonic() < deadline, "no pool process holds a chunk"
            time.sleep(0.001)  # a one-case chunk's lease lives about a millisecond
        victim = holders.pop()
        os.kill(victim, signal.SIGKILL)
        client.close()
        finish(solve, timeout=60)  # well before any lease could expire
    finally:
        if solve.poll() is None:
            solve.kill()
            solve.communicate()
    assert (tmp_path / "out").read_text() == expected


def _children(pid: int) -> list[int]:
    found = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True, check=False)
    return [int(p) for p in found.stdout.split()]


def _lease_holders(client: redis.Redis) -> set[int]:
    """Pids of the processes holding a chunk lease right now (KEYS: one snapshot, where a
    SCAN of ten keys a round trip passes most leases by while they live)."""
    leases = client.keys("gb:job:*:lease:*")
    holders = client.mget(leases) if leases else []
    return {int(h.decode().rpartition(":")[2]) for h in holders if h}


def test_collector_killed_and_rerun(
    tmp_path: Path, redis_server: RedisServer, workers: Workers
) -> None:
    path, expected = dataset(tmp_path)
    workers.start(concurrency=1, **FAULT_ENV)
    out = tmp_path / "out"
    solve = start_solve(str(path), "-o", str(out), "--broker", redis_server.url)
    wait_for_progress(redis_server.url, 0.2, CASES)
    solve.kill()
    solve.communicate()
    assert not out.exists()
    store = JobStore.from_url(redis_server.url)
    (job,) = store.jobs()
    answered = store.answered(job)
    resubmitted = subprocess.run(
        [
            sys.executable,
            "-m",
            "pipeline.cli",
            "submit",
            "-p",
            "strgame",
            str(path),
            "--broker",
            redis_server.url,
        ],
        capture_output=True,
        text=True,
        env=command_env(**FAULT_ENV),
        check=True,
    )
    chunks, queued = (
        int(w) for w in re.findall(r"in (\d+) chunks \((\d+) queued", resubmitted.stdout)[0]
    )
    assert queued <= chunks - len(answered), "chunks that had answers were queued again"
    assert resubmitted.stdout.split()[-1] == job  # the same job, found by the input's checksum
    finish(start_solve(str(path), "-o", str(out), "--broker", redis_server.url))
    assert out.read_text() == expected
    store.close()


def test_a_killed_producer_process_ends_solve_with_one_line(
    tmp_path: Path, redis_server: RedisServer, workers: Workers
) -> None:
    files = []
    for i in range(2):
        path = tmp_path / f"{i}.in"
        path.write_text(dataset(tmp_path, cases=200)[0].read_text().replace("\n", "\n\n", i))
        files.append(path)
    out = tmp_path / "out"
    out.mkdir()
    broker = ["--broker", redis_server.url, "--producers", "2", "--out-dir", str(out)]
    # No workers and a window of one chunk: both producers wait on their first chunk.
    solve = start_solve(*map(str, files), *broker, env={"GAMEBATCH_CHUNK__WINDOW": "1"})
    store = JobStore.from_url(redis_server.url)
    deadline = time.monotonic() + 30
    while len(store.jobs()) < 2:
        assert time.monotonic() < deadline and solve.poll() is None
        time.sleep(0.05)
    victim, other = (
        int((store.manifest(job) or {})["producer"].rpartition(":")[2]) for job in store.jobs()
    )
    store.close()
    os.kill(victim, signal.SIGKILL)
    _, stderr = solve.communicate(timeout=30)
    assert solve.returncode == 1
    with pytest.raises(ProcessLookupError):
        os.kill(other, 0)  # the other producer was stopped too, not left reading
    assert said(stderr) == [
        "gamebatch: error: a producer process died (killed, or out of memory); run the command"
        " again: what was queued is kept"
    ]
    assert list(out.iterdir()) == []
    workers.start(concurrency=2)  # the re-run finishes both files
    again = start_solve(*map(str, files), *broker)
    _, stderr = again.communicate(timeout=120)
    assert again.returncode == 0, stderr
    problem = get_problem("strgame")
    for path in files:
        assert (out / f"{path.name}.out").read_text() == answers(problem, path.read_text())


def test_embedded_solve_killed_and_rerun(tmp_path: Path) -> None:
    path, expected = dataset(tmp_path)
    state = tmp_path / "state"
    env = {"GAMEBATCH_STATE_DIR": str(state)}
    out = tmp_path / "out"
    solve = start_solve(str(path), "-o", str(out), "--workers", "1", env=env)
    deadline = time.monotonic() + 30
    while not (state / "port").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    port = (state / "port").read_text()
    url = f"redis://:{(state / 'password').read_text().strip()}@127.0.0.1:{port}/0"
    wait_for_progress(url, 0.2, CASES)
    solve.kill()  # SIGKILL: no clean-up in the process itself
    solve.communicate()
    deadline = time.monotonic() + 20  # its Redis and workers follow it (parent-death signal)
    while _listening(int(port)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _listening(int(port))
    finish(start_solve(str(path), "-o", str(out), "--workers", "1", env=env))
    assert out.read_text() == expected


def _listening(port: int) -> bool:
    import socket

    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_redis_restarted_with_append_only_file_mid_job(tmp_path: Path, workers: Workers) -> None:
    path, expected = dataset(tmp_path)
    data = tmp_path / "redis"
    server = RedisServer(data, appendonly=True).start()
    workers.url = server.url
    try:
        workers.start(concurrency=2, **FAULT_ENV)
        solve = start_solve(str(path), "-o", str(tmp_path / "out"), "--broker", server.url)
        wait_for_progress(server.url, 0.2, CASES)
        store = JobStore.from_url(server.url)
        (job,) = store.jobs()
        created = (store.manifest(job) or {})["created"]
        store.close()
        server.stop()
        time.sleep(1)
        server = RedisServer(data, appendonly=True, port=server.port, password=server.password)
        server.start()
        stderr = solve.communicate(timeout=180)[1]
        assert solve.returncode == 0, stderr
        store = JobStore.from_url(server.url)
        assert (store.manifest(job) or {})["created"] == created, "the job was made anew"
        store.close()
    finally:
        server.stop()
    assert "Redis lost job" not in stderr  # the job carried on: its input was not read again
    assert (tmp_path / "out").read_text() == expected
    log = (tmp_path / "worker-0.log").read_text()
    if "Unrecoverable error" in log:  # kombu ended the Celery worker on the disconnect:
        assert "starting it again" in log  # `gamebatch worker` started it again


def test_a_poison_case_ends_as_a_named_failure(tmp_path: Path) -> None:
    path = tmp_path / "nim.in"
    heaps = ["1\n3\n"] * 12
    heaps[6] = "2\n1 987654321\n"  # case 7 kills whatever process solves it
    path.write_text(f"{len(heaps)}\n" + "".join(heaps))
    env = command_env(
        PYTHONPATH=str(PLUGIN_DIR), GAMEBATCH_CHUNK__MAX_CASES="5", GAMEBATCH_MAX_ATTEMPTS="3"
    )
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pipeline.cli",
            "solve",
            "-q",
            "-p",
            "nim",
            str(path),
            "-o",
            str(tmp_path / "out"),
            "--workers",
            "1",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert result.returncode == 1
    assert result.stderr.strip().endswith("case 7: its worker died in 3 attempts")
    assert not (tmp_path / "out").exists()


def test_every_malformed_file_of_the_corpus(tmp_path: Path) -> None:
    for game in ("strgame", "pathgame"):
        folder = tmp_path / game
        folder.mkdir()
        bad = [(i, data) for i, (g, data, *_) in enumerate(CORPUS) if g == game]
        for i, data in bad:
            (folder / f"bad{i}.in").write_bytes(data)
        out = tmp_path / f"{game}-out"
        out.mkdir()
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "pipeline.cli",
                "solve",
                "-q",
                "-p",
                game,
                *sorted(map(str, folder.iterdir())),
                "--out-dir",
                str(out),
            ],
            capture_output=True,
            text=True,
            env=command_env(),
            timeout=120,
            check=False,
        )
        assert result.returncode == 2
        lines = result.stderr.strip().splitlines()
        assert len(lines) == len(bad) and "Traceback" not in result.stderr
        for (i, _), line in zip(sorted(bad, key=lambda b: f"bad{b[0]}.in"), lines, strict=True):
            _, data, line_no, case, words = CORPUS[i]
            assert f"bad{i}.in:{line_no}" in line and words in line
            assert (f": case {case}:" in line) == (case > 0)
        assert list(out.iterdir()) == []


def test_a_one_gigabyte_line_is_refused_with_little_memory(tmp_path: Path) -> None:
    path = tmp_path / "huge.in"
    with path.open("wb") as out:
        out.write(b"1\n1 1\n")
        block = b"a" * (1 << 24)
        for _ in range(64):
            out.write(block)
        out.write(b"\n")
    code = "import sys\nfrom pipeline.cli import main\nstatus = main(sys.argv[1:])\n"
    # VmHWM is this program's own peak resident memory
    code += "print(open('/proc/self/status').read().split('VmHWM:')[1].split()[0])\n"
    result = subprocess.run(
        [sys.executable, "-c", code + "sys.exit(status)", "validate", "-p", "strgame", str(path)],
        capture_output=True,
        text=True,
        env=command_env(),
        timeout=120,
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"gamebatch: error: {path}:3: case 1: token longer than the limit of 67108864 bytes"
    )
    peak_kib = int(result.stdout.split()[-1])
    assert peak_kib < 300 << 10, f"{peak_kib} KiB held to refuse a 1 GiB token at 64 MiB"


def test_reference_agrees_with_the_fault_dataset(
    tmp_path: Path, reference: dict[str, Path]
) -> None:
    path, expected = dataset(tmp_path, cases=500)
    assert run_reference(reference["strgame"], path.read_text()) == expected


def test_grading_heals_its_killed_local_workers(tmp_path: Path) -> None:
    """grade goes through the same orchestration as solve: its dead local workers are started
    again (and their lost chunks queued again), and the report is the same."""
    from tests.integration.test_orphans import CELERY, _processes

    tests, subs = tmp_path / "tests", tmp_path / "subs" / "alice"
    tests.mkdir()
    subs.mkdir(parents=True)
    path, expected = dataset(tmp_path, cases=3000)
    os.replace(path, tests / "t.in")
    (subs / "t.out").write_text(expected)
    grade = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pipeline.cli",
            "grade",
            "-q",
            "-p",
            "strgame",
            "--tests",
            str(tests),
            "--submissions",
            str(subs.parent),
            "--json",
            str(tmp_path / "r.json"),
        ],
        env=command_env(GAMEBATCH_STATE_DIR="", **FAULT_ENV),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while not (
        main := [
            p for p, (parent, _, cmd) in _processes().items() if parent == grade.pid and CELERY(cmd)
        ]
    ):
        assert grade.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(1.5)  # some chunks answered, most not
    os.kill(main[0], signal.SIGKILL)  # the Celery worker; its pool processes die with it
    try:
        out, err = grade.communicate(timeout=120)
    finally:
        grade.kill()
    assert grade.returncode == 0, err
    assert "t.out: 3000/3000 accepted" in out


def test_solve_config_file_reaches_the_local_workers(tmp_path: Path) -> None:
    """max_attempts is read by the workers: from the --config file, not only from theirs."""
    path = tmp_path / "nim.in"
    path.write_text("3\n1 3\n2 1 987654321\n1 3\n")  # case 2 kills whatever solves it
    config = tmp_path / "c.yaml"
    config.write_text("max_attempts: 1\nchunk: {max_cases: 1}\n")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pipeline.cli",
            "solve",
            "-q",
            "-p",
            "nim",
            str(path),
            "-o",
            str(tmp_path / "out"),
            "--workers",
            "1",
            "--config",
            str(config),
        ],
        capture_output=True,
        text=True,
        env=command_env(PYTHONPATH=str(PLUGIN_DIR)),
        timeout=120,
        check=False,
    )
    assert result.returncode == 1
    assert result.stderr.strip().endswith("case 2: its worker died in 1 attempts"), result.stderr
