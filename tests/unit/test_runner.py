"""run_chunk against the in-memory store: each outcome, retries, poison cases, cancellation."""

from __future__ import annotations

import threading
import time

import pytest

from pipeline.data.messages import ChunkPayload
from pipeline.store.jobstate import JobState
from pipeline.store.memstore import MemoryStore
from tests.helpers import FakeClock
from workers.runner import Lease, Outcome, Policy, run_chunk

JOB = "nim-" + "a" * 24
POLICY = Policy(holder="test", lease_seconds=30, max_attempts=3)


def _job(store: MemoryStore, chunks: list[list[object]], problem: str = "strgame") -> None:
    store.open_job(JOB, {"problem": problem})
    first = 1
    for index, cases in enumerate(chunks):
        store.put_chunk(JOB, index, ChunkPayload(problem, first, cases).encode())
        first += len(cases)
    store.finish_production(JOB, len(chunks), first - 1)


def test_a_chunk_is_solved_once() -> None:
    store = MemoryStore()
    _job(store, [[[1, "a"], [2, "a"]], [[1, "ab"], None]])
    assert run_chunk(store, JOB, 1, POLICY) == Outcome.SOLVED
    assert run_chunk(store, JOB, 0, POLICY) == Outcome.SOLVED
    assert run_chunk(store, JOB, 0, POLICY) == Outcome.DUPLICATE  # delivered twice
    assert list(store.iter_answers(JOB, 2)) == ["01", "1-"]  # Pure Dirty, Dirty INVALID
    counters = store.progress(JOB)
    assert counters is not None
    assert (counters.state, counters.done, counters.done_chunks) == (JobState.COMPLETE, 4, 2)


def test_a_chunk_of_no_job_or_a_cancelled_one_is_gone() -> None:
    store = MemoryStore()
    assert run_chunk(store, JOB, 0, POLICY) == Outcome.GONE
    _job(store, [[[1, "a"]]])
    assert store.cancel(JOB, 60)
    assert run_chunk(store, JOB, 0, POLICY) == Outcome.GONE
    assert store.progress(JOB) is not None and store.answered(JOB) == set()


def test_a_malformed_payload_fails_its_chunk_with_one_reason() -> None:
    store = MemoryStore()
    _job(store, [[[1, "a"]]])
    store.put_chunk(JOB, 0, b"{not json")
    assert run_chunk(store, JOB, 0, POLICY) == Outcome.FAILED
    counters = store.progress(JOB)
    assert counters is not None and counters.state == JobState.FAILED
    assert counters.failures[0].startswith("malformed chunk payload: ")


def test_an_unknown_game_and_a_solver_error_name_what_failed() -> None:
    store = MemoryStore()
    _job(store, [[[1, "a"]]], problem="nosuchgame")
    assert run_chunk(store, JOB, 0, POLICY) == Outcome.FAILED
    assert store.progress(JOB).failures == {0: "unknown problem 'nosuchgame'"}  # type: ignore[union-attr]
    store = MemoryStore()
    _job(store, [[[1, "a"], [1, 5]]])  # the second case is no strgame case: the solver raises
    assert run_chunk(store, JOB, 0, POLICY) == Outcome.FAILED
    assert store.progress(JOB).failures[0].startswith("case 2: ")  # type: ignore[union-attr]


@pytest.mark.parametrize(("cases", "culprit"), [(1, "case 1"), (3, "case 2")])
def test_a_chunk_whose_worker_keeps_dying_fails_naming_the_case(cases: int, culprit: str) -> None:
    clock = FakeClock()
    store = MemoryStore(clock)
    _job(store, [[[1, "a"]] * cases])
    for _ in range(POLICY.max_attempts):  # a worker takes the chunk and dies on case 2
        assert store.begin_chunk(JOB, 0, "dead", 30).attempt > 0
        if cases > 1:
            store.set_cursor(JOB, 0, 1)
    assert run_chunk(store, JOB, 0, POLICY) == Outcome.FAILED
    failure = store.progress(JOB).failures[0]  # type: ignore[union-attr]
    assert failure == f"{culprit}: its worker died in 3 attempts"


def test_a_retried_chunk_records_the_case_it_is_solving() -> None:
    store = MemoryStore()
    _job(store, [[[1, "a"], [1, "b"]]])
    store.begin_chunk(JOB, 0, "dead", 30)  # a first run died
    seen: list[int | None] = []
    original = store.set_cursor

    def spy(job_id: str, index: int, offset: int) -> None:
        original(job_id, index, offset)
        seen.append(offset)

    store.set_cursor = spy  # type: ignore[method-assign]
    assert run_chunk(store, JOB, 0, POLICY) == Outcome.SOLVED
    assert seen == [0, 1]
    assert store.cursor(JOB, 0) is None  # cleared with the answers


def test_one_thread_renews_the_lease_of_each_running_chunk() -> None:
    store = MemoryStore()
    _job(store, [[[1, "a"]], [[1, "b"]]])
    renewed: list[tuple[str, int]] = []
    original = store.refresh_lease

    def spy(job_id: str, index: int, holder: str, lease: int) -> None:
        original(job_id, index, holder, lease)
        renewed.append((job_id, index))

    store.refresh_lease = spy  # type: ignore[method-assign]
    quick = Policy(holder="test", lease_seconds=1, max_attempts=3)  # renewed every 1/3 s
    before = {t.ident for t in threading.enumerate() if t.name == "leases"}
    with Lease(store, JOB, 0, quick), Lease(store, JOB, 1, quick):
        time.sleep(1.2)
    leases = [t for t in threading.enumerate() if t.name == "leases"]
    assert len(leases) == 1 and (not before or {t.ident for t in leases} == before)
    assert renewed.count((JOB, 0)) >= 2 and renewed.count((JOB, 1)) >= 2
    count = len(renewed)
    time.sleep(0.5)
    assert len(renewed) == count, "a lease was renewed after its chunk ended"
