"""A command sharing its chunks with real workers: it takes back only messages no worker has
taken (kombu's own messages, in a real Redis), and every chunk is run once."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pipeline import producer
from pipeline.config import LANES, Settings, lane_queue
from pipeline.jobstate import JobState
from pipeline.jobstore import JobStore
from pipeline.local.redis_server import RedisServer
from pipeline.progress import ProgressBar
from pipeline.registry import get_problem
from pipeline.service import Cluster, FileJob, run_on, wait
from tests.conftest import Workers
from tests.helpers import answers, input_text, random_cases


def _cluster(url: str) -> Cluster:
    settings = Settings(broker_url=url, file_payloads=True)
    return Cluster(settings, JobStore.from_url(url), lambda: None, local_workers=1)


def test_only_messages_no_worker_took_are_taken_back(redis_server: RedisServer) -> None:
    c = _cluster(redis_server.url)
    queues = [lane_queue(c.settings, lane) for lane in LANES]
    c.store.open_job("strgame-" + "d" * 24, {"problem": "strgame", "lane": "bulk"})
    ids = [c.queue("strgame-" + "d" * 24, index) for index in range(3)]
    assert c.queued_messages() == 3
    assert c.store.take_message(queues, ids[:2]) is None  # the newest is another task's
    assert c.store.take_message(queues, ids) == ids[2]
    c.store.client.rpop(queues[1])  # a worker takes the oldest (BRPOP takes from the right)
    assert c.store.take_message(queues, [ids[0]]) is None
    assert c.store.take_message(queues, ids) == ids[1]
    assert c.queued_messages() == 0 and c.store.take_message(queues, ids) is None


@pytest.mark.parametrize("queue_all", [True, False])
def test_every_chunk_is_run_once_by_the_command_or_a_worker(
    redis_server: RedisServer, workers: Workers, tmp_path: Path, queue_all: bool
) -> None:
    """Produced by the command's `send` (which runs chunks while messages wait), or every
    chunk queued first (then the command takes back the newest while a worker takes the
    oldest, until they meet)."""
    problem = get_problem("strgame")
    path = tmp_path / "in.txt"
    path.write_text(input_text(problem, random_cases(problem, "random", 3000, 200, seed=8)))
    workers.start(GAMEBATCH_FILE_PAYLOADS="true")  # local workers: they see the command's files
    c = _cluster(redis_server.url)
    settings = c.settings.model_copy(
        update={
            "chunk": c.settings.chunk.model_copy(update={"target_work": 2000, "place_scale": 1})
        }
    )
    share = c.sharing()
    if queue_all:
        share.waiting = lambda: 0
    job = producer.submit(problem, path, c.store, share.send, settings)
    assert job.chunks > 100
    taken = 0
    while share.take_back(job.job_id):
        taken += 1
    done = wait(c, job.job_id, timeout=60, progress=ProgressBar("t", enabled=False))
    codes = "".join(c.store.iter_answers(job.job_id, done.chunks or 0))
    result = "".join(problem.answers[int(code)] + "\n" for code in codes)
    assert result == answers(problem, path.read_text())
    log = (tmp_path / "worker-0.log").read_text()
    by_workers = len(re.findall(r"succeeded in [\d.e-]+s: 'solved'", log))
    assert "'duplicate'" not in log
    assert 0 < by_workers <= job.chunks
    if queue_all:  # they met in the middle
        assert taken > 0 and by_workers + taken == job.chunks


def test_a_production_whose_end_redis_lost_is_read_again(
    redis_server: RedisServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The end of production (the chunk plan, the running state) lost, as a failover loses
    what no replica had yet: the command that produced the job reads its input again
    instead of waiting for chunks that nobody will queue."""
    problem = get_problem("strgame")
    path, out = tmp_path / "in.txt", tmp_path / "out.txt"
    path.write_text(input_text(problem, random_cases(problem, "random", 50, 30, seed=3)))
    c = _cluster(redis_server.url)
    real, lost = c.store.finish_production, []

    def lose_the_first(job_id: str, chunks: int, total: int, token: str) -> JobState | None:
        if not lost:
            lost.append(job_id)
            return JobState.RUNNING  # acknowledged by a primary that then died
        return real(job_id, chunks, total, token)

    monkeypatch.setattr(c.store, "finish_production", lose_the_first)
    notes: list[str] = []
    outcomes = run_on(
        c,
        problem,
        [FileJob(path, out)],
        notes.append,
        keep_going=False,
        lane="auto",
        progress=ProgressBar("t", enabled=False),
    )
    assert outcomes[0].error is None and lost
    assert out.read_text() == answers(problem, path.read_text())
    assert notes == [f"note: Redis lost job {lost[0]}; reading {path} again"]
    assert c.store.progress(lost[0]).state == JobState.DONE  # type: ignore[union-attr]
