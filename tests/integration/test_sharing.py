"""A command sharing its chunks with real workers: it takes back only messages no worker has
taken (kombu's own messages, in a real Redis), and every chunk is run once."""

from __future__ import annotations

import re
import signal
import time
from pathlib import Path

import pytest

from pipeline.app.cluster import Cluster
from pipeline.app.collect import wait
from pipeline.app.solve import FileJob, Solving, run_on
from pipeline.config import LANES, Settings, lane_queue
from pipeline.data import producer
from pipeline.games.registry import get_problem
from pipeline.local.redis_server import RedisServer
from pipeline.progress import ProgressBar
from pipeline.store.jobstate import JobState
from pipeline.store.jobstore import JobStore
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
    if not queue_all:  # local workers: they see the command's files
        workers.start(GAMEBATCH_FILE_PAYLOADS="true")
    c = _cluster(redis_server.url)
    settings = c.settings.replaced(chunk=c.settings.chunk.replaced(target_work=400, place_scale=1))
    share = c.sharing()
    if queue_all:
        share.waiting = lambda: 0
    job = producer.submit(problem, path, c.store, share.send, settings)
    assert job.chunks > 1000
    if queue_all:  # every message queued, then a worker begins from the oldest end before
        # the command takes back from the newest (a worker running during production may
        # keep pace with it on a busy machine, and leave nothing to take back)
        workers.start(GAMEBATCH_FILE_PAYLOADS="true")
        deadline = time.monotonic() + 30
        while not (c.store.progress(job.job_id) or pytest.fail("job gone")).done_chunks:
            assert time.monotonic() < deadline, "the worker took no chunk"
            time.sleep(0.01)
    taken = 0
    while share.take_back(job.job_id):
        taken += 1
    done = wait(c, job.job_id, timeout=60, progress=ProgressBar("t", enabled=False))
    codes = "".join(c.store.iter_answers(job.job_id, done.chunks or 0))
    result = "".join(problem.answers[int(code)] + "\n" for code in codes)
    assert result == answers(problem, path.read_text())
    deadline = time.monotonic() + 10  # the worker's log lines may trail its answers
    while True:
        log = (tmp_path / "worker-0.log").read_text()
        by_workers = len(re.findall(r"succeeded in [\d.e-]+s: 'solved'", log))
        settled = by_workers + taken >= job.chunks if queue_all else by_workers > 0
        if settled or time.monotonic() > deadline:
            break
        time.sleep(0.05)
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
    progress = ProgressBar("t", enabled=False)
    outcomes = run_on(c, Solving(problem), [FileJob(path, out)], notes.append, progress)
    assert outcomes[0].error is None and lost
    assert out.read_text() == answers(problem, path.read_text())
    assert notes == [f"note: Redis lost job {lost[0]}; reading {path} again"]
    assert c.store.progress(lost[0]).state == JobState.DONE  # type: ignore[union-attr]


@pytest.mark.parametrize("alone", [True, False], ids=["alone", "workers"])
def test_an_input_under_alone_bytes_is_solved_by_the_command_on_its_threads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str], alone: bool
) -> None:
    """With no local worker running, the command solves an input of up to chunk.alone_bytes
    itself, its chunks on its threads, and starts no worker; over it, workers start."""
    from pipeline.cli import main
    from pipeline.local import cluster as embedded

    problem = get_problem("pathgame")
    path = tmp_path / "in.txt"
    text = input_text(problem, random_cases(problem, "random", 2000, 300, seed=4))
    path.write_text(text)
    started: list[object] = []
    real = embedded.start_worker

    def start(*args: object, **kwargs: object) -> object:
        started.append(args)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(embedded, "start_worker", start)
    monkeypatch.setattr("pipeline.cli._whole_writes_to_stdout", lambda: None)  # see test_fuzz
    monkeypatch.setenv("GAMEBATCH_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("GAMEBATCH_CHUNK__TARGET_WORK", "20000")  # dozens of chunks
    monkeypatch.setenv("GAMEBATCH_CHUNK__ALONE_BYTES", str(1 << 30 if alone else 0))
    monkeypatch.setenv("GAMEBATCH_WORKERS", "2")
    out = tmp_path / "out.txt"
    handlers = {
        sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    }
    try:  # in this process: its start_worker is the one watched
        status = main(["solve", "-q", "-p", "pathgame", str(path), "-o", str(out)])
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    assert status == 0, capfd.readouterr().err
    assert out.read_text() == answers(problem, text)
    assert (len(started) == 0) == alone, started
