"""Recovery, the workers' sweep and the collector against the in-memory store, on a fake clock."""

from __future__ import annotations

import io

import pytest

from pipeline.config import load_settings
from pipeline.data import collector
from pipeline.data.collector import CollectTimeout
from pipeline.errors import JobFailed, JobLost
from pipeline.games.registry import get_problem
from pipeline.jobs.recovery import Recovery, sweep
from pipeline.store.memstore import MemoryStore
from tests.helpers import FakeClock

JOB = "strgame-" + "b" * 24
SETTINGS = load_settings(broker_url="redis://127.0.0.1:1/0", lease_seconds=30, stall_seconds=60)


def _job(store: MemoryStore, chunks: int) -> None:
    store.open_job(JOB, {"problem": "strgame"})
    for index in range(chunks):
        store.put_chunk(JOB, index, b"payload")
    store.finish_production(JOB, chunks, chunks)


def test_recovery_requeues_a_chunk_whose_lease_expired_once_per_start() -> None:
    clock = FakeClock()
    store = MemoryStore(clock)
    _job(store, 3)
    sent: list[int] = []
    recovery = Recovery(
        store, lambda j, i: sent.append(i), lambda: 1, lease=30, stall=60, clock=clock
    )
    store.begin_chunk(JOB, 1, "w", 30)
    clock.advance(11)
    recovery.tick(store.progress(JOB))  # type: ignore[arg-type]
    assert sent == []  # the lease still holds
    clock.advance(20)
    recovery.tick(store.progress(JOB))  # type: ignore[arg-type]
    assert sent == [1]  # the worker is gone: queued again
    clock.advance(11)
    recovery.tick(store.progress(JOB))  # type: ignore[arg-type]
    assert sent == [1], "re-queued twice for one start"


def test_recovery_requeues_waiting_chunks_of_a_stalled_job_with_an_empty_queue() -> None:
    clock = FakeClock()
    store = MemoryStore(clock)
    _job(store, 2)
    sent: list[int] = []
    waiting = [3]
    recovery = Recovery(
        store, lambda j, i: sent.append(i), lambda: waiting[0], lease=30, stall=60, clock=clock
    )
    recovery.tick(store.progress(JOB))  # type: ignore[arg-type]  # its stall clock starts
    clock.advance(61)
    recovery.tick(store.progress(JOB))  # type: ignore[arg-type]
    assert sent == [], "messages are still waiting: nothing was lost"
    waiting[0] = 0
    clock.advance(11)
    recovery.tick(store.progress(JOB))  # type: ignore[arg-type]
    assert sorted(sent) == [0, 1]


def test_the_sweep_recovers_lost_chunks_with_no_one_waiting() -> None:
    clock = FakeClock()
    store = MemoryStore(clock)
    _job(store, 3)
    store.begin_chunk(JOB, 0, "w", 30)
    store.save_answers(JOB, 0, "0")
    store.begin_chunk(JOB, 2, "w", 30)
    sent: list[int] = []
    assert sweep(store, lambda j, i: sent.append(i), SETTINGS) == 0
    clock.advance(31)
    assert sweep(store, lambda j, i: sent.append(i), SETTINGS) == 1 and sent == [2]
    clock.advance(61)  # no answers for a minute, nothing queued, nothing leased
    assert sweep(store, lambda j, i: sent.append(i), SETTINGS) == 2 and sorted(sent[1:]) == [1, 2]


def test_the_collector_writes_answers_in_input_order() -> None:
    store = MemoryStore()
    _job(store, 3)
    for index, codes in ((2, "1"), (0, "01"), (1, "-")):
        store.save_answers(JOB, index, codes)
    store.finish_production(JOB, 3, 4)
    done = collector.wait_for(store, JOB, poll=0, timeout=1)
    out = io.StringIO()
    collector.write_result(store, JOB, get_problem("strgame"), done, out)
    assert out.getvalue() == "Pure\nDirty\nINVALID\nDirty\n"


def test_the_collector_names_why_a_job_ended() -> None:
    store = MemoryStore()
    with pytest.raises(JobLost):
        collector.wait_for(store, JOB, poll=0)
    _job(store, 2)
    with pytest.raises(CollectTimeout, match=r"not finished after 0\.01 s"):
        collector.wait_for(store, JOB, poll=0, timeout=0.01)
    store.fail_chunk(JOB, 1, "case 2: boom")
    with pytest.raises(JobFailed, match="failed: case 2: boom"):
        collector.wait_for(store, JOB, poll=0)
    store.cancel(JOB, 60)
    with pytest.raises(JobFailed, match="was cancelled"):
        collector.wait_for(store, JOB, poll=0)


def test_answers_that_do_not_add_up_are_refused() -> None:
    store = MemoryStore()
    _job(store, 1)
    store.save_answers(JOB, 0, "01")
    store.finish_production(JOB, 1, 3)  # three cases announced, two answered
    done = store.progress(JOB)
    assert done is not None
    with pytest.raises(JobFailed, match="has 2 answers for 3 cases"):
        collector.write_result(store, JOB, get_problem("strgame"), done, io.StringIO())


def test_the_sweep_recovers_a_job_whose_messages_were_lost_before_any_chunk_started() -> None:
    clock = FakeClock()
    store = MemoryStore(clock)
    _job(store, 2)  # queued, then the broker lost every message: no worker ever started one
    sent: list[int] = []
    clock.advance(59)
    assert sweep(store, lambda j, i: sent.append(i), SETTINGS) == 0
    clock.advance(2)  # a minute since the job was opened, with nothing to show for it
    assert sweep(store, lambda j, i: sent.append(i), SETTINGS) == 2 and sorted(sent) == [0, 1]


def test_the_sweep_removes_a_job_whose_producer_died_while_it_produced() -> None:
    """A job still producing whose producer's claim lapsed (the producer died) is removed once
    it has been idle for stall_seconds: no collector could ever finish it, and a re-run
    produces it anew. One whose producer still holds it is left alone."""
    clock = FakeClock()
    store = MemoryStore(clock)
    other = "strgame-" + "c" * 24
    for job_id, token, seconds in ((JOB, "dead", 30.0), (other, "alive", 1000.0)):
        store.open_job(job_id, {"problem": "strgame"})
        assert store.claim_production(job_id, token, seconds)
        store.put_chunk(job_id, 0, b"payload")
    sent: list[int] = []
    clock.advance(45)  # the claim lapsed, but the job has not been idle a minute yet
    sweep(store, lambda j, i: sent.append(i), SETTINGS)
    assert store.manifest(JOB) is not None
    clock.advance(20)
    sweep(store, lambda j, i: sent.append(i), SETTINGS)
    assert store.manifest(JOB) is None and JOB not in store.jobs()
    assert store.manifest(other) is not None and other in store.jobs()  # its producer lives
