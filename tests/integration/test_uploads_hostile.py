"""Uploads that lie or stall never decide what another user of the same content gets."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import redis

from pipeline.games.registry import get_problem
from pipeline.local.redis_server import RedisServer
from pipeline.store.jobstore import JobStore
from tests.conftest import Workers
from tests.helpers import answers
from tests.integration.server import Server, wait_until_ended
from tests.integration.test_pipeline import gamebatch

STRGAME = get_problem("strgame")
CASES = 4000


def _text(word: str) -> bytes:
    return f"{CASES}\n".encode() + f"1 1\n{word}\n".encode() * CASES


def _digest(data: bytes) -> str:
    return "sha-256=:" + base64.b64encode(hashlib.sha256(data).digest()).decode() + ":"


def _stalled(data: bytes, go: threading.Event) -> Iterator[bytes]:
    """A body sent in 8 kB blocks that stalls after the fifth until `go` is set."""
    for start in range(0, len(data), 8192):
        if start == 5 * 8192:
            go.wait(60)
        yield data[start : start + 8192]


def test_a_planted_upload_serves_no_wrong_answer_and_blocks_no_honest_user(
    tmp_path: Path, redis_server: RedisServer, workers: Workers
) -> None:
    """An upload announces the digest of one input and streams another, stalling after its
    first chunks were answered. Meanwhile a `solve` of the real input and an honest upload
    of it, on the same Redis, wait for it instead of taking its answers; once it is refused
    both get the exact answers."""
    real, planted = _text("a" * 127), _text("a" * 126 + " ")  # other answers, same size
    path = tmp_path / "real.in"
    path.write_bytes(real)
    job_id = f"strgame-{hashlib.sha256(real).hexdigest()[:24]}"
    workers.start(concurrency=2)
    running = Server(tmp_path, redis_server.url, chunk={"max_cases": 50}).start()
    store = JobStore.from_url(redis_server.url)
    go, replies = threading.Event(), {}  # upload name -> its reply

    def put(name: str, body: bytes | Iterator[bytes]) -> None:
        with running.client() as http:
            replies[name] = http.put(
                "/v1/jobs",
                params={"problem": "strgame"},
                content=body,
                headers={"Content-Digest": _digest(real)},
            )

    out = tmp_path / "real.out"
    solved: list[object] = []
    command = ["solve", "-q", "-p", "strgame", str(path), "-o", str(out)]

    def solve() -> None:
        solved.append(gamebatch(*command, "--broker", redis_server.url))

    threads = [
        threading.Thread(target=put, args=("liar", _stalled(planted, go))),
        threading.Thread(target=solve),
        threading.Thread(target=put, args=("honest", real)),
    ]
    try:
        threads[0].start()
        deadline = time.monotonic() + 30
        while not store.answered(job_id):  # the liar's first chunks are answered
            assert time.monotonic() < deadline, "the planted chunks were never answered"
            time.sleep(0.01)
        threads[1].start()
        threads[2].start()
        time.sleep(3)
        assert not solved and not out.exists(), "solve finished beside the unverified upload"
        assert "honest" not in replies
        go.set()
        for thread in threads:
            thread.join(120)
        assert replies["liar"].status_code == 400, replies["liar"].text
        assert solved and solved[0].returncode == 0, solved  # type: ignore[attr-defined]
        assert out.read_bytes().decode() == answers(STRGAME, real.decode())
        honest = replies["honest"]
        assert honest.status_code in (200, 201) and honest.json()["id"] == job_id, honest.text
        with running.client() as http:
            assert wait_until_ended(http, job_id)["state"] == "done"
            result = http.get(f"/v1/jobs/{job_id}/result")
            assert result.text == answers(STRGAME, real.decode())
    finally:
        go.set()
        store.close()
        running.stop()


def _produced(store: JobStore, job_id: str) -> bool:
    counters = store.progress(job_id)
    return counters is not None and counters.chunks is not None


def test_an_upload_of_a_cancelled_job_starts_afresh(
    tmp_path: Path, redis_server: RedisServer, workers: Workers
) -> None:
    """A cancel stops a run; it does not bar the same input for the result's lifetime."""
    text = _text("ab")
    running = Server(tmp_path, redis_server.url, chunk={"max_cases": 50})
    running.start(wait_healthy=False)  # no worker yet
    try:
        with running.client() as http:
            created = http.put("/v1/jobs", params={"problem": "strgame"}, content=text)
            job_id = created.json()["id"]
            store, deadline = JobStore.from_url(redis_server.url), time.monotonic() + 30
            while not _produced(store, job_id):
                assert time.monotonic() < deadline, "the upload was never produced"
                time.sleep(0.02)
            store.close()
            cancelled = http.delete(f"/v1/jobs/{job_id}")
            assert cancelled.status_code == 200, cancelled.text  # no worker yet: it waits
            assert wait_until_ended(http, job_id)["state"] == "cancelled"
            workers.start(concurrency=1)
            again = http.put("/v1/jobs", params={"problem": "strgame"}, content=text)
            assert again.status_code in (200, 201) and again.json()["id"] == job_id, again.text
            assert wait_until_ended(http, job_id)["state"] == "done"
            assert http.get(f"/v1/jobs/{job_id}/result").text == answers(STRGAME, text.decode())
    finally:
        running.stop()


