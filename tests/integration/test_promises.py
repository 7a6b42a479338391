"""Documented promises that had no test: --keep-going, cancel, a lost Redis, Ctrl-C."""

from __future__ import annotations

import os
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
from tests.conftest import Workers
from tests.helpers import answers, command_env, input_text, random_cases
from tests.integration.test_pipeline import gamebatch

ONE_PER_CHUNK = {"GAMEBATCH_CHUNK__MAX_CASES": "1"}


def _big(tmp_path: Path, cases: int = 3000) -> Path:
    problem = get_problem("strgame")
    path = tmp_path / "big.in"
    path.write_text(input_text(problem, random_cases(problem, "random", cases, 200, seed=9)))
    return path


def test_keep_going_marks_invalid_cases_and_lists_their_errors(
    tmp_path: Path, redis_server: RedisServer, workers: Workers
) -> None:
    workers.start(concurrency=1)
    path = tmp_path / "mixed.in"
    path.write_text("5\n1 1\na\n1 1\nB\n2 1\nab\nb\n1 0\na\n1 2\nab\n")  # cases 2 and 4 are bad
    out = tmp_path / "mixed.out"
    result = gamebatch(
        "solve",
        "-q",
        "-p",
        "strgame",
        str(path),
        "-o",
        str(out),
        "--keep-going",
        "--broker",
        redis_server.url,
    )
    assert result.returncode == 2
    assert result.stderr == (
        f"gamebatch: error: {path}: invalid cases marked INVALID (listed in {out}.errors)\n"
    )
    good = answers(get_problem("strgame"), "3\n1 1\na\n2 1\nab\nb\n1 2\nab\n").splitlines()
    assert out.read_text().splitlines() == [good[0], "INVALID", good[1], "INVALID", good[2]]
    errors = Path(f"{out}.errors").read_text().splitlines()
    assert [e.split(": ")[0:2] for e in errors] == [
        [f"{path}:5", "case 2"],
        [f"{path}:9", "case 4"],
    ]


