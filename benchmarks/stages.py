"""What a chunk costs outside the solver, and the ceiling of one Redis: a job queued first,
then drained by the workers, with the CPU time of Redis, of the workers and of the solver
alone measured for the same cases."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import redis

from benchmarks.common import (
    Row,
    cpu_of_tree,
    gamebatch,
    idle_rate,
    redis_cpu,
    solve_in_process,
    write_cases,
)
from pipeline.games.reader import read_cases
from pipeline.games.registry import get_problem
from pipeline.games.tokens import TokenReader
from pipeline.local.redis_server import RedisServer
from pipeline.store import keys


def _drain(path: Path, game: str, env_extra: dict[str, str]) -> dict[str, float]:
    """Start one worker process and let it settle, then queue `path` and collect it: the CPU
    seconds the worker and Redis spent on the job, its chunks and its payload bytes."""
    with (
        tempfile.TemporaryDirectory(prefix="gamebatch-stage-") as tmp,
        RedisServer(Path(tmp) / "redis") as server,
    ):
        env = {"GAMEBATCH_BROKER_URL": server.url, **env_extra}
        client = redis.Redis.from_url(server.url)
        worker = subprocess.Popen(
            [sys.executable, "-m", "pipeline.cli", "worker", "--concurrency", "1"],
            env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
        try:
            time.sleep(4)  # started and idle: what it used for that is not the job's
            idle, before = cpu_of_tree(worker.pid), redis_cpu(client)
            start = time.monotonic()
            submitted = gamebatch("submit", "-p", game, str(path), env=env).stdout.split()
            job = submitted[-1].decode()
            out = Path(tmp) / "out"
            gamebatch("collect", job, "-o", str(out), env=env)
            took = time.monotonic() - start
            used = cpu_of_tree(worker.pid) - idle - (took * idle_rate(worker.pid))
            redis_used = redis_cpu(client) - before
            if out.read_bytes() != solve_in_process(game, path):
                raise SystemExit(f"stages: wrong answers for {path.name}")
            chunks = int(client.hget(keys.job(job), "chunks") or 0)
        finally:
            os.killpg(worker.pid, signal.SIGTERM)
            worker.wait()
    payload = path.stat().st_size  # every input byte goes through Redis once, as payload
    return {"chunks": chunks, "payload": payload, "worker": used, "redis": redis_used}


def _solver_seconds(game: str, path: Path) -> float:
    """CPU seconds of the game's solve() alone over every case of the file."""
    problem = get_problem(game)
    problem.prepare(None)
    with path.open("rb") as stream:
        cases = [n.case for n in read_cases(problem, TokenReader(stream, str(path)))]
    start = time.process_time()
    for case in cases:
        problem.solve(case)
    return time.process_time() - start


def chunk_costs(data: Path, quick: bool) -> list[Row]:
    """Per chunk: worker CPU outside the solver; per chunk and per MB: Redis CPU, and the
    ceiling of one Redis core that follows."""
    rows = []
    kinds = [  # many small chunks, and few chunks of long payloads
        ("pathgame", "small", 20000 if quick else 200000, 6, {"GAMEBATCH_CHUNK__MAX_CASES": "200"}),
        ("strgame", "long", 40 if quick else 400, 200000, {}),
    ]
    for game, shape, count, size, extra in kinds:
        path = write_cases(data / f"stage-{game}-{shape}-{count}.in", game, shape, count,
                           size=size, seed=3)  # fmt: skip
        solver = _solver_seconds(game, path)
        got = _drain(path, game, extra)
        chunks, megabytes = got["chunks"], path.stat().st_size / 1e6
        outside = max(got["worker"] - solver, 0.0) / chunks * 1000
        redis_chunk = got["redis"] / chunks * 1e6
        redis_mb = got["redis"] / megabytes
        name = f"{game} {shape}, {count} cases in {chunks} chunks ({megabytes:.0f} MB)"
        rows += [
            Row("per chunk", f"{name}: worker CPU outside the solver, per chunk", outside, None,
                "ms", None, "", None,
                f"worker {got['worker']:.2f} s of CPU, the solver alone {solver:.2f} s;"
                f" {got['payload'] / chunks / 1e3:,.0f} kB of payload per chunk"),
            Row("redis stage", f"{name}: Redis CPU per chunk (queue and drain)", redis_chunk,
                None, "us", None, "", None,
                f"one Redis core: at most {1e6 / redis_chunk:,.0f} chunks/s,"
                f" {1 / redis_mb:,.0f} MB/s of input" if redis_mb else ""),
        ]  # fmt: skip
    return rows
