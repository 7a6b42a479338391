"""A cluster in miniature: N worker processes, each held to a tenth of a core by a cgroup v1
CPU quota (each a slow host), drain one job queued beforehand, so that Redis meets the load
of a cluster ten times larger. Throughput against N for each transport (bytes through Redis,
compressed, file references): where Redis binds, it stops growing with N."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import tempfile
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

TRANSPORTS = {
    "bytes through Redis": {},
    "compressed bytes (zstd 1)": {"GAMEBATCH_COMPRESS_PAYLOADS": "true"},
    "file references": {"GAMEBATCH_FILE_PAYLOADS": "true"},
}


def cluster(data: Path, quick: bool) -> list[Row]:
    """Throughput per transport and number of slow hosts, and each one's scaling from one."""
    if not quotas_work():
        return [Row("cluster", "cluster in miniature", 0.0, None, "", None, "", None,
                    "skipped: needs root and cgroup v1's cpu controller")]  # fmt: skip
    count = 40 if quick else 2200  # 200,000-character strgame games: 8 MB, or 440 MB
    path = write_cases(data / f"cluster-{count}.in", "strgame", "long", count, size=200000,
                       seed=5)  # fmt: skip
    expected = solve_in_process("strgame", path)
    megabytes = path.stat().st_size / 1e6
    sizes = (1, 2) if quick else (1, 2, 4, 8)
    rows = []
    for name, env in TRANSPORTS.items():
        drained = {n: _drain(path, env, n, expected) for n in sizes}
        rate = {n: megabytes / seconds for n, (seconds, _) in drained.items()}
        for n in sizes:
            rows.append(
                Row("cluster", f"{name}: {n} worker host(s) of {SHARE:g} core", rate[n], None,
                    "MB/s", None, "report", None,
                    f"{rate[n] / rate[1]:.2f}x one host; {n * SHARE:g} cores of workers;"
                    f" Redis {drained[n][1] / (megabytes / 1000):.2f} s of CPU per GB")
            )  # fmt: skip
        most = sizes[-1]
        rows.append(
            Row("cluster", f"{name}: speed-up of {most} hosts over 1, per host", rate[most] /
                rate[1] / most, None, "", None, "1.0 = bound by the workers", None,
                f"{megabytes:.0f} MB queued before the workers start; Redis unthrottled")
        )  # fmt: skip
    return rows


def _drain(
    path: Path, env_extra: dict[str, str], hosts: int, expected: bytes
) -> tuple[float, float]:
    """Seconds from the first chunk's start to the last answers, with `hosts` throttled
    workers of one process each on a job queued beforehand; and Redis's CPU seconds from
    the workers' start to the result (their start and the collector's polls included)."""
    with (
        tempfile.TemporaryDirectory(prefix="gamebatch-cluster-") as tmp,
        RedisServer(Path(tmp) / "redis") as server,
        quotas(hosts, SHARE) as groups,
    ):
        env = {"GAMEBATCH_BROKER_URL": server.url, **env_extra}
        job = gamebatch("submit", "-p", "strgame", str(path), env=env).stdout.split()[-1].decode()
        client = redis.Redis.from_url(server.url)
        before = redis_cpu(client)
        workers = [throttled_worker(env, group) for group in groups]
        try:
            out = Path(tmp) / "result.out"
            gamebatch("collect", job, "-o", str(out), env=env)
            busy = redis_cpu(client) - before
            if out.read_bytes() != expected:
                raise SystemExit(f"cluster: wrong answers with {hosts} host(s)")
            status = json.loads(gamebatch("status", job, "--json", env=env).stdout)
            seconds = float(status["answered"] - status["started"])
            return seconds, busy
        finally:
            for worker in workers:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(worker.pid, signal.SIGKILL)
                worker.wait()
