"""The real pipeline: a Redis server and Celery worker processes started by the tests."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis

from pipeline.config import load_settings
from pipeline.data import collector, producer
from pipeline.games.registry import get_problem
from pipeline.games.strgame import make_case
from pipeline.local.redis_server import RedisServer
from pipeline.store import keys
from pipeline.store.jobstate import JobState
from pipeline.store.jobstore import JobStore
from tests.conftest import Workers
from tests.helpers import answers, command_env, input_text, random_cases, said
from workers.runner import Outcome, run_chunk

pytestmark = pytest.mark.integration

SMALL_CHUNKS = {"GAMEBATCH_CHUNK__TARGET_WORK": "300", "GAMEBATCH_CHUNK__PLACE_SCALE": "1"}


def gamebatch(*args: str, env: dict[str, str] | None = None, timeout: float = 120):
    """Run the real command line in a new process."""
    full_env = command_env(**(env or {}))
    return subprocess.run(
        [sys.executable, "-m", "pipeline.cli", *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
        check=False,
    )


def write_dataset(folder: Path, game: str, files: int, cases: int, seed: int) -> list[Path]:
    problem = get_problem(game)
    shapes = [s for s in problem.shapes if s != "small"]
    paths = []
    for i in range(files):
        picked = random_cases(problem, shapes[i % len(shapes)], cases, 200, seed + i)
        path = folder / f"{game}-{i}.in"
        path.write_text(input_text(problem, picked))
        paths.append(path)
    return paths


@pytest.mark.parametrize("game", ["strgame", "pathgame"])
def test_solve_on_the_embedded_default(tmp_path: Path, game: str) -> None:
    inputs = write_dataset(tmp_path, game, files=3, cases=40, seed=1)
    out = tmp_path / "out"
    out.mkdir()
    result = gamebatch(
        "solve",
        "-p",
        game,
        *map(str, inputs),
        "--out-dir",
        str(out),
        "--workers",
        "2",
        env=SMALL_CHUNKS,
    )
    assert result.returncode == 0, result.stderr
    problem = get_problem(game)
    for path in inputs:
        assert (out / f"{path.name}.out").read_text() == answers(problem, path.read_text())
    assert sorted(p.name for p in out.iterdir()) == sorted(f"{p.name}.out" for p in inputs)


def test_bad_file_exits_2_with_one_line_and_no_result(tmp_path: Path) -> None:
    good = tmp_path / "good.in"
    good.write_text("1\n1 1\na\n")
    bad = tmp_path / "bad.in"
    bad.write_text("2\n1 1\na\n1 1\nB\n")
    out = tmp_path / "out"
    out.mkdir()
    result = gamebatch("solve", "-p", "strgame", str(good), str(bad), "--out-dir", str(out))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"gamebatch: error: {bad}:5: case 2: string 1 of 1 has 'B' at position 1:"
        " only lowercase letters a-z are allowed"
    ]
    assert sorted(p.name for p in out.iterdir()) == ["good.in.out"]
    single = gamebatch("solve", "-p", "strgame", str(bad), "-o", str(tmp_path / "r.out"))
    assert single.returncode == 2 and "Traceback" not in single.stderr
    assert not (tmp_path / "r.out").exists()


def test_several_producers_read_files_at_once(
    tmp_path: Path, redis_server: RedisServer, workers: Workers
) -> None:
    inputs = write_dataset(tmp_path, "strgame", files=3, cases=30, seed=11)
    bad = tmp_path / "bad.in"
    bad.write_text("2\n1 1\na\n1 1\nB\n")
    inputs.insert(2, bad)
    out = tmp_path / "out"
    out.mkdir()
    # A window of one chunk holds each producer on its file until workers answer: with no
    # workers yet, three files must be in production at once, by three other processes.
    env = command_env(GAMEBATCH_CHUNK__WINDOW="1", **SMALL_CHUNKS)
    solve = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pipeline.cli",
            "solve",
            "-q",
            "-p",
            "strgame",
            *map(str, inputs),
            "--out-dir",
            str(out),
            "--broker",
            redis_server.url,
            "--producers",
            "3",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        store = JobStore.from_url(redis_server.url)
        deadline = time.monotonic() + 30
        while len(store.jobs()) < 3:
            assert time.monotonic() < deadline and solve.poll() is None, solve.stderr
            time.sleep(0.05)
        time.sleep(0.5)
        manifests = [store.manifest(job) or {} for job in store.jobs()]
        assert len(manifests) == 3
        pids = {m["producer"].rpartition(":")[2] for m in manifests}
        assert len(pids) == 3 and str(solve.pid) not in pids
        workers.start(concurrency=2)
        _, stderr = solve.communicate(timeout=60)
    finally:
        solve.kill()
    assert solve.returncode == 2
    assert said(stderr) == [
        f"gamebatch: error: {bad}:5: case 2: string 1 of 1 has 'B' at position 1:"
        " only lowercase letters a-z are allowed"
    ]
    problem = get_problem("strgame")
    good = [path for path in inputs if path != bad]
    for path in good:
        assert (out / f"{path.name}.out").read_text() == answers(problem, path.read_text())
    assert sorted(p.name for p in out.iterdir()) == sorted(f"{p.name}.out" for p in good)


@pytest.mark.parametrize(
    "args",
    [
        ["solve", "-p", "nosuchgame", "x.in"],
        ["solve", "-p", "strgame", "missing.in"],
        ["solve", "-p", "strgame", "x.in", "-o", "no/such/dir/out"],
        ["solve", "-p", "strgame", "x.in", "x.in", "-o", "out"],
        ["collect", "JOB"],
        ["status", "--broker", "redis://:secret@127.0.0.1:1/0", "--config", "missing.yaml"],
    ],
)
def test_usage_errors_exit_2_without_traceback(tmp_path: Path, args: list[str]) -> None:
    (tmp_path / "x.in").write_text("1\n1 1\na\n")
    result = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
        env=command_env(),
    )
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr


def test_submit_worker_collect_as_separate_processes(
    tmp_path: Path, redis_server: RedisServer, workers: Workers
) -> None:
    (path,) = write_dataset(tmp_path, "pathgame", files=1, cases=300, seed=4)
    broker = ["--broker", redis_server.url]
    submitted = gamebatch("submit", "-p", "pathgame", str(path), *broker, env=SMALL_CHUNKS)
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.strip().splitlines()[-1]
    assert redis_server.password not in submitted.stdout + submitted.stderr

    status = gamebatch("status", job_id, "--json", *broker)
    before = json.loads(status.stdout)
    assert (before["state"], before["total"], before["done"]) == ("running", 300, 0)
    assert before["started"] is before["answered"] is before["cases_per_second"] is None

    worker = subprocess.Popen(
        [sys.executable, "-m", "pipeline.cli", "worker", *broker, "--concurrency", "2"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    workers.processes.append(worker)
    out = tmp_path / "result.out"
    collected = gamebatch("collect", job_id, *broker, "-o", str(out), "--timeout", "60")
    assert collected.returncode == 0, collected.stderr
    assert out.read_text() == answers(get_problem("pathgame"), path.read_text())
    after = json.loads(gamebatch("status", job_id, "--json", *broker).stdout)
    assert (after["state"], after["total"], after["done"]) == ("done", 300, 300)
    elapsed = after["answered"] - after["started"]
    assert 0 < elapsed < 60 and after["cases_per_second"] == pytest.approx(300 / elapsed)
    listing = gamebatch("status", *broker).stdout
    assert f"{job_id}  done      300/300 cases  {elapsed:.1f} s" in listing


def test_collect_times_out_without_workers_and_writes_nothing(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    (path,) = write_dataset(tmp_path, "strgame", files=1, cases=5, seed=2)
    broker = ["--broker", redis_server.url]
    job_id = gamebatch("submit", "-p", "strgame", str(path), *broker).stdout.split()[-1]
    out = tmp_path / "never.out"
    result = gamebatch("collect", job_id, *broker, "-o", str(out), "--timeout", "0.5")
    assert result.returncode == 1 and "not finished after 0.5 s" in result.stderr
    assert not out.exists() and list(tmp_path.glob(".never.out*")) == []


def test_status_pings_workers_only_when_one_said_it_lives(
    redis_server: RedisServer, workers: Workers
) -> None:
    """Celery's ping always waits its whole second: with no worker seen, none is sent."""
    client = redis.Redis.from_url(redis_server.url)
    broker = ["--broker", redis_server.url]
    client.config_resetstat()
    listed = gamebatch("status", "--json", *broker)
    assert listed.returncode == 0 and json.loads(listed.stdout)["workers"] == [], listed.stderr
    assert "cmdstat_publish" not in client.info("commandstats")  # no ping was broadcast
    workers.start()
    store = JobStore.from_url(redis_server.url)
    deadline = time.monotonic() + 30
    while not store.capacity(60):  # it says so as soon as it is ready
        assert time.monotonic() < deadline, "the worker never said it lives"
        time.sleep(0.05)
    store.close()
    listed = gamebatch("status", "--json", *broker)
    assert len(json.loads(listed.stdout)["workers"]) == 1, listed.stdout
    client.close()


