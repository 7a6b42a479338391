"""Load: many jobs at once from many clients, and thousands of finished jobs kept."""

from __future__ import annotations

import io
import json
import math
import subprocess
import sys
import threading
from pathlib import Path

import redis

from pipeline.app.solve import FileJob, Solving, run
from pipeline.config import load_settings
from pipeline.games.registry import get_problem
from pipeline.jobs.recovery import sweep
from pipeline.local.redis_server import RedisServer
from pipeline.progress import ProgressBar
from pipeline.store import keys
from pipeline.store.jobstate import JobState
from pipeline.store.jobstore import SWEEP_FURTHER, JobStore
from tests.conftest import Workers
from tests.helpers import answers, command_env, input_text, random_cases


def _calls(client: redis.Redis, command: str) -> int:
    stats = client.info("commandstats").get(f"cmdstat_{command}", {})
    return int(stats.get("calls", 0)) if isinstance(stats, dict) else 0


def test_the_sweep_reads_the_unfinished_jobs_not_all_kept_ones(redis_server: RedisServer) -> None:
    store = JobStore.from_url(redis_server.url)
    client = redis.Redis.from_url(redis_server.url)
    settings = load_settings(broker_url=redis_server.url)
    kept = 10_000
    with client.pipeline(transaction=False) as pipe:  # finished jobs, as `collect` leaves them
        for n in range(kept):
            job_id = f"strgame-{n:024x}"
            pipe.hset(keys.job(job_id), mapping={"state": JobState.DONE.value, "created": "1"})
            pipe.zadd(keys.JOBS, {job_id: n})
        pipe.execute()
    running = [f"pathgame-{n:024x}" for n in range(3)]
    for job_id in running:
        store.open_job(job_id, {"problem": "pathgame"})
    before = client.info("memory")["used_memory"]
    client.config_resetstat()
    sweep(store, lambda job, index: None, settings)
    assert 2 * 3 <= _calls(client, "hgetall") < 3 * (3 + SWEEP_FURTHER)  # all: 2 * 10,003
    assert _calls(client, "exists") == 0  # no look at every kept job either
    # a running job missing from the open set (written by an older version, or lost) is
    # found again within a pass over all jobs
    client.zrem(keys.OPEN_JOBS, running[0])
    for _ in range(math.ceil((kept + 3) / SWEEP_FURTHER)):
        sweep(store, lambda job, index: None, settings)
    assert client.zscore(keys.OPEN_JOBS, running[0]) is not None
    assert client.zcard(keys.OPEN_JOBS) == 3  # the finished ones seen were dropped from it
    assert client.info("memory")["used_memory"] - before < 1 << 20
    store.close()


def test_a_job_that_finishes_while_the_sweep_looks_is_not_kept_open(
    redis_server: RedisServer,
) -> None:
    store = JobStore.from_url(redis_server.url)
    client = redis.Redis.from_url(redis_server.url)
    store.open_job("pathgame-a", {"problem": "pathgame"})
    store.open_job("pathgame-b", {"problem": "pathgame"})
    seen = store.sweep_candidates()
    assert {"pathgame-a", "pathgame-b"} <= set(seen)
    store.finish_production("pathgame-a", 1, 1)
    store.save_answers("pathgame-a", 0, "1")
    assert store.finish("pathgame-a", ttl=60)  # collected between the sweep's read and its note
    store.note_swept(["pathgame-a", "pathgame-b"], [])
    assert [m.decode() for m in client.zrange(keys.OPEN_JOBS, 0, -1)] == ["pathgame-b"]
    store.note_swept([], ["pathgame-b"])
    assert client.zcard(keys.OPEN_JOBS) == 0
    store.close()


