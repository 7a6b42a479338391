"""Jobs spread over shards: which shard a job id picks, and the store that routes to it."""

from __future__ import annotations

from collections import Counter

import pytest

from pipeline.config import load_settings
from pipeline.errors import UsageError
from pipeline.jobs.recovery import sweep
from pipeline.store.jobstate import JobState
from pipeline.store.memstore import MemoryStore
from pipeline.store.shards import ShardedStore, pick
from tests.helpers import FakeClock

IDS = [f"strgame-{n:024x}" for n in range(6000)]


def test_job_ids_spread_evenly_over_the_shards() -> None:
    for count in (2, 3, 5):
        spread = Counter(pick(job_id, count) for job_id in IDS)
        assert sorted(spread) == list(range(count))
        share = len(IDS) / count
        assert all(abs(n - share) < 0.08 * share for n in spread.values()), spread


def test_a_shard_added_takes_its_share_of_jobs_and_moves_no_other() -> None:
    moved = [job_id for job_id in IDS if pick(job_id, 4) != pick(job_id, 3)]
    assert all(pick(job_id, 4) == 3 for job_id in moved)  # only to the new shard
    assert abs(len(moved) - len(IDS) / 4) < 0.08 * len(IDS) / 4
    assert pick(IDS[0], 1) == 0


def _sharded(count: int, clock: FakeClock) -> ShardedStore:
    return ShardedStore([MemoryStore(clock) for _ in range(count)])


def _on(store: ShardedStore, index: int) -> str:
    """A job id that picks shard `index`."""
    return next(job_id for job_id in IDS if pick(job_id, len(store.stores)) == index)


def test_each_job_lives_whole_on_the_shard_its_id_picks() -> None:
    clock = FakeClock()
    store = _sharded(3, clock)
    jobs = [_on(store, i) for i in (2, 0, 1)]
    for job_id in jobs:
        clock.advance(1)
        store.open_job(job_id, {"problem": "strgame"})
        store.put_chunk(job_id, 0, b"x")
        store.finish_production(job_id, 1, 1)
    for index, job_id in zip((2, 0, 1), jobs, strict=True):
        assert store.stores[index].jobs() == [job_id]
        assert store.stores[index].chunk_payload(job_id, 0) == b"x"
    assert store.jobs() == jobs  # oldest first, over every shard
    assert store.save_answers(jobs[0], 0, "1")
    states = [p.state if p else None for p in store.progress_of([*jobs, IDS[-1]])]
    assert states == [JobState.COMPLETE, JobState.RUNNING, JobState.RUNNING, None]


def test_a_job_made_before_a_shard_was_added_is_found_where_it_is() -> None:
    """Nothing is computed twice: a new shard takes new jobs only, and a job it would pick
    that an older shard holds is reached there (its answers kept)."""
    clock = FakeClock()
    old = MemoryStore(clock)
    job_id = next(j for j in IDS if pick(j, 2) == 1)
    old.open_job(job_id, {"problem": "strgame", "lane": "bulk"})
    old.put_chunk(job_id, 0, b"x")
    old.finish_production(job_id, 1, 1)
    old.save_answers(job_id, 0, "0")
    store = ShardedStore([old, MemoryStore(clock)])
    assert store.open_job(job_id, {"problem": "strgame", "lane": "interactive"})["lane"] == "bulk"
    assert store.answered(job_id) == {0}
    assert store.stores[1].jobs() == []
    assert ShardedStore([old, MemoryStore(clock)]).index_of(job_id) == 0  # a fresh process too


def test_the_sweep_and_queues_span_the_shards() -> None:
    clock = FakeClock()
    store = _sharded(2, clock)
    jobs = [_on(store, 0), _on(store, 1)]
    for job_id in jobs:
        store.open_job(job_id, {"problem": "strgame"})
        store.put_chunk(job_id, 0, b"x")
        store.finish_production(job_id, 1, 1)
        store.begin_chunk(job_id, 0, "w", 30)
    clock.advance(31)  # both workers died
    sent: list[tuple[str, int]] = []
    settings = load_settings(broker_url="redis://127.0.0.1:1/0")
    assert sweep(store, lambda j, i: sent.append((j, i)), settings) == 2
    assert sorted(sent) == sorted((job_id, 0) for job_id in jobs)
    for shard in store.stores:
        assert isinstance(shard, MemoryStore)
        shard.queues["q"] = 3
    assert store.queue_length("q") == 6


def test_shards_need_a_broker_and_are_never_printed_with_their_passwords() -> None:
    from pipeline.config import show

    with pytest.raises(UsageError, match="beside broker_url"):
        load_settings(shards="redis://b:6379/0")
    settings = load_settings(
        broker_url="redis://a:6379/0", shards="redis://:s3cret@b:6379/0, redis://c:6379/1"
    )
    assert settings.shard_urls == (
        "redis://a:6379/0",
        "redis://:s3cret@b:6379/0",
        "redis://c:6379/1",
    )
    assert "s3cret" not in show(settings)
    with pytest.raises(UsageError, match="port"):
        load_settings(broker_url="redis://a:6379/0", shards="redis://b:x/0")