def test_a_solve_on_a_broker_without_workers_says_so_and_goes_on_when_one_comes(
    tmp_path: Path, redis_server: RedisServer, workers: Workers
) -> None:
    (path,) = write_dataset(tmp_path, "strgame", files=1, cases=1, seed=3)
    out, broker = tmp_path / "one.out", ["--broker", redis_server.url]
    gave_up = gamebatch("solve", "-p", "strgame", str(path), "-o", str(out), *broker,
                        "--wait-for-workers", "2")  # fmt: skip
    assert gave_up.returncode == 3, gave_up.stderr
    assert gave_up.stderr.startswith("gamebatch: error: no worker has been seen on this broker")
    assert len(gave_up.stderr.splitlines()) == 1 and not out.exists()
    started = time.monotonic()
    solve = subprocess.Popen(
        [sys.executable, "-m", "pipeline.cli", "solve", "-p", "strgame", str(path),
         "-o", str(out), *broker],
        stderr=subprocess.PIPE, text=True, env=command_env(),
    )  # fmt: skip
    try:
        assert solve.stderr is not None
        line = solve.stderr.readline()
        assert time.monotonic() - started < 10, line
        assert line == (
            "gamebatch: warning: no worker has been seen on this broker in 5 s;"
            " start one with `gamebatch worker` (still waiting)\n"
        )
        workers.start()
        _, rest = solve.communicate(timeout=60)
    finally:
        if solve.poll() is None:
            solve.kill()
    assert solve.returncode == 0, rest
    assert out.read_text() == answers(get_problem("strgame"), path.read_text())