def test_a_job_cancelled_from_the_command_line_is_cancelled_over_http_too(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    """One state for one job: `gamebatch cancel` of an uploaded job shows as cancelled on
    the API (never as failed), `status --json` names it by `id` as the API does, and the API
    says which states are final."""
    text = _text("abc")
    running = Server(tmp_path, redis_server.url, chunk={"max_cases": 50})
    running.start(wait_healthy=False)  # no worker: the job waits
    try:
        with running.client() as http:
            job_id = http.put("/v1/jobs", params={"problem": "strgame"}, content=text).json()["id"]
            store, deadline = JobStore.from_url(redis_server.url), time.monotonic() + 30
            while not _produced(store, job_id):
                assert time.monotonic() < deadline, "the upload was never produced"
                time.sleep(0.02)
            store.close()
            shown = gamebatch("status", job_id, "--json", "--broker", redis_server.url)
            assert json.loads(shown.stdout)["id"] == job_id, shown.stdout
            cancelled = gamebatch("cancel", job_id, "--broker", redis_server.url)
            assert cancelled.returncode == 0, cancelled.stderr
            ended = wait_until_ended(http, job_id)
            assert ended["state"] == "cancelled", ended
            listing = http.get("/v1/jobs").json()
            assert listing["finished_states"] == ["cancelled", "done", "failed"]
    finally:
        running.stop()


def test_a_runner_that_dies_is_replaced_and_its_jobs_finish(
    tmp_path: Path, redis_server: RedisServer, workers: Workers
) -> None:
    """A runner process killed while it follows a job: the server starts another, hands it
    the job, and the job ends done with its exact result."""
    text = _text("abab")
    running = Server(tmp_path, redis_server.url, chunk={"max_cases": 50}, server={"runners": 1})
    running.start(wait_healthy=False)  # no worker yet: the runner waits for the job
    client = redis.Redis.from_url(redis_server.url, decode_responses=True)
    try:
        with running.client() as http:
            job_id = http.put("/v1/jobs", params={"problem": "strgame"}, content=text).json()["id"]
            deadline = time.monotonic() + 30
            while not client.hget(f"gb:api:job:{job_id}", "runner"):
                assert time.monotonic() < deadline, "no runner took the job"
                time.sleep(0.02)
            runner = int(client.hget(f"gb:api:job:{job_id}", "runner") or 0)
            os.kill(runner, signal.SIGKILL)
            workers.start(concurrency=1)
            assert wait_until_ended(http, job_id)["state"] == "done"
            assert http.get(f"/v1/jobs/{job_id}/result").text == answers(STRGAME, text.decode())
            assert client.hget(f"gb:api:job:{job_id}", "runner") != str(runner)
            health = http.get("/healthz").json()
            assert health["runners"] is True, health
        assert "died: started another" in running.log.read_text()
    finally:
        client.close()
        running.stop()
