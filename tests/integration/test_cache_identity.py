"""A job is named by the bytes it was made of: a file rewritten while it is read poisons nothing."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from pipeline import collector, producer
from pipeline.config import load_settings
from pipeline.errors import UsageError
from pipeline.jobstore import JobStore
from pipeline.local.redis_server import RedisServer
from pipeline.registry import get_problem
from tests.helpers import answers
from workers.runner import run_chunk

pytestmark = pytest.mark.integration

CASES = 80_000  # 10 MB: more than the first block of either reader (1 MiB, and 8 MiB in C)


def _text(word: str) -> bytes:
    return f"{CASES}\n".encode() + f"1 1\n{word}\n".encode() * CASES


def test_a_file_rewritten_while_it_is_read_is_refused_and_leaves_no_job(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    problem = get_problem("strgame")
    path = tmp_path / "a.in"
    original = _text("a" * 127)  # an odd chain: the first player wins
    path.write_bytes(original)
    store = JobStore.from_url(redis_server.url)
    settings = load_settings(broker_url=redis_server.url, chunk={"target_work": 50_000})
    sent: list[int] = []

    def rewrite_after_the_first_chunk(job_id: str, index: int) -> None:
        sent.append(index)
        if index == 0:  # another program rewrites the file, same size, other answers
            path.write_bytes(_text("a" * 126 + " "))  # even: the other answer

    with pytest.raises(UsageError, match=r"a\.in: the file changed while it was read"):
        producer.submit(problem, path, store, rewrite_after_the_first_chunk, settings)
    assert sent, "the rewrite never happened"
    assert store.jobs() == [] and store.client.dbsize() == 0, "something of the job was kept"

    path.write_bytes(original)  # the unchanged original gets its own answers
    job = producer.submit(problem, path, store, lambda j, i: None, settings)
    for index in range(job.chunks):
        run_chunk(store, job.job_id, index)
    done = collector.wait_for(store, job.job_id, poll=0.01, timeout=5)
    out = tmp_path / "a.out"
    collector.write_result_file(store, job.job_id, problem, done, out)
    assert out.read_text() == answers(problem, original.decode())
    store.client.close()


def test_a_settled_file_is_not_hashed_twice_and_a_rewrite_is_still_caught(
    tmp_path: Path, redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    problem = get_problem("strgame")
    path = tmp_path / "b.in"
    path.write_bytes(_text("a" * 127))
    hour_ago = time.time() - 3600
    os.utime(path, (hour_ago, hour_ago))
    time.sleep(producer.SETTLED_SECONDS + 0.1)  # utime set ctime to now: let it settle too
    _, settled = producer.hash_file(path)
    assert settled is not None
    hashed: list[int] = []
    real = producer._HashingReader.__init__
    monkeypatch.setattr(producer._HashingReader, "__init__",
                        lambda self, raw: hashed.append(1) or real(self, raw))  # fmt: skip
    store = JobStore.from_url(redis_server.url)
    settings = load_settings(broker_url=redis_server.url, chunk={"target_work": 50_000})
    job = producer.submit(problem, path, store, lambda j, i: None, settings)
    assert hashed == [] and job.chunks > 1  # read once more, not hashed
    store.delete(job.job_id)

    def rewrite_same_size_and_times(job_id: str, index: int) -> None:
        if index == 0:
            path.write_bytes(_text("a" * 126 + " "))
            os.utime(path, (hour_ago, hour_ago))  # the mtime put back: ctime still moves

    with pytest.raises(UsageError, match=r"b\.in: the file changed while it was read"):
        producer.submit(problem, path, store, rewrite_same_size_and_times, settings)
    assert store.jobs() == []
    store.client.close()


def test_reading_hashes_every_byte_even_past_an_error(tmp_path: Path) -> None:
    path = tmp_path / "x.in"
    path.write_bytes(b"1\n1 1\na\n")
    digest = producer.checksum(path)
    with path.open("rb") as raw:
        stream = producer._HashingReader(raw)
        assert stream.read(3) == b"1\n1"
        assert stream.rest_digest() == digest