def test_chunks_finishing_out_of_order_give_ordered_output(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    problem = get_problem("strgame")
    (path,) = write_dataset(tmp_path, "strgame", files=1, cases=120, seed=8)
    store = JobStore.from_url(redis_server.url)
    settings = load_settings(broker_url=redis_server.url, chunk={"target_work": 200})
    sent: list[tuple[str, int]] = []
    job = producer.submit(problem, path, store, lambda j, i: sent.append((j, i)), settings)
    assert job.chunks == len(sent) > 10
    order = list(range(job.chunks))
    random.Random(3).shuffle(order)
    for index in order:
        assert run_chunk(store, job.job_id, index) == Outcome.SOLVED
    for index in order[:5]:  # a redelivered chunk changes nothing
        assert run_chunk(store, job.job_id, index) == Outcome.DUPLICATE
    done = collector.wait_for(store, job.job_id, poll=0.01, timeout=5)
    assert (done.state, done.done, done.total) == (JobState.COMPLETE, 120, 120)
    out = tmp_path / "r.out"
    collector.write_result_file(store, job.job_id, problem, done, out)
    assert out.read_text() == answers(problem, path.read_text())


def test_a_rerun_reuses_answers_and_queues_nothing(
    tmp_path: Path, redis_server: RedisServer, workers: Workers
) -> None:
    (path,) = write_dataset(tmp_path, "strgame", files=1, cases=50, seed=6)
    workers.start(concurrency=1, **SMALL_CHUNKS)
    broker = ["--broker", redis_server.url]
    first = gamebatch(
        "solve", "-p", "strgame", str(path), *broker, "-o", str(tmp_path / "1"), env=SMALL_CHUNKS
    )
    assert first.returncode == 0, first.stderr
    workers.stop()  # nothing left to run the second time
    second = gamebatch(
        "solve",
        "-p",
        "strgame",
        str(path),
        *broker,
        "-o",
        str(tmp_path / "2"),
        env=SMALL_CHUNKS,
        timeout=30,
    )
    assert second.returncode == 0, second.stderr
    assert (tmp_path / "1").read_text() == (tmp_path / "2").read_text()
    assert (tmp_path / "1").read_text() == answers(get_problem("strgame"), path.read_text())


def test_large_worst_case_files_match_the_reference(
    tmp_path: Path, reference: dict[str, Path]
) -> None:
    from tests.conftest import run_reference

    rng = random.Random(12)
    strgame = get_problem("strgame")
    games = [
        make_case(rng.randint(1, 10**9), ["".join(rng.choices("ab", k=10**5))]) for _ in range(4)
    ]
    games.append(make_case(2, rng.choices("abcdefghijklmnopqrstuvwxyz", k=10**5)))
    games += random_cases(strgame, "wide", 2, 10**5, seed=1)
    games += random_cases(strgame, "random", 3, 10**5, seed=2)
    pathgame = get_problem("pathgame")
    boards = random_cases(pathgame, "random", 600, 1000, seed=3)
    boards += random_cases(pathgame, "white", 400, 1000, seed=4)
    for game, cases in (("strgame", games), ("pathgame", boards)):
        path = tmp_path / f"{game}.in"
        path.write_text(input_text(get_problem(game), cases))
        out = tmp_path / f"{game}.out"
        result = gamebatch("solve", "-p", game, str(path), "-o", str(out), "-q")
        assert result.returncode == 0, result.stderr
        assert out.read_text() == run_reference(reference[game], path.read_text())


def test_workers_share_the_grundy_tables_through_redis(
    redis_server: RedisServer, redis_client, workers: Workers
) -> None:
    assert not redis_client.exists("gb:table:pathgame:grundy")
    workers.start()
    cached = redis_client.get("gb:table:pathgame:grundy")
    assert cached is not None and b'"version": 1' in cached


def test_a_small_job_is_not_stuck_behind_a_large_one(
    tmp_path: Path, redis_server: RedisServer, workers: Workers
) -> None:
    """The interactive lane is taken first (priority order, not round robin): while a small
    job's 30 chunks wait, the big job's chunks wait too."""
    big = write_dataset(tmp_path, "strgame", files=1, cases=3000, seed=21)[0]
    small = tmp_path / "small.in"
    small.write_text("30\n" + "1 1\na\n" * 30)
    broker = ["--broker", redis_server.url]
    one_per_chunk = {"GAMEBATCH_CHUNK__MAX_CASES": "1"}
    submitted = gamebatch(
        "submit", "-p", "strgame", str(big), "--lane", "bulk", *broker, env=one_per_chunk
    )
    big_job = submitted.stdout.split()[-1]
    worker = workers.start(concurrency=1)
    store = JobStore.from_url(redis_server.url)
    deadline = time.monotonic() + 60
    while (progress := store.progress(big_job)) is None or progress.done < 100:
        assert time.monotonic() < deadline, "the big job did not start"
        time.sleep(0.05)
    # the worker is held while the small job is queued (a busy machine's producer queues
    # more slowly than a worker takes: a lane empty for a moment tests nothing), and the
    # order of the answers is read from Redis's own notifications (reading the counters
    # after the fact counts big chunks answered while the test looked)
    children = Path(f"/proc/{worker.pid}/task/{worker.pid}/children").read_text().split()
    groups = [os.getpgid(int(pid)) for pid in children]  # its Celery worker's, own session
    for group in groups:
        os.killpg(group, signal.SIGSTOP)
    client = redis.Redis.from_url(redis_server.url)
    client.config_set("notify-keyspace-events", "Kh")
    notes = client.pubsub()
    try:
        small_job = gamebatch(
            "submit", "-p", "strgame", str(small), *broker, env=one_per_chunk
        ).stdout.split()[-1]
        notes.subscribe(*(f"__keyspace@0__:{keys.answers(j)}" for j in (big_job, small_job)))
    finally:
        for group in groups:
            os.killpg(group, signal.SIGCONT)
    answered = {big_job: 0, small_job: 0}
    while answered[small_job] < 30:
        assert time.monotonic() < deadline + 30, "the small job is stuck"
        note = notes.get_message(timeout=1)
        if note and note["type"] == "message" and note["data"] == b"hset":
            job = next(j for j in answered if note["channel"].decode().endswith(keys.answers(j)))
            answered[job] += 1
    notes.close()
    client.close()
    out = tmp_path / "small.out"
    collected = gamebatch("collect", small_job, "-o", str(out), "--timeout", "30", *broker)
    assert collected.returncode == 0, collected.stderr
    # round robin would have answered about as many big chunks as small ones (30); the one
    # the worker held when it was stopped may come first
    assert answered[big_job] <= 1, answered
    assert out.read_text() == "Pure\n" * 30
    assert store.manifest(small_job)["lane"] == "interactive"  # type: ignore[index]
    store.close()


def test_compressed_payloads_give_the_same_answers_with_half_the_bytes_into_redis(
    redis_server: RedisServer, workers: Workers, tmp_path: Path
) -> None:
    """compress_payloads: chunks that carry bytes carry them zstd-compressed; Redis takes in
    (and holds) far fewer bytes for the same answers."""
    problem = get_problem("strgame")
    workers.start(concurrency=2)
    client = JobStore.from_url(redis_server.url).client
    runs = ((30, "false", ()), (31, "true", ()), (32, "true", ("--keep-going",)))
    for seed, compress, more in runs:  # --keep-going: the Python reader's chunks
        path = tmp_path / f"in-{seed}.txt"
        path.write_text(input_text(problem, random_cases(problem, "random", 6000, 200, seed)))
        before = int(client.info("stats")["total_net_input_bytes"])
        env = {"GAMEBATCH_COMPRESS_PAYLOADS": compress, "GAMEBATCH_FILE_PAYLOADS": "false"}
        out = tmp_path / f"out-{seed}"
        args = ("solve", "-q", "-p", "strgame", "--broker", redis_server.url, *more, str(path))
        done = gamebatch(*args, "-o", str(out), env=env)
        assert done.returncode == 0, done.stderr
        received = int(client.info("stats")["total_net_input_bytes"]) - before
        assert out.read_text() == answers(problem, path.read_text())
        size = path.stat().st_size
        if compress == "true":
            assert received < size / 2, (received, size)
        else:
            assert received > size, (received, size)  # the same check fails uncompressed
