"""How input bytes reach the workers, measured: through Redis (a chunk carries its cases, as
they are or compressed), as ranges of an object (s3://, on moto's S3 API server on loopback),
and through the payload store (a local file copied to the store, chunks naming its ranges).
Per transport: CPU per GB at Redis, at the workers and at the object store, Redis's peak
memory; then how many worker hosts one Redis core carries, and which stage binds first at 10,
50 and 100 hosts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
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
from pipeline.local.redis_server import RedisServer
from tests.s3server import BUCKET, S3, can_hide, hidden


@dataclass(frozen=True)
class Drained:
    """What one job cost, by stage (CPU seconds), and Redis's memory above its idle use."""

    seconds: float
    producer: float
    worker: float
    redis: float  # less what Redis spends per second on a connected idle worker host
    redis_idle: float  # CPU seconds per second: one idle worker host's polls and renewals
    store: float
    redis_peak: int


def transports(data: Path, quick: bool) -> list[Row]:
    """Every row (the object store's rows need moto_server, a dev dependency)."""
    count = 40 if quick else 2200  # 200,000-character strgame games: 8 MB, or 440 MB
    path = write_cases(data / f"transport-{count}.in", "strgame", "long", count, size=200000,
                       seed=4)  # fmt: skip
    expected = solve_in_process("strgame", path)
    size = path.stat().st_size
    with tempfile.TemporaryDirectory(prefix="gamebatch-transport-") as tmp:
        s3 = S3(Path(tmp) / "moto.log")
        try:
            url = f"s3://{BUCKET}/in/{path.name}"
            s3.client.upload_file(str(path), BUCKET, f"in/{path.name}")
            # the object runs' worker sees none of the input's folder: it shares nothing with
            # the producer but Redis and the store (where this machine allows it)
            apart = hidden([path.parent]) if can_hide() else []
            runs = {
                "bytes through Redis": _drain(path, str(path), {}, s3, expected),
                "compressed bytes (zstd 1)": _drain(
                    path, str(path), {"GAMEBATCH_COMPRESS_PAYLOADS": "true"}, s3, expected
                ),
                "object ranges (s3://)": _drain(path, url, s3.env, s3, expected, prefix=apart),
                "payload store": _drain(
                    path, str(path), {**s3.env, "GAMEBATCH_PAYLOAD_STORE": f"s3://{BUCKET}/spool"},
                    s3, expected, prefix=apart,
                ),
            }  # fmt: skip
        finally:
            s3.stop()
    return _rows(runs, size)


def _drain(
    path: Path,
    given: str,
    env_extra: dict[str, str],
    s3: S3,
    expected: bytes,
    *,
    prefix: list[str] | None = None,
) -> Drained:
    """One worker (one process, run by `prefix`) settled first, then `solve` of `given`:
    each stage's CPU."""
    with (
        tempfile.TemporaryDirectory(prefix="gamebatch-transport-") as tmp,
        RedisServer(Path(tmp) / "redis") as server,
    ):
        env = {"GAMEBATCH_BROKER_URL": server.url, **env_extra}
        client = redis.Redis.from_url(server.url)
        worker = subprocess.Popen(
            [*(prefix or []), sys.executable, "-m", "pipeline.cli", "worker", "--concurrency", "1"],
            env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
        try:
            time.sleep(3)  # started: what it used for that is not the job's
            quiet = redis_cpu(client)
            time.sleep(2)  # idle: Redis's cost of a worker host that waits for work
            redis_idle = (redis_cpu(client) - quiet) / 2
            idle, before = cpu_of_tree(worker.pid), redis_cpu(client)
            store, memory = cpu_of_tree(s3.process.pid), int(client.info("memory")["used_memory"])
            children = os.times()
            start = time.monotonic()
            out = Path(tmp) / "out"
            done = gamebatch("solve", "-q", "-p", "strgame", given, "-o", str(out), env=env)
            took = time.monotonic() - start
            after = os.times()
            if done.returncode != 0 or out.read_bytes() != expected:
                raise SystemExit(f"transports: {given}: {done.stderr.decode()[-500:]}")
            producer = (after.children_user + after.children_system) - (
                children.children_user + children.children_system
            )
            used = cpu_of_tree(worker.pid) - idle - took * idle_rate(worker.pid)
            return Drained(
                took,
                producer,
                max(used, 0.0),
                max(redis_cpu(client) - before - took * redis_idle, 0.0),
                redis_idle,
                cpu_of_tree(s3.process.pid) - store,
                int(client.info("memory")["used_memory_peak"]) - memory,
            )
        finally:
            os.killpg(worker.pid, signal.SIGTERM)
            worker.wait()


def _rows(runs: dict[str, Drained], size: int) -> list[Row]:
    gb = size / 1e9
    rows = []
    for name, d in runs.items():
        hosts = (d.worker / gb) / (d.redis / gb) if d.redis else float("inf")
        note = (
            f"{size / 1e6:.0f} MB in {d.seconds:.1f} s; CPU per GB: producer"
            f" {d.producer / gb:.1f} s, worker {d.worker / gb:.1f} s, Redis {d.redis / gb:.2f} s,"
            f" object store {d.store / gb:.1f} s; Redis peak +{d.redis_peak / 1e6:.1f} MB;"
            f" an idle worker host costs Redis {d.redis_idle * 1000:.1f} ms/s"
        )
        rows += [
            Row("transports", f"{name}: Redis CPU per GB of input (beyond idle hosts)",
                d.redis / gb, None, "s/GB", None, "", None, note),
            Row("transports", f"{name}: Redis peak memory above idle, per input byte",
                d.redis_peak / size, None, "B/B", None, "< 0.1 by reference", None),
            Row("transports", f"{name}: one-core worker hosts one Redis core carries",
                hosts, None, "hosts", None, "report", None,
                "worker CPU per GB / Redis CPU per GB"),
        ]  # fmt: skip
    rows += _sizing(runs, gb)
    return rows


def _sizing(runs: dict[str, Drained], gb: float) -> list[Row]:
    """For 10, 50 and 100 one-core worker hosts running flat out: the load on Redis and on
    the object store (in cores), from the measured CPU per GB and per idle host."""
    rows = []
    for name, d in runs.items():
        rate = gb / d.worker if d.worker else 0.0  # GB/s of one worker core
        for hosts in (10, 50, 100):
            redis_cores = hosts * (d.redis_idle + rate * d.redis / gb)
            store_cores = hosts * rate * d.store / gb
            rows.append(
                Row("sizing", f"{name}, {hosts} hosts: Redis cores needed", redis_cores, None,
                    "cores", None, "report", None,
                    f"object store {store_cores:.1f} cores (moto's); this charges the run's"
                    " time-bound Redis work (the collector's polls, leases) to its bytes:"
                    " pessimistic when the store is slow (docs/performance.md)")
            )  # fmt: skip
    return rows