def test_cancel_drops_the_queued_work_and_collect_says_so(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    broker = ["--broker", redis_server.url]
    submitted = gamebatch(
        "submit", "-p", "strgame", str(_big(tmp_path)), *broker, env=ONE_PER_CHUNK
    )
    job = submitted.stdout.split()[-1]
    assert gamebatch("cancel", job, *broker).stdout == f"cancelled {job}\n"
    store = JobStore.from_url(redis_server.url)
    counters = store.progress(job)
    assert counters is not None and counters.state == JobState.CANCELLED
    assert store.unleased(job) == [], "payloads of a cancelled job were kept"
    store.close()
    collected = gamebatch("collect", job, "-o", str(tmp_path / "r.out"), *broker)
    assert collected.returncode == 1 and "was cancelled" in collected.stderr
    assert not (tmp_path / "r.out").exists()


def test_a_cancelled_job_does_not_bar_its_input(
    tmp_path: Path, redis_server: RedisServer, workers: Workers
) -> None:
    """A cancel stops a run: the next solve (or submit) of the same input starts afresh,
    instead of saying for a week that the job was cancelled."""
    broker = ["--broker", redis_server.url]
    path = _big(tmp_path, cases=300)
    job = gamebatch("submit", "-p", "strgame", str(path), *broker).stdout.split()[-1]
    assert gamebatch("cancel", job, *broker).returncode == 0
    workers.start(concurrency=1)
    out = tmp_path / "r.out"
    solved = gamebatch("solve", "-q", "-p", "strgame", str(path), "-o", str(out), *broker)
    assert solved.returncode == 0, solved.stderr
    assert out.read_text() == answers(get_problem("strgame"), path.read_text())
    store = JobStore.from_url(redis_server.url)
    counters = store.progress(job)
    assert counters is not None and counters.state == JobState.DONE
    store.close()


def test_a_redis_that_lost_its_data_gets_the_input_again(
    tmp_path: Path, redis_server: RedisServer, workers: Workers
) -> None:
    path = _big(tmp_path)
    workers.start(concurrency=2)
    solve = subprocess.Popen(
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
            str(tmp_path / "r.out"),
            "--broker",
            redis_server.url,
        ],
        env=command_env(**ONE_PER_CHUNK),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    store = JobStore.from_url(redis_server.url)
    deadline = time.monotonic() + 60
    while not ((jobs := store.jobs()) and (c := store.progress(jobs[0])) and c.done > 300):
        assert time.monotonic() < deadline and solve.poll() is None
        time.sleep(0.02)
    store.close()
    client = redis.Redis.from_url(redis_server.url)
    client.flushall()  # our own test server: everything of the job is gone
    client.close()
    _, err = solve.communicate(timeout=180)
    assert solve.returncode == 0, err
    assert f"note: Redis lost job {jobs[0]}" in err and f"reading {path} again" in err
    assert (tmp_path / "r.out").read_text() == answers(get_problem("strgame"), path.read_text())


def test_an_interrupt_exits_130_and_leaves_no_result(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    runs = ((signal.SIGINT, 1), (signal.SIGTERM, 1), (signal.SIGINT, 5))
    for number, (sig, repeats) in enumerate(runs, 1):
        out = tmp_path / f"r{number}.out"
        solve = subprocess.Popen(  # no workers: it waits for ever
            [
                sys.executable,
                "-m",
                "pipeline.cli",
                "solve",
                "-q",
                "-p",
                "strgame",
                str(_big(tmp_path, 50 + number)),
                "-o",
                str(out),
                "--broker",
                redis_server.url,
            ],
            env=command_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        store = JobStore.from_url(redis_server.url)
        deadline = time.monotonic() + 30
        while len(store.jobs()) < number:  # each run has its own input, so its own job
            assert time.monotonic() < deadline
            time.sleep(0.02)
        store.close()
        time.sleep(0.3)
        for _ in range(repeats):  # an impatient user: the first one counts, the rest wait
            solve.send_signal(sig)
            time.sleep(0.01)
        _, err = solve.communicate(timeout=30)
        assert (solve.returncode, err) == (130, "gamebatch: interrupted\n"), (sig, repeats)
        assert not out.exists() and not list(tmp_path.glob("*.part"))


def test_a_second_keep_going_run_never_hides_the_invalid_cases(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    """A keep-going job's list of invalid cases is replaced only when a production ends:
    a second run of the same input that dies half way leaves the first one's whole list."""
    from pipeline.config import load_settings
    from pipeline.data import producer

    problem = get_problem("strgame")
    path = tmp_path / "kg.in"
    lines = ["3001"] + ["1 1\na"] * 1500 + ["1 1\nB"] + ["1 1\nab"] * 1499 + ["1 0\na"]
    path.write_text("\n".join(lines) + "\n")
    store = JobStore.from_url(redis_server.url)
    settings = load_settings(broker_url=redis_server.url, chunk={"max_cases": 100})
    first = producer.submit(
        problem, path, store, lambda j, i: None, settings, how=producer.Production(keep_going=True)
    )
    assert len(store.invalid(first.job_id)) == 2 and first.chunks > 20

    def die_after_a_few(job_id: str, index: int) -> None:
        if index == 5:
            raise RuntimeError("killed")

    with pytest.raises(RuntimeError, match="killed"):
        producer.submit(
            problem,
            path,
            store,
            die_after_a_few,
            settings,
            how=producer.Production(keep_going=True),
        )
    found = store.invalid(first.job_id)
    assert [e.split(": ")[1] for e in found] == ["case 1501", "case 3001"], found
    store.close()


def test_keep_going_keeps_one_line_per_case_when_a_case_cannot_be_delimited(
    tmp_path: Path, redis_server: RedisServer, workers: Workers
) -> None:
    """A count that is no number: the cases after it cannot be found, and each still gets
    its line (INVALID), so that line i of the result stays case i."""
    workers.start(concurrency=1)
    path = tmp_path / "lost.in"
    path.write_text("4\n1 1\na\nx 1\nab\n1 1\nb\n1 1\nab\n")
    out = tmp_path / "lost.out"
    result = gamebatch(
        "solve",
        "-q",
        "-p",
        "strgame",
        str(path),
        "-o",
        str(out),
        "--keep-going",
        "--broker",
        redis_server.url,
    )
    assert result.returncode == 2, result.stderr
    first = answers(get_problem("strgame"), "1\n1 1\na\n").strip()
    assert out.read_text().splitlines() == [first, "INVALID", "INVALID", "INVALID"]
    errors = Path(f"{out}.errors").read_text().splitlines()
    assert errors[0].startswith(f"{path}:4: case 2: n (the number of strings)")
    assert errors[1] == f"{path}: cases 3-4 not read: the file cannot be followed past case 2"


def test_gamebatch_worker_starts_celery_again_when_it_dies(
    tmp_path: Path, redis_server: RedisServer, workers: Workers
) -> None:
    """The Celery worker under `gamebatch worker` killed outright: it is started again, and
    a job queued afterwards is solved."""
    supervisor = workers.start(concurrency=1)
    log = tmp_path / "worker-0.log"
    celery = _child_of(supervisor.pid)
    os.kill(celery, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while log.read_bytes().count(b"ready.") < 2:
        assert supervisor.poll() is None and time.monotonic() < deadline, log.read_text()[-2000:]
        time.sleep(0.05)
    assert b"starting it again" in log.read_bytes()
    path = _big(tmp_path, cases=200)
    out = tmp_path / "r.out"
    solved = gamebatch(
        "solve", "-q", "-p", "strgame", str(path), "-o", str(out), "--broker", redis_server.url
    )
    assert solved.returncode == 0, solved.stderr
    assert out.read_text() == answers(get_problem("strgame"), path.read_text())


def _child_of(pid: int) -> int:
    """The one child process of `pid` (from /proc)."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    assert len(children) == 1, children
    return int(children[0])
