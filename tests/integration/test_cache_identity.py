"""A job is named by the bytes it was made of: a file rewritten while it is read poisons nothing."""

from __future__ import annotations

import io
import mmap
import os
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import BinaryIO

import pytest

from pipeline.config import load_settings
from pipeline.data import collector, producer
from pipeline.errors import JobFailed, UsageError
from pipeline.games.registry import get_problem
from pipeline.local.redis_server import RedisServer
from pipeline.store.jobstore import JobStore
from tests.helpers import answers
from workers.runner import Outcome, Policy, run_chunk

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


def test_a_write_through_a_shared_mapping_is_caught_while_read_and_after(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    """A write through a shared mapping to pages already dirty changes no stat field: the
    bytes are what is checked, by the producer as it reads them (again, to send them) and by
    the worker that reads a chunk's place in the file. A pristine copy then gets its own
    answers."""
    problem = get_problem("strgame")
    path = tmp_path / "b.in"
    original = _text("a" * 127)
    path.write_bytes(original)
    store = JobStore.from_url(redis_server.url)
    settings = load_settings(
        broker_url=redis_server.url, chunk={"target_work": 50_000}, file_payloads=True
    )
    in_redis = settings.replaced(file_payloads=False)  # read twice, bytes sent
    with path.open("r+b") as file, mmap.mmap(file.fileno(), 0) as mapped:
        mapped[:] = original  # every page dirty now: later writes change no time
        time.sleep(2.1)  # the file looks settled (older than two seconds)
        stat_before = os.stat(path)

        def rewrite_in_place(job_id: str, index: int) -> None:
            if index == 0:
                mapped[:] = _text("a" * 126 + " ")  # same size, other answers

        with pytest.raises(UsageError, match=r"b\.in: the file changed while it was read"):
            producer.submit(problem, path, store, rewrite_in_place, in_redis)
        assert os.stat(path).st_mtime_ns == stat_before.st_mtime_ns, "the mapping moved mtime"
        assert store.jobs() == [] and store.client.dbsize() == 0, "something of the job was kept"

        mapped[:] = original
        job = producer.submit(problem, path, store, lambda j, i: None, settings)
        mapped[:] = _text("a" * 126 + " ")  # after it was queued, before a worker reads it
        reader = Policy(file_payloads=True)
        assert {run_chunk(store, job.job_id, i, reader) for i in range(job.chunks)} == {
            Outcome.FAILED
        }
        with pytest.raises(JobFailed, match="changed after it was queued"):
            collector.wait_for(store, job.job_id, poll=0.01, timeout=5)
    copy = tmp_path / "copy.in"
    copy.write_bytes(original)
    again = producer.submit(problem, copy, store, lambda j, i: None, settings)
    assert again.job_id == job.job_id and again.queued == again.chunks  # failed chunks again
    for index in range(again.chunks):
        assert run_chunk(store, again.job_id, index, reader) == Outcome.SOLVED
    done = collector.wait_for(store, again.job_id, poll=0.01, timeout=5)
    out = tmp_path / "b.out"
    collector.write_result_file(store, again.job_id, problem, done, out)
    assert out.read_text() == answers(problem, original.decode())
    store.client.close()


class _Planted:
    """An input announced as one content that streams another: the upload of a liar, which
    stalls after its first megabyte until `go` is set (then ends: its check fails)."""

    verified = False

    def __init__(self, digest: str, data: bytes, go: threading.Event) -> None:
        self.digest, self.data, self.go = digest, data, go

    def open(self, mode: str, /) -> BinaryIO:
        planted = self

        class Stream(io.BytesIO):
            def read(self, size: int | None = -1, /) -> bytes:
                if self.tell() >= 1 << 20:
                    planted.go.wait(30)
                return super().read(size)

        return Stream(self.data)


def test_bytes_planted_under_another_contents_name_are_never_served(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    """A producer streams other bytes than the digest it names (an upload that lies, and
    stalls): its chunks are answered under that name, but another producer of the real
    content neither reuses them nor finishes before the liar is refused; it then produces
    the job itself and gets the exact answers."""
    problem = get_problem("strgame")
    real, planted = _text("a" * 127), _text("a" * 126 + " ")
    path = tmp_path / "c.in"
    path.write_bytes(real)
    store = JobStore.from_url(redis_server.url)
    settings = load_settings(
        broker_url=redis_server.url,
        chunk={"target_work": 50_000},
        lease_seconds=2,
        poll_interval=0.02,
    )

    def solve_now(job_id: str, index: int) -> None:
        run_chunk(store, job_id, index)

    go, failures = threading.Event(), []

    def liar() -> None:
        source = _Planted(producer.checksum(path), planted, go)
        try:
            producer.submit(
                problem, path, store, solve_now, settings, how=producer.Production(source=source)
            )
        except UsageError as exc:
            failures.append(str(exc))

    lying = threading.Thread(target=liar)
    lying.start()
    job_id = producer.job_id_for(problem, producer.checksum(path))
    deadline = time.monotonic() + 10
    while not store.answered(job_id) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert store.answered(job_id), "the liar's first chunks were never answered"
    honest: list[producer.Submitted] = []
    worker = threading.Thread(
        target=lambda: honest.append(producer.submit(problem, path, store, solve_now, settings))
    )
    worker.start()
    worker.join(3 * settings.lease_seconds)  # the liar renews its claim all along
    assert not honest, "the real content was produced beside the liar"
    go.set()
    lying.join(10)
    worker.join(30)
    assert failures and "changed while it was read" in failures[0]
    assert honest and honest[0].job_id == job_id
    done = collector.wait_for(store, job_id, poll=0.01, timeout=5)
    out = tmp_path / "c.out"
    collector.write_result_file(store, job_id, problem, done, out)
    assert out.read_text() == answers(problem, real.decode())
    store.client.close()


def test_reading_hashes_every_byte_even_past_an_error(tmp_path: Path) -> None:
    path = tmp_path / "x.in"
    path.write_bytes(b"1\n1 1\na\n")
    digest = producer.checksum(path)
    with path.open("rb") as raw:
        stream = producer._HashingReader(raw, "x.in")
        assert stream.read(3) == b"1\n1"
        assert stream.rest_digest() == digest


def test_a_killed_producers_claim_is_taken_over_at_once(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    """A producer killed on this host (SIGKILL: no clean-up) leaves its claim; the next
    producer of the input sees that its process is gone and need not wait the claim out."""
    problem = get_problem("strgame")
    path = tmp_path / "d.in"
    path.write_bytes(_text("ab"))
    store = JobStore.from_url(redis_server.url)
    settings = load_settings(broker_url=redis_server.url, chunk={"target_work": 50_000})
    job_id = producer.job_id_for(problem, producer.checksum(path))
    dead = f"{socket.gethostname()}:{_ended_pid()}:x"  # a process that has ended
    assert store.claim_production(job_id, dead, producer.CLAIM_SECONDS)
    started = time.monotonic()
    job = producer.submit(problem, path, store, lambda j, i: None, settings)
    assert time.monotonic() - started < producer.CLAIM_SECONDS / 3
    assert job.queued == job.chunks > 0 and store.production_holder(job_id) is None
    alive = f"{socket.gethostname()}:{os.getpid()}:y"  # a live holder is waited for
    other = producer.job_id_for(problem, producer.checksum(path), keep_going=True)
    assert store.claim_production(other, alive, 1.0)
    started = time.monotonic()
    producer.submit(
        problem, path, store, lambda j, i: None, settings, how=producer.Production(keep_going=True)
    )
    assert time.monotonic() - started >= 0.8  # until the claim lapsed
    store.client.close()


def _ended_pid() -> int:
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid
