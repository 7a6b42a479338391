"""The in-memory store and the Redis store keep the same contract (so unit tests mean it)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pipeline.local.redis_server import RedisServer
from pipeline.store import keys
from pipeline.store.jobstate import PAYLOAD_OBJECT, JobState, Put
from pipeline.store.jobstore import JobStore
from pipeline.store.memstore import MemoryStore
from pipeline.store.protocol import Store
from pipeline.store.shards import ShardedStore
from tests.helpers import FakeClock

JOB = "strgame-" + "c" * 24
Advance = Callable[[float], None]


@pytest.fixture(params=["memory", "redis", "sharded"])
def store(request: pytest.FixtureRequest, tmp_path: object) -> Iterator[tuple[Store, Advance]]:
    """A store, and a way to let seconds pass for it: in memory, in Redis, or shards."""
    if request.param == "memory":
        clock = FakeClock()
        yield MemoryStore(clock), clock.advance
        return
    if request.param == "sharded":  # the job on one of three shards, the others empty
        clock = FakeClock()
        yield ShardedStore([MemoryStore(clock) for _ in range(3)]), clock.advance
        return
    server = request.getfixturevalue("redis_server")
    assert isinstance(server, RedisServer)
    redis_store = JobStore.from_url(server.url)
    yield redis_store, time.sleep
    redis_store.close()


def test_manifest_and_states(store: tuple[Store, Advance]) -> None:
    s, _ = store
    assert s.manifest(JOB) is None and s.progress(JOB) is None
    first = s.open_job(JOB, {"problem": "strgame", "lane": "bulk"})
    again = s.open_job(JOB, {"problem": "strgame", "lane": "interactive"})
    assert first == again and first["lane"] == "bulk" and first["state"] == "producing"
    assert s.jobs() == [JOB]
    assert s.finish_production(JOB, 2, 3) == JobState.RUNNING
    assert s.progress(JOB).state == JobState.RUNNING  # type: ignore[union-attr]
    assert s.save_answers(JOB, 0, "01") and not s.save_answers(JOB, 0, "11")
    assert s.save_answers(JOB, 1, "1")
    done = s.progress(JOB)
    assert done is not None
    assert (done.state, done.done, done.done_chunks, done.total) == (JobState.COMPLETE, 3, 2, 3)
    assert list(s.iter_answers(JOB, 2)) == ["01", "1"]
    assert s.answered(JOB) == {0, 1} and s.answered_among(JOB, [1, 5]) == [1]


def test_attempts_leases_and_abandoned_chunks(store: tuple[Store, Advance]) -> None:
    s, advance = store
    s.open_job(JOB, {"problem": "strgame"})
    s.put_chunk(JOB, 0, b"x")
    s.put_chunk(JOB, 1, b"y")
    assert s.begin_chunk(JOB, 0, "w1", 1) == (1, b"x", "")  # its payload with the attempt
    assert s.leased(JOB) and s.unleased(JOB) == [1]
    assert s.abandoned(JOB) == []
    advance(1.2)
    assert not s.leased(JOB) and sorted(s.unleased(JOB)) == [0, 1]
    assert s.abandoned(JOB) == [0] and s.abandoned(JOB) == []  # once per start
    assert s.begin_chunk(JOB, 0, "w2", 1).attempt == 2
    advance(1.2)
    assert s.abandoned(JOB) == [0]
    assert s.save_answers(JOB, 0, "0") and s.begin_chunk(JOB, 0, "w3", 1) == (0, None, "")  # done
    assert s.begin_chunk(JOB, 7, "w3", 1) == (-1, None, "")  # no such chunk
    s.fail_chunk(JOB, 1, "case 2: boom")
    assert s.progress(JOB).failures == {1: "case 2: boom"}  # type: ignore[union-attr]


def test_a_failed_chunk_queued_again_starts_afresh(store: tuple[Store, Advance]) -> None:
    """Its failure ended its runs: a rerun of the job neither counts them against the
    worker-death budget nor solves case by case (as after a death); a chunk put again
    without having failed keeps its count."""
    s, _ = store
    s.open_job(JOB, {"problem": "strgame"})
    assert s.claim_production(JOB, "p1", 30)
    for index in (0, 1):
        assert s.put_chunk(JOB, index, b"x", "d", "p1") == Put.STORED
        assert s.begin_chunk(JOB, index, "w1", 30).attempt == 1
    s.set_cursor(JOB, 0, 5)
    s.fail_chunk(JOB, 0, "changed after it was queued")
    for index in (0, 1):
        assert s.put_chunk(JOB, index, b"x", "d", "p1") == Put.STORED
    assert s.cursor(JOB, 0) is None and s.progress(JOB).failures == {}  # type: ignore[union-attr]
    assert s.begin_chunk(JOB, 0, "w2", 30).attempt == 1
    assert s.begin_chunk(JOB, 1, "w2", 30).attempt == 2


def test_one_producer_and_answers_of_the_bytes_in_force(store: tuple[Store, Advance]) -> None:
    """Only the job's producer queues its chunks; answers are kept only for the payload whose
    digest is the chunk's (a run of a replaced payload stores nothing); a final plan takes
    no other bytes; giving a job up removes it unless its plan is final."""
    s, advance = store
    s.open_job(JOB, {"problem": "strgame"})
    assert s.claim_production(JOB, "p1", 1) and not s.claim_production(JOB, "p2", 1)
    assert s.put_chunk(JOB, 0, b"x", "d1", "p2") == Put.NOT_PRODUCER
    assert s.chunk_payload(JOB, 0) is None
    assert s.put_chunk(JOB, 0, b"x", "d1", "p1") == Put.STORED
    assert s.begin_chunk(JOB, 0, "w1", 30) == (1, b"x", "d1")
    assert s.put_chunk(JOB, 0, b"y", "d2", "p1") == Put.STORED  # other bytes for chunk 0
    assert not s.save_answers(JOB, 0, "0", "", "d1")  # the run of the replaced payload
    assert s.answered_digests(JOB) == {} and s.chunk_payload(JOB, 0) == b"y"
    assert s.begin_chunk(JOB, 0, "w2", 30).digest == "d2"
    assert s.save_answers(JOB, 0, "1", "", "d2") and s.answered_digests(JOB) == {0: "d2"}
    assert s.put_chunk(JOB, 0, b"z", "d3", "p1") == Put.STORED  # drops the answers of d2
    assert s.answered_digests(JOB) == {} and s.progress(JOB).done == 0  # type: ignore[union-attr]
    assert s.begin_chunk(JOB, 0, "w3", 30).payload == b"z"
    assert s.save_answers(JOB, 0, "0", "", "d3")
    assert s.finish_production(JOB, 1, 1, "p2") is None  # not the producer: nothing written
    assert s.progress(JOB).state == JobState.PRODUCING  # type: ignore[union-attr]
    assert s.finish_production(JOB, 1, 1, "p1") == JobState.RUNNING
    assert s.put_chunk(JOB, 0, b"w", "d4", "p1") == Put.PLAN_DIFFERS  # the plan is final
    assert s.put_chunk(JOB, 0, b"z", "d3", "p1") == Put.STORED  # its own bytes again
    assert s.answered_digests(JOB) == {0: "d3"}
    assert s.put_chunk(JOB, 1, b"v", "d9", "p1") == Put.STORED  # a digest Redis lost:
    assert s.progress(JOB).state == JobState.PRODUCING  # type: ignore[union-attr]
    assert s.finish_production(JOB, 1, 1, "p1") == JobState.RUNNING  # final again, checked
    advance(1.2)  # p1 did not renew: another may produce
    assert not s.renew_production(JOB, "p1", 1) and s.claim_production(JOB, "p2", 30)
    s.abandon_production(JOB, "p2")  # a final plan is kept, and its producer let go
    assert s.answered_digests(JOB) == {0: "d3"} and s.claim_production(JOB, "p3", 30)
    s.release_production(JOB, "p3")
    other = "strgame-" + "d" * 24
    s.open_job(other, {"problem": "strgame"})
    assert s.claim_production(other, "p4", 30)
    assert s.put_chunk(other, 0, b"x", "d1", "p4") == Put.STORED
    # chunk 1 never reached this primary (a failover lost it): the plan cannot be final
    assert s.finish_production(other, 2, 2, "p4") is None
    assert s.progress(other).state == JobState.PRODUCING  # type: ignore[union-attr]
    s.abandon_production(other, "p5")  # not its producer: nothing happens
    assert s.manifest(other) is not None
    s.abandon_production(other, "p4")
    assert s.manifest(other) is None and s.chunk_payload(other, 0) is None
    assert s.jobs() == [JOB]


def test_only_a_job_with_every_answer_is_finished(store: tuple[Store, Advance]) -> None:
    s, _ = store
    assert not s.finish(JOB, 60)  # no such job: nothing is written
    assert s.progress(JOB) is None
    s.open_job(JOB, {"problem": "strgame"})
    assert not s.finish(JOB, 60)  # still producing
    s.finish_production(JOB, 2, 2)
    assert s.save_answers(JOB, 0, "1")
    assert not s.finish(JOB, 60)  # chunk 1 has no answers (as after a failover lost them)
    assert s.progress(JOB).state == JobState.RUNNING  # type: ignore[union-attr]
    assert s.save_answers(JOB, 1, "2")
    assert s.finish(JOB, 60) and s.finish(JOB, 60)  # idempotent
    assert s.progress(JOB).state == JobState.DONE  # type: ignore[union-attr]


def test_a_finished_job_is_not_cancelled(store: tuple[Store, Advance]) -> None:
    s, _ = store
    s.open_job(JOB, {"problem": "strgame"})
    s.finish_production(JOB, 1, 1)
    assert s.save_answers(JOB, 0, "1")
    assert s.finish(JOB, 60)
    assert s.cancel(JOB, 60) == (True, "done")
    assert s.progress(JOB).state == JobState.DONE  # type: ignore[union-attr]
    assert list(s.iter_answers(JOB, 1)) == ["1"]  # its answers stay for a re-run


def test_cancel_and_delete(store: tuple[Store, Advance]) -> None:
    s, _ = store
    s.open_job(JOB, {"problem": "strgame"})
    s.put_chunk(JOB, 0, b"x")
    s.add_invalid(JOB, ["a.in:3: case 1: bad"])
    assert s.invalid(JOB) == ["a.in:3: case 1: bad"]
    assert s.cancel(JOB, 60) == (True, "")
    assert s.cancel(JOB, 60) == (True, "cancelled")  # the state it ended in: no second cancel
    assert s.begin_chunk(JOB, 0, "w", 30).attempt == -1
    assert not s.save_answers(JOB, 0, "0")
    assert s.chunk_payload(JOB, 0) is None and s.invalid(JOB) == []
    assert s.progress(JOB).state == JobState.CANCELLED  # type: ignore[union-attr]
    assert s.finish_production(JOB, 2, 3) == JobState.CANCELLED  # a cancel is never undone
    assert s.progress(JOB).state == JobState.CANCELLED  # type: ignore[union-attr]
    s.delete(JOB)
    assert s.manifest(JOB) is None and s.jobs() == [] and s.cancel(JOB, 60) == (False, "")
    assert s.finish_production(JOB, 1, 1) is None and s.manifest(JOB) is None  # nothing made


def test_an_orphan_production_is_removed_only_when_no_producer_holds_it(
    store: tuple[Store, Advance],
) -> None:
    s, advance = store
    s.open_job(JOB, {"problem": "strgame"})
    assert s.claim_production(JOB, "p1", 1)
    s.put_chunk(JOB, 0, b"payload")
    assert not s.abandon_production(JOB, "")  # its producer holds it
    advance(1.2)  # the claim lapsed: the producer died
    assert s.abandon_production(JOB, "") and s.manifest(JOB) is None and s.jobs() == []
    s.open_job(JOB, {"problem": "strgame"})
    s.finish_production(JOB, 0, 0)  # a final plan: never an orphan
    assert not s.abandon_production(JOB, "") and s.manifest(JOB) is not None
    judging = "judge.strgame-" + "d" * 24
    s.open_job(judging, {"problem": "strgame", "kind": "judge"})  # a verdict job: no claims
    assert not s.abandon_production(judging, "") and s.manifest(judging) is not None


def test_sweep_claims_and_tables(store: tuple[Store, Advance]) -> None:
    s, advance = store
    assert s.claim_sweep("a", 1) and not s.claim_sweep("b", 1)
    advance(1.2)
    assert s.claim_sweep("b", 1)
    assert s.tables.get("t") is None
    s.tables.set("t", b"\x00\x01")
    assert s.tables.get("t") == b"\x00\x01"


@pytest.mark.parametrize("answers_lost", [False, True])
def test_a_done_state_that_a_failover_lost_is_written_again(
    redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch, answers_lost: bool
) -> None:
    """No replica is online (this Redis has none) and, as if a failover
    had lost it, the primary in force has the job running again: a job with every answer
    is marked done again, with its expiry, and the primary asked again is alone too; one
    whose answers were lost too is not done, and finish says so (they are solved again)."""
    s, other = JobStore.from_url(redis_server.url), JobStore.from_url(redis_server.url)
    s.open_job(JOB, {"problem": "strgame"})
    s.finish_production(JOB, 1, 1)
    s.save_answers(JOB, 0, "1")
    s.replicated = True
    asked = []

    def lose_it() -> int:  # asked how many replicas to wait for: none online
        asked.append(1)
        if len(asked) == 1:  # the new primary has what came before the first write
            other.set_state(JOB, JobState.RUNNING)
            other.client.persist(keys.job(JOB))
            if answers_lost:
                other.client.delete(keys.answers(JOB))
                other.client.hset(keys.job(JOB), "done_chunks", 0)
        return 0

    monkeypatch.setattr(s, "_replicas_online", lose_it)
    done = s.finish(JOB, 100)
    state = other.client.hget(keys.job(JOB), "state").decode()
    ttl = other.client.ttl(keys.job(JOB))
    if answers_lost:
        assert (done, state, ttl, len(asked)) == (False, "running", -1, 1)
    else:  # written twice, and the replicas counted twice
        assert (done, state, len(asked)) == (True, "done", 2) and 0 < ttl <= 100
    s.close()
    other.close()


def test_a_production_end_that_a_failover_lost_reads_as_a_lost_job(
    redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No replica acknowledges the end of production, and the primary in force has the job
    still producing: that is a lost job (None), which the producer reads again."""
    s, other = JobStore.from_url(redis_server.url), JobStore.from_url(redis_server.url)
    s.open_job(JOB, {"problem": "strgame"})
    s.replicated = True
    monkeypatch.setattr(s, "_replicas_online", lambda: 1)  # one online, and silent
    monkeypatch.setattr(s.client, "wait", lambda replicas, timeout: 0)
    assert s.finish_production(JOB, 1, 1) == JobState.RUNNING  # the primary still has it

    def lose_it(replicas: int, timeout: int) -> int:
        other.set_state(JOB, JobState.PRODUCING)  # the new primary never saw it
        return 0

    monkeypatch.setattr(s.client, "wait", lose_it)
    assert s.finish_production(JOB, 1, 1) is None
    s.close()
    other.close()


