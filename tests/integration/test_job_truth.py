"""A job's state has one truth: a cancel, wherever it comes from, ends the job and its HTTP
record in one write, and no runner's later ending undoes it (a real Redis, real scripts)."""

from __future__ import annotations

import json

import redis

from pipeline.local.redis_server import RedisServer
from pipeline.server.lifecycle import run_recorded
from pipeline.store.jobstore import JobStore
from pipeline.store.records import Records

JOB = "strgame-" + "d" * 24


def _events(client: redis.Redis) -> list[dict[str, object]]:
    rows = client.xrange("gb:api:events")
    return [json.loads(fields[b"data"]) for _, fields in rows]  # type: ignore[index]


def test_a_cancel_ends_the_job_and_its_record_together(redis_server: RedisServer) -> None:
    client = redis.Redis.from_url(redis_server.url)
    store, records = JobStore(client), Records(client, "here")
    assert records.open(JOB, {"problem": "strgame", "owner": "ann"})
    assert records.begin(JOB, state="producing", runner=1)
    store.open_job(JOB, {"problem": "strgame"})
    store.put_chunk(JOB, 0, b"x")
    assert records.pending_count() == 1
    assert store.cancel(JOB, 60) == (True, "")
    record = records.get(JOB)
    assert record is not None and record["state"] == "cancelled" and "finished" in record
    assert store.manifest(JOB)["state"] == "cancelled"  # type: ignore[index]
    assert records.pending_count() == 0  # the server owes it nothing: a new upload fits
    assert _events(client) == [{"type": "cancelled", "job": JOB}]
    # the runner ends later: it neither revives the record nor sends a second event
    assert not records.finish(JOB, "done", event="done", total=3)
    assert not records.begin(JOB, state="producing")
    assert records.get(JOB)["state"] == "cancelled"  # type: ignore[index]
    assert len(_events(client)) == 1
    assert store.cancel(JOB, 60) == (True, "cancelled")  # the state it ended in; no write
    assert len(_events(client)) == 1


def test_a_queued_upload_is_cancelled_before_its_job_exists(redis_server: RedisServer) -> None:
    client = redis.Redis.from_url(redis_server.url)
    store, records = JobStore(client), Records(client, "here")
    records.open(JOB, {"problem": "strgame"})
    assert store.cancel(JOB, 60) == (True, "") and store.manifest(JOB) is None
    ran: list[bool] = []
    ended = run_recorded(
        records, JOB, lambda: (ran.append(True), ("done", {}))[1], begun={"state": "producing"}
    )
    assert ended is None and ran == []  # the runner that takes it runs nothing


def test_an_ended_record_is_not_cancelled(redis_server: RedisServer) -> None:
    client = redis.Redis.from_url(redis_server.url)
    store, records = JobStore(client), Records(client, "here")
    records.open(JOB, {"problem": "strgame"})
    ended = run_recorded(records, JOB, lambda: ("done", {"total": 2}), begun={"state": "producing"})
    assert ended == ("done", {"total": 2})
    assert store.cancel(JOB, 60) == (True, "done")
    assert records.get(JOB)["state"] == "done"  # type: ignore[index]
    assert [e["type"] for e in _events(client)] == ["done"]
    assert store.cancel("strgame-" + "e" * 24, 60) == (False, "")  # no such job