def test_a_thousand_small_jobs_from_twenty_clients(
    redis_server: RedisServer, workers: Workers, tmp_path: Path
) -> None:
    problem = get_problem("pathgame")
    workers.start(concurrency=2)
    settings = load_settings(broker_url=redis_server.url, result_ttl=600)
    client = redis.Redis.from_url(redis_server.url)
    failures: list[str] = []
    expected: dict[Path, str] = {}
    for n in range(1000):
        path = tmp_path / f"in-{n:04d}.in"
        path.write_text(input_text(problem, random_cases(problem, "random", 3, 6, seed=n)))
        expected[path] = answers(problem, path.read_text())
    paths = sorted(expected)

    def one_client(mine: list[Path]) -> None:
        outputs = {p: io.StringIO() for p in mine}
        files = [FileJob(p, outputs[p]) for p in mine]
        try:
            done = run(
                settings, Solving(problem), files, failures.append, ProgressBar("t", enabled=False)
            )
            status = max((o.status if o.error or o.invalid else 0 for o in done), default=0)
        except Exception as exc:  # reported below with the others
            failures.append(f"{type(exc).__name__}: {exc}")
            return
        if status != 0:
            failures.append(f"exit status {status}")
        failures.extend(
            f"{p.name}: wrong answers" for p in mine if outputs[p].getvalue() != expected[p]
        )

    clients = [threading.Thread(target=one_client, args=(paths[i::20],)) for i in range(20)]
    for thread in clients:
        thread.start()
    for thread in clients:
        thread.join(timeout=600)
    assert not failures, failures[:5]
    listed = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "status", "--json", "--broker", redis_server.url],
        capture_output=True,
        text=True,
        env=command_env(),
        timeout=120,
        check=True,
    )
    jobs = json.loads(listed.stdout)["jobs"]
    distinct = len({p.read_bytes() for p in paths})  # equal inputs are one job
    assert len(jobs) == distinct > 900 and {j["state"] for j in jobs} == {"done"}

    def text(*extra: str) -> list[str]:
        return subprocess.run(
            [sys.executable, "-m", "pipeline.cli", "status", *extra, "--broker", redis_server.url],
            capture_output=True,
            text=True,
            env=command_env(),
            timeout=120,
            check=True,
        ).stdout.splitlines()

    short, every = text(), text("--all")
    assert f"... and {distinct - 20} earlier finished jobs (--all lists them)" in short
    assert len([line for line in short if " done " in line]) == 20
    assert len([line for line in every if " done " in line]) == distinct
    used = client.info("memory")["used_memory"]
    print(
        f"\nRedis memory with {distinct} finished small jobs kept:"
        f" {used / distinct:,.0f} bytes per job"
    )
    assert not client.zcard(keys.OPEN_JOBS)  # none left for the sweep to read
    # every job's keys expire after result_ttl, without anyone deleting them
    left = [client.pttl(key) for key in client.scan_iter("gb:job:*", count=1000)]
    assert left and all(0 < ms <= 600_000 for ms in left), "a job key that never expires"


def test_a_redis_at_maxmemory_is_one_line_and_the_job_finishes_once_it_has_room(
    tmp_path: Path, workers: Workers
) -> None:
    """A Redis that evicts nothing fills up with a big input's chunks: the command ends with
    one line saying so (no traceback, no result file), and the same command finishes the
    job once Redis has room."""
    problem = get_problem("strgame")
    path = tmp_path / "big.in"
    path.write_text(input_text(problem, random_cases(problem, "random", 4000, 1000, seed=3)))
    server = RedisServer(tmp_path / "redis", extra="maxmemory 3mb\n").start()
    out = tmp_path / "big.out"
    command = [
        sys.executable,
        "-m",
        "pipeline.cli",
        "solve",
        "-q",
        "-p",
        "strgame",
        str(path),
        "-o",
        str(out),
        "--broker",
        server.url,
    ]
    try:
        full = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            env=command_env(GAMEBATCH_CHUNK__WINDOW="0"),
        )
        assert full.returncode == 1 and full.stderr.count("\n") == 1, full.stderr
        assert "Redis is full" in full.stderr and not out.exists()
        with redis.Redis.from_url(server.url) as client:
            client.config_set("maxmemory", "0")
        workers.url = server.url
        workers.start(concurrency=1)
        again = subprocess.run(
            command, capture_output=True, text=True, timeout=300, check=False, env=command_env()
        )
        assert again.returncode == 0, again.stderr
        assert out.read_text() == answers(problem, path.read_text())
    finally:
        server.stop()
