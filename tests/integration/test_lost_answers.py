"""A result is written only from answers the primary in force holds: answers a failover lost
after the command read them are solved again before the result file is written."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.app.cluster import Cluster
from pipeline.app.collect import Waiting, write_result
from pipeline.config import Settings
from pipeline.data import producer
from pipeline.games.registry import get_problem
from pipeline.local.redis_server import RedisServer
from pipeline.progress import ProgressBar
from pipeline.store import keys
from pipeline.store.jobstate import JobState
from pipeline.store.jobstore import JobStore
from tests.helpers import answers, input_text, random_cases


def test_answers_lost_before_the_job_is_done_are_solved_again_first(
    redis_server: RedisServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    problem = get_problem("strgame")
    path, out = tmp_path / "in.txt", tmp_path / "out.txt"
    path.write_text(input_text(problem, random_cases(problem, "random", 400, 100, seed=43)))
    settings = Settings(broker_url=redis_server.url)
    settings = settings.replaced(chunk=settings.chunk.replaced(target_work=2000))
    c = Cluster(settings, JobStore.from_url(redis_server.url), lambda: None)
    client, run = c.store.client, c.run_here()
    payloads: dict[int, bytes] = {}
    ran: list[int] = []

    def send(job_id: str, index: int) -> None:  # the chunk's payload kept, then solved here
        payloads.setdefault(index, client.dump(keys.chunk_input(job_id, index)))
        ran.append(index)
        run(job_id, index)

    monkeypatch.setattr(c, "send", send)
    job = producer.submit(problem, path, c.store, send, settings)
    assert job.chunks >= 3 and sorted(ran) == list(range(job.chunks))
    finish, finishes = c.store.finish, []

    def failed_over(job_id: str, ttl: int) -> bool:
        """The first time, the primary in force is one that never had chunk 1's answers
        (a replica promoted before they reached it): its payload is there, not its answers."""
        if not finishes:
            codes = client.hget(keys.answers(job_id), "1")
            client.hdel(keys.answers(job_id), "1")
            client.hincrby(keys.job(job_id), "done_chunks", -1)
            client.hincrby(keys.job(job_id), "done_cases", -len(codes))
            client.restore(keys.chunk_input(job_id, 1), 0, payloads[1])
        finishes.append(finish(job_id, ttl))
        return finishes[-1]

    monkeypatch.setattr(c.store, "finish", failed_over)
    ran.clear()
    waiting = Waiting(ProgressBar("t", enabled=False))
    write_result(c, problem, job.job_id, out, waiting)
    assert finishes == [False, True] and ran == [1]  # queued again at once, and only it
    assert out.read_text() == answers(problem, path.read_text())
    assert c.store.progress(job.job_id).state == JobState.DONE  # type: ignore[union-attr]
    c.store.close()