def test_a_replica_slow_to_answer_is_waited_for_and_only_a_missing_one_is_not(
    redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A WAIT that times out while a replica is online (a busy machine) is made again, and
    later writes still wait: going on alone for ALONE_SECONDS then would leave them to be
    lost by a failover. Only with no replica online does the store stop asking."""
    s = JobStore.from_url(redis_server.url)
    s.replicated = True
    answers = iter([0, 0, 1])
    waits: list[int] = []

    def slow(replicas: int, timeout: int) -> int:
        waits.append(timeout)
        return next(answers)

    online = {"role": "master", "slave0": {"ip": "127.0.0.1", "port": 1, "state": "online"}}
    monkeypatch.setattr(s.client, "wait", slow)
    monkeypatch.setattr(s.client, "info", lambda section: online)
    assert s._wait_for_a_replica() is True and len(waits) == 3
    s._replicas_until = 0.0  # the replicas are counted again (as REPLICAS_SECONDS later)
    syncing = {"role": "master", "slave0": {"ip": "127.0.0.1", "port": 1, "state": "send_bulk"}}
    monkeypatch.setattr(s.client, "wait", lambda replicas, timeout: waits.append(timeout) or 0)
    monkeypatch.setattr(s.client, "info", lambda section: syncing)
    assert s._wait_for_a_replica() is False and len(waits) == 3  # none online: alone, no WAIT
    assert s._wait_for_a_replica() is False and len(waits) == 3  # and not asked for a while
    assert s._alone_until > time.monotonic()
    s.close()


def test_workers_say_they_live_and_are_forgotten_when_silent(store: tuple[Store, Advance]) -> None:
    s, advance = store
    assert s.capacity(3) == 0 and s.workers_seen(3) == 0
    s.note_capacity("w1@a", 4, keep=2)
    s.note_capacity("w2@b", 2, keep=2)
    assert s.capacity(3) == 6 and s.workers_seen(3) == 2
    advance(1.2)
    s.note_capacity("w1@a", 4, keep=2)  # w1 again: counted once
    assert s.capacity(1) == 4 and s.capacity(3) == 6
    assert s.workers_seen(1) == 1 and s.workers_seen(3) == 2
    advance(1.2)
    s.note_capacity("w1@a", 4, keep=2)  # w2 silent for 2.4 s: gone
    assert s.capacity(60) == 4 and s.workers_seen(60) == 1


def test_a_later_run_names_its_payload_folder_too(store: tuple[Store, Advance]) -> None:
    s, _ = store
    first, second = "s3://b/inputs/c/1/", "s3://b/inputs/c/2/"
    s.open_job(JOB, {"problem": "strgame", PAYLOAD_OBJECT: first})
    s.add_payload_folder(JOB, second)
    s.add_payload_folder(JOB, second)  # once
    assert (s.manifest(JOB) or {})[PAYLOAD_OBJECT] == f"{first} {second}"
    assert s.payload_objects() == {first, second}


def test_a_write_waits_for_every_replica_online(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sentinels may promote any replica, by offsets seconds old: every one online must
    have a job's answers and done state, not just one."""
    with RedisServer(tmp_path / "p", password="pw") as primary:
        follow = f"replicaof 127.0.0.1 {primary.port}\nmasterauth pw\n"
        with (
            RedisServer(tmp_path / "r1", password="pw", extra=follow),
            RedisServer(tmp_path / "r2", password="pw", extra=follow),
        ):
            s = JobStore.from_url(primary.url)
            s.replicated = True
            deadline = time.monotonic() + 30
            while s._replicas_online() < 2:
                assert time.monotonic() < deadline, "the replicas never came online"
                s._replicas_until = 0.0
                time.sleep(0.05)
            asked: list[int] = []
            wait = s.client.wait
            monkeypatch.setattr(s.client, "wait", lambda n, ms: asked.append(n) or wait(n, ms))
            s.open_job(JOB, {"problem": "strgame"})
            s.finish_production(JOB, 1, 1)
            assert s.save_answers(JOB, 0, "1") and s.finish(JOB, 60)
            assert asked == [2, 2, 2]  # the production's end, the answers, the done state
            s.close()


def test_a_script_the_redis_running_it_never_loaded_is_sent_whole(
    redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failover between redis-py's load of a script and its run: the Redis that runs it
    does not know it even after the load (the failover soak met it), so it is sent whole."""
    s = JobStore.from_url(redis_server.url)
    s.client.script_flush()
    monkeypatch.setattr(s.client, "script_load", lambda text: "0" * 40)  # loaded elsewhere
    s.open_job(JOB, {"problem": "strgame"})
    assert s.progress(JOB).state == JobState.PRODUCING  # type: ignore[union-attr]
    s.close()
