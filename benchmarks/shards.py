"""Jobs spread over shards: each Redis is held to a small share of a core by a cgroup v1
quota, so that it, not the 8 slow worker hosts, binds a cluster that carries its bytes
through Redis; the same jobs, queued beforehand, drain on one Redis and on two."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import redis

from benchmarks.common import (
    SHARE,
    Row,
    gamebatch,
    quotas,
    quotas_work,
    redis_cpu,
    solve_in_process,
    throttled_worker,
    write_cases,
)
from pipeline.local.redis_server import RedisServer
from pipeline.store import keys

REDIS_SHARE = 0.05  # of a core, per Redis: about 50 MB/s of payload bytes each
HOSTS = 8  # worker hosts of SHARE of a core each: about 250 MB/s in all (2 in quick mode)


def shards(data: Path, quick: bool) -> list[Row]:
    """Throughput of the same jobs on one throttled Redis and on two shards of it."""
    if not quotas_work():
        return [Row("shards", "jobs over shards", 0.0, None, "", None, "", None,
                    "skipped: needs root and cgroup v1's cpu controller")]  # fmt: skip
    files, games = (4, 10) if quick else (8, 275)  # 200,000-character games: 8 MB or 440 MB
    paths = [
        write_cases(
            data / f"shards-{i}-{games}.in", "strgame", "long", games, size=200000, seed=40 + i
        )
        for i in range(files)
    ]
    expected = {path: solve_in_process("strgame", path) for path in paths}
    megabytes = sum(path.stat().st_size for path in paths) / 1e6
    rows, rate, bound = [], {}, {}
    # quick mode: one host of a whole core (a slow one takes seconds to start), a smoke run
    hosts, share, counts = (1, 1.0, (1, 2)) if quick else (HOSTS, SHARE, (1, 2, 4))
    for count in counts:
        seconds, busy, spread = _drain(paths, count, (hosts, share), expected)
        rate[count] = megabytes / seconds
        bound[count] = files / max(spread)  # a job is whole on one shard: the busiest binds
        rows.append(
            Row("shards", f"{files} jobs, bytes through Redis: {count} Redis of"
                f" {REDIS_SHARE:g} core", rate[count], None, "MB/s", None, "report", None,
                f"jobs per Redis {spread}; Redis CPU {', '.join(f'{b:.1f}' for b in busy)} s;"
                f" {hosts} worker host(s) of {share:g} core")
        )  # fmt: skip
    rows += [
        Row("shards", f"speed-up of {n} shards over 1", rate[n] / rate[1], None, "", None,
            f"{n}.0 = the control plane grows with its Redis instances", None,
            f"{megabytes:.0f} MB queued while the workers are held; at most {bound[n]:.2f}x"
            " with the jobs spread as they were")
        for n in counts[1:]
    ]  # fmt: skip
    return rows


def _drain(
    paths: list[Path], count: int, workers: tuple[int, float], expected: dict[Path, bytes]
) -> tuple[float, list[float], list[int]]:
    """Seconds from the first chunk's start to the last answers of every job, queued on
    `count` throttled Redis servers while the `workers` (hosts, share of a core each),
    started and ready, are held (SIGSTOP); each Redis's CPU seconds from their release to
    the last result, and how many jobs each held."""
    with (
        tempfile.TemporaryDirectory(prefix="gamebatch-shards-") as tmp,
        contextlib.ExitStack() as stack,
    ):
        cores = stack.enter_context(quotas(count, REDIS_SHARE))  # removed after the servers
        servers = [stack.enter_context(RedisServer(Path(tmp) / f"redis-{i}")) for i in range(count)]
        for server, group in zip(servers, cores, strict=True):
            assert server.process is not None
            (group / "cgroup.procs").write_text(str(server.process.pid))
        env = {"GAMEBATCH_BROKER_URL": servers[0].url}
        if count > 1:
            env["GAMEBATCH_SHARDS"] = ",".join(server.url for server in servers[1:])
        hosts, share = workers
        groups = stack.enter_context(quotas(hosts, share))
        started = [throttled_worker(env, group) for group in groups]
        stack.callback(_kill, started)
        _wait_ready(env, hosts * count)  # a slow host takes seconds to start
        _signal(started, signal.SIGSTOP)  # held while the jobs are queued
        jobs = [
            gamebatch("submit", "-p", "strgame", str(path), env=env).stdout.split()[-1].decode()
            for path in paths
        ]
        clients = [redis.Redis.from_url(server.url) for server in servers]
        spread = [int(client.zcard(keys.JOBS)) for client in clients]
        before = [redis_cpu(client) for client in clients]
        _signal(started, signal.SIGCONT)
        for job, path in zip(jobs, paths, strict=True):
            out = Path(tmp) / f"{path.name}.out"
            gamebatch("collect", job, "-o", str(out), env=env)
            if out.read_bytes() != expected[path]:
                raise SystemExit(f"shards: wrong answers for {path.name} on {count} Redis")
        busy = [redis_cpu(client) - b for client, b in zip(clients, before, strict=True)]
        views = [json.loads(gamebatch("status", job, "--json", env=env).stdout) for job in jobs]
        seconds = max(v["answered"] for v in views) - min(v["started"] for v in views)
        return float(seconds), busy, spread


def _wait_ready(env: dict[str, str], count: int) -> None:
    """Return once `count` workers answer a ping."""
    deadline = time.monotonic() + 120
    while len(json.loads(gamebatch("status", "--json", env=env).stdout)["workers"]) < count:
        if time.monotonic() > deadline:
            raise SystemExit(f"shards: {count} workers did not start")
        time.sleep(0.5)


def _signal(workers: list[subprocess.Popen[bytes]], signum: int) -> None:
    for worker in workers:
        os.killpg(worker.pid, signum)


def _kill(workers: list[subprocess.Popen[bytes]]) -> None:
    for worker in workers:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()
