"""Jobs spread over two Redis servers by their id: real Redis, real sharded workers."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from pipeline.games.registry import get_problem
from pipeline.local.redis_server import RedisServer
from pipeline.store.jobstore import JobStore
from pipeline.store.shards import pick
from tests.conftest import Workers
from tests.helpers import answers
from tests.integration.server import Server, wait_until_ended
from tests.integration.test_pipeline import SMALL_CHUNKS, gamebatch, write_dataset

pytestmark = pytest.mark.integration


def _start_sharded_worker(pool: Workers, shards: str, log_dir: Path) -> None:
    """`gamebatch worker` with a shard beside its broker: one Celery worker for each."""
    pool.start(concurrency=1, GAMEBATCH_SHARDS=shards)
    log = log_dir / "worker-0.log"
    deadline = time.monotonic() + 30
    while log.read_text().count("ready.") < 2:
        assert time.monotonic() < deadline, log.read_text()[-2000:]
        time.sleep(0.05)


def _jobs(url: str) -> set[str]:
    store = JobStore.from_url(url)
    try:
        return set(store.jobs())
    finally:
        store.close()


def test_jobs_spread_over_two_redis_servers_each_whole_on_one(tmp_path: Path) -> None:
    problem = get_problem("strgame")
    inputs = write_dataset(tmp_path, "strgame", files=6, cases=60, seed=11)
    out = tmp_path / "out"
    out.mkdir()
    with RedisServer(tmp_path / "a") as a, RedisServer(tmp_path / "b") as b:
        pool = Workers(a.url, tmp_path)
        try:
            _start_sharded_worker(pool, b.url, tmp_path)
            # two inputs solved before the second Redis was a shard: their jobs stay on
            # the first, whichever shard their ids pick
            alone = {"GAMEBATCH_BROKER_URL": a.url, **SMALL_CHUNKS}
            (tmp_path / "early").mkdir()
            early = gamebatch(
                "solve",
                "-p",
                "strgame",
                *map(str, inputs[:2]),
                "--out-dir",
                f"{tmp_path}/early",
                env=alone,
            )
            assert early.returncode == 0, early.stderr
            before = _jobs(a.url)
            assert len(before) == 2 and _jobs(b.url) == set()

            sharded = {**alone, "GAMEBATCH_SHARDS": b.url}
            result = gamebatch(
                "solve", "-p", "strgame", *map(str, inputs), "--out-dir", str(out), env=sharded
            )
            assert result.returncode == 0, result.stderr
            for path in inputs:
                assert (out / f"{path.name}.out").read_text() == answers(problem, path.read_text())
            on_a, on_b = _jobs(a.url), _jobs(b.url)
            assert len(on_a | on_b) == 6 and not on_a & on_b and before <= on_a
            assert on_b and on_a - before  # each took new jobs: the ones their ids pick
            assert all(pick(job_id, 2) == 1 for job_id in on_b)
            assert all(pick(job_id, 2) == 0 for job_id in on_a - before)

            listed = gamebatch("status", "--json", "--all", env=sharded)
            assert listed.returncode == 0, listed.stderr
            assert {row["id"] for row in json.loads(listed.stdout)["jobs"]} == on_a | on_b
            assert len(json.loads(listed.stdout)["workers"]) == 2  # one per shard
        finally:
            pool.stop()
        # no worker now: every job is found whole on its shard, nothing is solved again
        again = gamebatch(
            "solve", "-p", "strgame", *map(str, inputs), "--out-dir", str(out), env=sharded
        )
        assert again.returncode == 0, again.stderr
        job_id = sorted(on_b)[0]
        collected = gamebatch("collect", job_id, "-o", str(tmp_path / "one.out"), env=sharded)
        assert collected.returncode == 0, collected.stderr
        expected = {answers(problem, path.read_text()) for path in inputs}
        assert (tmp_path / "one.out").read_text() in expected
        cancelled = gamebatch("cancel", job_id, env=sharded)
        assert cancelled.returncode == 1 and "ended" in cancelled.stdout + cancelled.stderr


def test_the_http_service_serves_jobs_on_every_shard(tmp_path: Path) -> None:
    problem = get_problem("strgame")
    inputs = write_dataset(tmp_path, "strgame", files=4, cases=50, seed=21)
    with RedisServer(tmp_path / "a") as a, RedisServer(tmp_path / "b") as b:
        pool = Workers(a.url, tmp_path)
        server = Server(tmp_path, a.url, shards=[b.url])
        try:
            _start_sharded_worker(pool, b.url, tmp_path)
            server.start()
            with server.client() as http:
                ids = []
                for path in inputs:
                    created = http.put(
                        "/v1/jobs", params={"problem": "strgame"}, content=path.read_bytes()
                    )
                    assert created.status_code == 201, created.text
                    ids.append(created.json()["id"])
                for job_id, path in zip(ids, inputs, strict=True):
                    assert wait_until_ended(http, job_id)["state"] == "done"
                    result = http.get(f"/v1/jobs/{job_id}/result")
                    assert result.text == answers(problem, path.read_text())
                assert {j["id"] for j in http.get("/v1/jobs").json()["jobs"]} == set(ids)
            on_a, on_b = _jobs(a.url), _jobs(b.url)
            assert on_a | on_b == set(ids) and on_a and on_b and not on_a & on_b
        finally:
            server.stop()
            pool.stop()
