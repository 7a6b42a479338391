"""`gamebatch serve` as a real process, with a real Redis and real workers, driven over HTTP."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from functools import partial
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from pipeline.data.messages import FilePayload, decode_payload
from pipeline.games.registry import get_problem
from pipeline.jobs.view import FIELDS
from pipeline.local.redis_server import RedisServer
from pipeline.store.jobstore import JobStore
from tests.conftest import Workers, run_reference
from tests.helpers import answers, command_env, input_text, random_cases
from tests.integration.server import WEBHOOK_SECRET, Server, events, wait_until_ended

STRGAME = get_problem("strgame")
PATHGAME = get_problem("pathgame")


def _text(problem: Any, cases: int, size: int = 60, seed: int = 1) -> str:
    return input_text(problem, random_cases(problem, "random", cases, size, seed=seed))


@pytest.fixture
def server(tmp_path: Path, redis_server: RedisServer, workers: Workers) -> Iterator[Server]:
    workers.start(concurrency=2)
    running = Server(tmp_path, redis_server.url, limits={"max_upload_bytes": 4 << 20}).start()
    yield running
    running.stop()


def test_upload_follow_events_and_download_exactly_what_solve_writes(
    server: Server, tmp_path: Path, reference: dict[str, Path]
) -> None:
    text = _text(STRGAME, 400)
    with server.client() as http:
        blocks = (text.encode()[i : i + 4096] for i in range(0, len(text), 4096))  # streamed
        created = http.put(
            "/v1/jobs", params={"problem": "strgame", "name": "a.in"}, content=blocks
        )
        assert created.status_code == 201, created.text
        job = created.json()
        assert job["id"].startswith("strgame-") and job["name"] == "a.in"
        assert created.headers["location"] == f"/v1/jobs/{job['id']}"
        seen = []
        for event in events(http, job["links"]["events"].split("since=")[1], job["id"]):
            seen.append(event["type"])
            if event["type"] in ("done", "failed"):
                break
        assert seen[-1] == "done", seen
        result = http.get(f"/v1/jobs/{job['id']}/result")
        assert result.status_code == 200
        assert result.text == answers(STRGAME, text) == run_reference(reference["strgame"], text)
        sha = hashlib.sha256(result.content).hexdigest()
        assert result.headers["etag"] == f'"{sha}"'
        assert int(result.headers["content-length"]) == len(result.content)
        part = http.get(f"/v1/jobs/{job['id']}/result", headers={"Range": "bytes=5-14"})
        assert part.status_code == 206 and part.content == result.content[5:15]
        same = http.get(f"/v1/jobs/{job['id']}/result", headers={"If-None-Match": f'"{sha}"'})
        assert same.status_code == 304
        again = http.put("/v1/jobs", params={"problem": "strgame"}, content=text.encode())
        assert again.status_code == 200 and again.json()["id"] == job["id"]  # idempotent
        shown = http.get(f"/v1/jobs/{job['id']}").json()
        assert (shown["state"], shown["total"], shown["done"]) == ("done", 400, 400)
        assert shown["result_sha256"] == sha
        listed = http.get("/v1/jobs").json()["jobs"]
        assert [j["id"] for j in listed] == [job["id"]]
    assert list((server.spool / "inputs").iterdir()) == []  # the input is not kept


def test_a_multipart_form_upload_is_streamed_to_the_same_job(server: Server) -> None:
    text = _text(PATHGAME, 300, seed=4)
    with server.client() as http:
        form = http.post(
            "/v1/jobs",
            params={"problem": "pathgame"},
            files={"file": ("boards.in", text.encode(), "text/plain")},
        )
        assert form.status_code == 201, form.text
        job = form.json()
        assert job["name"] == "boards.in"
        assert wait_until_ended(http, job["id"])["state"] == "done"
        assert http.get(f"/v1/jobs/{job['id']}/result").text == answers(PATHGAME, text)
        raw = http.put("/v1/jobs", params={"problem": "pathgame"}, content=text.encode())
        assert raw.status_code == 200 and raw.json()["id"] == job["id"]


def test_a_bad_file_fails_with_the_cli_message_and_leaves_only_its_record(
    server: Server, redis_server: RedisServer
) -> None:
    text = _text(STRGAME, 30) + "surplus\n"
    with server.client() as http:
        job = http.put(
            "/v1/jobs", params={"problem": "strgame", "name": "bad.in"}, content=text.encode()
        ).json()
        ended = wait_until_ended(http, job["id"])
        assert ended["state"] == "failed" and ended["exit_code"] == 2
        assert ended["errors"][0].startswith("bad.in:"), ended["errors"]
        assert "case" in ended["errors"][0] or "end" in ended["errors"][0]
        assert http.get(f"/v1/jobs/{job['id']}/result").status_code == 409
    client = redis.Redis.from_url(redis_server.url)
    leftover = [k.decode() for k in client.scan_iter(f"gb:job:{job['id']}*")]
    client.close()
    assert leftover == []
    assert list((server.spool / "inputs").iterdir()) == []
    assert list((server.spool / "uploads").iterdir()) == []


def _json_error(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, (response.status_code, response.text)
    assert "traceback" not in response.text.lower()
    message: str = response.json()["error"]
    return message


def test_bad_requests_get_a_json_4xx(server: Server) -> None:
    body = _text(STRGAME, 3).encode()
    with server.client(None) as anonymous:
        assert "token" in _json_error(anonymous.put("/v1/jobs?problem=strgame", content=body), 401)
        assert anonymous.get("/healthz").status_code == 200  # the one open route
    with server.client("not-a-token") as wrong:
        _json_error(wrong.get("/v1/jobs"), 401)
    with server.client("reader") as reader:
        assert reader.get("/v1/jobs").status_code == 200
        assert "submit" in _json_error(reader.put("/v1/jobs?problem=strgame", content=body), 403)
        _json_error(reader.get("/metrics"), 403)
    with server.client() as http:
        assert "unknown problem" in _json_error(
            http.put("/v1/jobs?problem=chess", content=body), 400
        )
        _json_error(http.put("/v1/jobs", content=body), 400)
        _json_error(http.put("/v1/jobs?problem=strgame&lane=fast", content=body), 400)
        _json_error(http.put("/v1/jobs?problem=strgame&keep_going=maybe", content=body), 400)
        _json_error(http.put("/v1/jobs?problem=strgame&colour=red", content=body), 400)
        _json_error(http.put("/v1/jobs?problem=strgame&name=../x", content=body), 400)
        _json_error(http.put("/v1/jobs?problem=strgame", files={"file": ("a", body)}), 415)
        _json_error(http.post("/v1/jobs?problem=strgame", content=body), 415)
        _json_error(http.post("/v1/jobs?problem=strgame", files={"other": ("a", body)}), 400)
        big = b"1\n" + b"a" * (5 << 20) + b"\n"
        assert "max_upload_bytes" in _json_error(
            http.put("/v1/jobs?problem=strgame", content=big), 413
        )
        chunked = (big[i : i + 65536] for i in range(0, len(big), 65536))  # no Content-Length
        _json_error(http.put("/v1/jobs?problem=strgame", content=chunked), 413)
        _json_error(
            http.put("/v1/jobs?problem=strgame&callback_url=http://10.1.2.3/x", content=body), 422
        )
        _json_error(http.get("/v1/jobs/not-a-job"), 404)
        _json_error(http.get(f"/v1/jobs/strgame-{'0' * 24}"), 404)
        _json_error(http.get(f"/v1/jobs/strgame-{'0' * 24}/result"), 404)
        _json_error(http.get("/v1/events?since=yesterday"), 400)
        _json_error(http.get("/v1/jobs?limit=0"), 400)
        _json_error(http.post("/v1/batches", content=b"{"), 400)
        assert http.get("/v1/jobs").json()["jobs"] == []  # nothing refused became a job
    assert list((server.spool / "uploads").iterdir()) == []


def _abandon_upload(server: Server, headers: str, body: bytes, folder: str) -> None:
    """Send part of an upload, wait until the server spools it in `folder`, and hang up;
    then wait until the server has removed it."""
    with socket.create_connection(("127.0.0.1", server.port)) as raw:
        raw.sendall(
            f"PUT /v1/jobs?problem=strgame HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
            f"{server.token}\r\nContent-Length: 3000000\r\n{headers}\r\n".encode()
            + body
        )
        deadline = time.monotonic() + 10
        while not list((server.spool / folder).iterdir()):
            assert time.monotonic() < deadline
            time.sleep(0.02)
    # the runner's producer drops a broken input once it reads the marker: on a loaded
    # 2-core machine (a CI run of the suite once took over 20 s) that can take a while
    deadline = time.monotonic() + 60
    while list((server.spool / folder).iterdir()):
        assert time.monotonic() < deadline, (
            "the half upload was kept",
            list((server.spool / folder).iterdir()),
        )
        time.sleep(0.05)


def test_a_client_that_goes_away_mid_upload_leaves_nothing(server: Server) -> None:
    _abandon_upload(server, "", b"1\n" + b"a" * 500000, "uploads")
    digest = f"Content-Digest: {_digest(b'whatever')}\r\n"  # read while it arrives
    _abandon_upload(server, digest, b"3\n1 1\nab\n" + b"a" * 500000, "inputs")
    with server.client() as http:
        assert http.get("/v1/jobs").json()["jobs"] == []


class _Receiver(BaseHTTPRequestHandler):
    """A webhook receiver that refuses the first delivery and records every one."""

    calls: list[dict[str, Any]]

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.calls.append({"headers": dict(self.headers), "body": body})
        status = 500 if len(self.calls) == 1 else 204
        self.send_response(status)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    calls: list[dict[str, Any]] = []
    handler = type("Receiver", (_Receiver,), {"calls": calls})
    http_server = HTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=http_server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{http_server.server_port}/hook", calls
    http_server.shutdown()
    http_server.server_close()


def _verify(call: dict[str, Any]) -> dict[str, Any]:
    header = call["headers"]["Gamebatch-Signature"]
    parts = dict(item.split("=", 1) for item in header.split(","))
    signed = parts["t"].encode() + b"." + call["body"]
    expected = hmac.new(WEBHOOK_SECRET.encode(), signed, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(parts["v1"], expected), "bad signature"
    assert abs(time.time() - int(parts["t"])) < 120
    document: dict[str, Any] = json.loads(call["body"])
    return document


def test_webhooks_are_signed_retried_and_one_per_batch(
    server: Server, receiver: tuple[str, list[dict[str, Any]]]
) -> None:
    url, calls = receiver
    with server.client() as http:
        one = http.put(
            "/v1/jobs",
            params={"problem": "strgame", "callback_url": url},
            content=_text(STRGAME, 20).encode(),
        ).json()
        deadline = time.monotonic() + 60
        while (job := http.get(f"/v1/jobs/{one['id']}").json()).get("webhook", {}).get(
            "state"
        ) != "delivered":
            assert time.monotonic() < deadline, job
            time.sleep(0.1)
        assert job["webhook"]["attempts"] == 2 and len(calls) == 2  # the first got a 500
        first, second = (_verify(call) for call in calls)
        assert first == second and second["event"] == "job.done"
        assert second["job"]["id"] == one["id"] and second["job"]["state"] == "done"
        assert (
            calls[0]["headers"]["Gamebatch-Delivery"] == calls[1]["headers"]["Gamebatch-Delivery"]
        )
        ids = [
            http.put(
                "/v1/jobs",
                params={"problem": "pathgame"},
                content=_text(PATHGAME, 10, seed=s).encode(),
            ).json()["id"]
            for s in (7, 8)
        ]
        batch = http.post("/v1/batches", json={"jobs": ids, "callback_url": url})
        assert batch.status_code == 201, batch.text
        deadline = time.monotonic() + 60
        while len(calls) < 3:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        time.sleep(1.0)  # no second batch delivery
        assert len(calls) == 3
        delivered = _verify(calls[2])
        assert delivered["event"] == "batch.finished"
        assert sorted(j["id"] for j in delivered["jobs"]) == sorted(ids)
        assert all(j["state"] == "done" for j in delivered["jobs"])


def test_health_metrics_and_the_openapi_document(server: Server) -> None:
    with server.client() as http:
        job = http.put(
            "/v1/jobs", params={"problem": "strgame"}, content=_text(STRGAME, 5).encode()
        ).json()
        assert wait_until_ended(http, job["id"])["state"] == "done"
        health = http.get("/healthz").json()
        assert health["redis"] == "ok" and health["workers"] >= 1
        metrics = http.get("/metrics")
        assert metrics.status_code == 200
        assert 'gamebatch_jobs{state="done"} 1.0' in metrics.text
        assert "gamebatch_cases_solved_total 5.0" in metrics.text
        for name in (
            "gamebatch_jobs",
            "gamebatch_queue_depth",
            "gamebatch_uploaded_bytes_total",
            "gamebatch_request_seconds_bucket",
        ):
            assert name in metrics.text
        document = http.get("/v1/openapi.json").json()
        assert document["openapi"].startswith("3.")
        assert {"/v1/jobs", "/v1/jobs/{job}/result", "/v1/events"} <= set(document["paths"])


def test_another_owners_upload_of_known_content_learns_nothing_of_the_job(server: Server) -> None:
    text = _text(STRGAME, 7, seed=21).encode()
    with server.client() as http:
        params = {"problem": "strgame", "name": "secret.in"}
        job = http.put("/v1/jobs", params=params, content=text).json()
        assert wait_until_ended(http, job["id"])["state"] == "done"
    with server.client("other") as other:
        seen = other.put("/v1/jobs", params={"problem": "strgame", "name": "mine.in"}, content=text)
    assert seen.status_code == 200, seen.text
    body = seen.json()
    assert (body["id"], body["state"]) == (job["id"], "done")
    hidden = {"name", "size", "created", "started", "answered", "finished", "cases_per_second"}
    assert not hidden & set(body), body


def test_client_mode_solves_submits_and_collects_over_http(server: Server, tmp_path: Path) -> None:
    text = _text(STRGAME, 120, seed=11)
    source = tmp_path / "in.txt"
    source.write_text(text)
    env = command_env(GAMEBATCH_SERVER=server.url)
    token = ["--token-file", str(server.dir / "token")]

    def gamebatch(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "pipeline.cli", *args],
            env=env,
            check=False,
            capture_output=True,
            text=True,
            timeout=120,
        )

    solved = gamebatch(
        "solve", "-q", "-p", "strgame", str(source), "-o", str(tmp_path / "r.out"), *token
    )
    assert solved.returncode == 0, solved.stderr
    assert (tmp_path / "r.out").read_text() == answers(STRGAME, text)
    other = tmp_path / "other.in"
    other.write_text(_text(STRGAME, 50, seed=12))
    submitted = gamebatch("submit", "-p", "strgame", str(other), *token)
    assert submitted.returncode == 0, submitted.stderr
    job = submitted.stdout.splitlines()[-1]
    collected = gamebatch("collect", job, "-q", "-o", str(tmp_path / "o.out"), *token)
    assert collected.returncode == 0, collected.stderr
    assert (tmp_path / "o.out").read_text() == answers(STRGAME, other.read_text())
    status = gamebatch("status", job, "--json", *token)
    served = json.loads(status.stdout)
    assert served["state"] == "done"
    # one view: the same keys, types and values on the cluster itself (but for the routes)
    on_broker = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "status", job, "--json", "--broker", server.broker],
        env=command_env(), check=True, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    local = json.loads(on_broker.stdout)
    assert list(local) == list(served) == list(FIELDS)
    assert {**local, "links": served["links"]} == served and local["links"] == {}
    assert (served["total"], served["done"], served["name"]) == (50, 50, "other.in")
    assert served["size"] == other.stat().st_size and served["cases_per_second"] > 0
    assert served["created"] <= served["started"] <= served["answered"] <= served["finished"]
    bad = tmp_path / "bad.in"
    bad.write_text("2\n1\nab\n")
    refused = gamebatch("solve", "-q", "-p", "strgame", str(bad), "-o", str(tmp_path / "b"), *token)
    assert refused.returncode == 2
    assert refused.stderr.startswith(f"gamebatch: error: {bad}:"), refused.stderr
    assert not (tmp_path / "b").exists()
    right = tmp_path / "right.out"
    right.write_text(answers(STRGAME, text))
    wrong = tmp_path / "wrong.out"
    lines = answers(STRGAME, text).splitlines()
    wrong.write_text("\n".join(["Dirty" if lines[0] == "Pure" else "Pure", *lines[1:]]) + "\n")
    graded = gamebatch("grade", "-q", "-p", "strgame", str(source), str(right), *token)
    assert graded.returncode == 0, graded.stderr
    graded = gamebatch(
        "grade",
        "-q",
        "-p",
        "strgame",
        str(source),
        str(wrong),
        "--json",
        str(tmp_path / "g.json"),
        *token,
    )
    assert graded.returncode == 1, graded.stderr
    report = json.loads((tmp_path / "g.json").read_text())
    assert report["answers"] == [{"test": "in", "source": "cache"}]  # solved above, on the server
    assert (report["scoreboard"][0]["accepted"], report["scoreboard"][0]["max_score"]) == (119, 120)
    no_token = gamebatch("status", job)
    assert no_token.returncode == 1 and "token" in no_token.stderr
    assert "Traceback" not in no_token.stderr


def test_a_server_killed_while_producing_resumes_the_job_on_restart(
    tmp_path: Path, redis_server: RedisServer, workers: Workers
) -> None:
    # no workers yet, and a window of two chunks: production stalls with the job half read
    text = _text(STRGAME, 3000, seed=21)
    first = Server(tmp_path, redis_server.url, chunk={"max_cases": 50, "window": 2}).start(
        wait_healthy=False
    )
    try:
        with first.client() as http:
            job = http.put("/v1/jobs", params={"problem": "strgame"}, content=text.encode()).json()[
                "id"
            ]
            deadline = time.monotonic() + 30
            while http.get(f"/v1/jobs/{job}").json()["state"] != "producing":
                assert time.monotonic() < deadline
                time.sleep(0.05)
        first.kill()
    finally:
        first.stop()
    workers.start(concurrency=2)
    second = Server(tmp_path, redis_server.url, chunk={"max_cases": 50, "window": 2})
    second.port, second.url = first.port, first.url
    second.start()
    try:
        with second.client() as http:
            ended = wait_until_ended(http, job)
            assert ended["state"] == "done" and ended["total"] == 3000
            assert http.get(f"/v1/jobs/{job}/result").text == answers(STRGAME, text)
    finally:
        second.stop()


def test_cancel_stops_a_job_and_keeps_it_cancelled(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    running = Server(tmp_path, redis_server.url, server={"max_pending_jobs": 1}).start(
        wait_healthy=False
    )  # no workers
    try:
        with running.client() as http:
            job = http.put(
                "/v1/jobs", params={"problem": "strgame"}, content=_text(STRGAME, 50).encode()
            ).json()["id"]
            full = http.put(
                "/v1/jobs", params={"problem": "strgame"}, content=_text(STRGAME, 5).encode()
            )
            assert "unfinished" in _json_error(full, 503) and full.headers["retry-after"]
            with running.client("reader") as reader:
                assert "submit" in _json_error(reader.delete(f"/v1/jobs/{job}"), 403)
            with running.client("other") as other:  # may cancel, but not another's job
                assert "owner" in _json_error(other.delete(f"/v1/jobs/{job}"), 403)
            cancelled = http.delete(f"/v1/jobs/{job}")
            assert cancelled.status_code == 200 and cancelled.json()["state"] == "cancelled"
            _json_error(http.delete(f"/v1/jobs/{job}"), 409)
            time.sleep(1.0)  # the runner notices; the record stays cancelled
            assert http.get(f"/v1/jobs/{job}").json()["state"] == "cancelled"
            assert "cancelled" in _json_error(http.get(f"/v1/jobs/{job}/result"), 409)
    finally:
        running.stop()


def test_serve_refuses_an_open_address_without_a_token(tmp_path: Path) -> None:
    refused = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "serve", "--host", "0.0.0.0", "--port", "1"],
        check=False,
        env=command_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 2
    assert refused.stderr.startswith("gamebatch: error: refusing to listen on 0.0.0.0")


def _digest(data: bytes) -> str:
    return "sha-256=:" + base64.b64encode(hashlib.sha256(data).digest()).decode() + ":"


def _paused_blocks(text: bytes, resume: threading.Event) -> Iterator[bytes]:
    """An upload's body in blocks of 8 kB, the rest after the fifth only once `resume` is
    set (the job is produced meanwhile)."""
    for i in range(0, len(text), 8192):
        yield text[i : i + 8192]
        if i == 8192 * 4:
            assert resume.wait(20)


def test_an_upload_that_announces_its_digest_is_read_while_it_arrives(
    tmp_path: Path, redis_server: RedisServer, workers: Workers
) -> None:
    workers.start(concurrency=2)
    text = _text(STRGAME, 2000, seed=31).encode()
    job_id = f"strgame-{hashlib.sha256(text).hexdigest()[:24]}"
    resume = threading.Event()
    blocks = partial(_paused_blocks, text, resume)

    running = Server(tmp_path, redis_server.url, chunk={"max_cases": 20}).start()
    try:
        with running.client() as http:
            headers = {"Content-Digest": _digest(text), "Content-Length": str(len(text))}
            sent: dict[str, httpx.Response] = {}

            def send() -> None:
                sent["response"] = http.put(
                    "/v1/jobs", params={"problem": "strgame"}, content=blocks(), headers=headers
                )

            sender = threading.Thread(target=send)
            sender.start()
            store = JobStore.from_url(redis_server.url)
            deadline = time.monotonic() + 20
            while not ((c := store.progress(job_id)) and c.done > 0):  # answers mid-upload
                assert time.monotonic() < deadline and sender.is_alive(), sent
                time.sleep(0.01)
            store.close()
            resume.set()
            sender.join(30)
            created = sent["response"]
            assert created.status_code == 201, created.text
            assert created.json()["id"] == job_id
            assert wait_until_ended(http, job_id)["state"] == "done"
            assert http.get(f"/v1/jobs/{job_id}/result").text == answers(STRGAME, text.decode())
            again = http.put(
                "/v1/jobs", params={"problem": "strgame"}, content=text, headers=headers
            )
            assert again.status_code == 200 and again.json()["id"] == job_id
        assert sorted((running.spool / "inputs").iterdir()) == []
    finally:
        resume.set()
        running.stop()


def test_an_upload_on_a_shared_filesystem_reaches_the_workers_by_its_place_in_the_spool(
    tmp_path: Path, redis_server: RedisServer, workers: Workers
) -> None:
    """With `file_payloads` (server and workers see the same files), chunks read from an
    upload while it arrives name their place in the spooled input, with the digest of their
    bytes, instead of carrying them through Redis."""
    text = _text(STRGAME, 2000, seed=37).encode()
    job_id = f"strgame-{hashlib.sha256(text).hexdigest()[:24]}"
    resume = threading.Event()
    blocks = partial(_paused_blocks, text, resume)

    running = Server(tmp_path, redis_server.url, chunk={"max_cases": 20}, file_payloads=True).start(
        wait_healthy=False
    )  # no worker yet
    store = JobStore.from_url(redis_server.url)
    try:
        with running.client() as http:
            headers = {"Content-Digest": _digest(text), "Content-Length": str(len(text))}
            sender = threading.Thread(
                target=lambda: http.put(
                    "/v1/jobs", params={"problem": "strgame"}, content=blocks(), headers=headers
                )
            )
            sender.start()
            deadline = time.monotonic() + 20
            while store.chunk_payload(job_id, 0) is None:  # no worker yet: it waits in Redis
                assert time.monotonic() < deadline and sender.is_alive()
                time.sleep(0.01)
            first = decode_payload(store.chunk_payload(job_id, 0) or b"")
            assert isinstance(first, FilePayload)
            assert first.path == str((running.spool / "inputs" / f"{job_id}.in").resolve())
            workers.start(concurrency=2, GAMEBATCH_FILE_PAYLOADS="true")
            resume.set()
            sender.join(30)
            assert wait_until_ended(http, job_id)["state"] == "done"
            assert http.get(f"/v1/jobs/{job_id}/result").text == answers(STRGAME, text.decode())
    finally:
        resume.set()
        store.close()
        running.stop()


def test_a_body_that_is_not_its_announced_digest_leaves_no_job(
    server: Server, redis_server: RedisServer
) -> None:
    text = _text(STRGAME, 500, seed=32).encode()
    lie = _digest(text.replace(b"a", b"b", 1))
    with server.client() as http:
        refused = http.put(
            "/v1/jobs", params={"problem": "strgame"}, content=text, headers={"Content-Digest": lie}
        )
        assert "Content-Digest" in _json_error(refused, 400)
        named = f"strgame-{hashlib.sha256(text.replace(b'a', b'b', 1)).hexdigest()[:24]}"
        seen = []
        for event in events(http, "0", named):  # followers learn it became no job
            seen.append(event["type"])
            if event["type"] == "refused":
                break
        assert seen[0] == "created" and "done" not in seen and "failed" not in seen, seen
        _json_error(
            http.put(
                "/v1/jobs?problem=strgame",
                content=text,
                headers={"Content-Digest": "sha-256=:short:"},
            ),
            400,
        )
        assert http.get("/v1/jobs").json()["jobs"] == []
    store = redis.Redis.from_url(redis_server.url)
    deadline = time.monotonic() + 20

    def left() -> list[bytes]:
        return [*store.scan_iter("gb:job*"), *store.scan_iter("gb:api:job*")]

    while left() or list((server.spool / "inputs").iterdir()):
        assert time.monotonic() < deadline, (left(), list((server.spool / "inputs").iterdir()))
        time.sleep(0.05)
    store.close()


def test_keep_going_jobs_list_their_invalid_cases_by_the_uploaded_name(server: Server) -> None:
    good = _text(STRGAME, 4, seed=41).splitlines(keepends=True)
    text = "".join(good[:1]) + "1 x\nab\n" + "".join(good[1:])  # a K that is no number
    text = text.replace(good[0], "5\n", 1)
    with server.client() as http:
        params = {"problem": "strgame", "keep_going": 1, "name": "mixed.in"}
        job = http.put("/v1/jobs", params=params, content=text.encode()).json()
        assert job["id"].endswith("-keep-going")
        ended = wait_until_ended(http, job["id"])
        assert (ended["state"], ended["invalid"], ended["total"]) == ("done", 1, 5), ended
        result = http.get(f"/v1/jobs/{job['id']}/result").text.splitlines()
        assert result[0] == "INVALID" and len(result) == 5
        errors = http.get(ended["links"]["errors"]).text.splitlines()
        assert len(errors) == 1 and errors[0].startswith("mixed.in:2: case 1:"), errors


def test_a_worker_killed_during_an_http_job_is_recovered_from(
    tmp_path: Path, redis_server: RedisServer, workers: Workers
) -> None:
    first = workers.start(concurrency=1, GAMEBATCH_LEASE_SECONDS="2")
    running = Server(
        tmp_path, redis_server.url, chunk={"max_cases": 100}, lease_seconds=2, stall_seconds=3
    ).start()
    text = _text(STRGAME, 3000, size=200, seed=51)
    try:
        with running.client() as http:
            job = http.put("/v1/jobs", params={"problem": "strgame"}, content=text.encode()).json()[
                "id"
            ]
            deadline = time.monotonic() + 30
            while not (http.get(f"/v1/jobs/{job}").json().get("done") or 0) > 0:
                assert time.monotonic() < deadline
                time.sleep(0.02)
            os.killpg(first.pid, signal.SIGKILL)  # the worker and its pool, mid-job
            first.wait(10)
            workers.start(concurrency=2, GAMEBATCH_LEASE_SECONDS="2")
            ended = wait_until_ended(http, job, timeout=180)
            assert ended["state"] == "done", ended
            assert http.get(f"/v1/jobs/{job}/result").text == answers(STRGAME, text)
    finally:
        running.stop()


def test_finished_jobs_and_their_results_are_kept_for_keep_seconds_only(
    tmp_path: Path, redis_server: RedisServer, workers: Workers
) -> None:
    workers.start(concurrency=1)
    running = Server(tmp_path, redis_server.url, server={"keep_seconds": 3}).start()
    try:
        with running.client() as http:
            job = http.put(
                "/v1/jobs", params={"problem": "strgame"}, content=_text(STRGAME, 10).encode()
            ).json()["id"]
            assert wait_until_ended(http, job)["state"] == "done"
            assert running.spool.joinpath("results", f"{job}.out").exists()
            deadline = time.monotonic() + 20
            while http.get(f"/v1/jobs/{job}").status_code != 404:
                assert time.monotonic() < deadline
                time.sleep(0.2)
            assert not running.spool.joinpath("results", f"{job}.out").exists()
            assert http.get("/v1/jobs").json()["jobs"] == []
    finally:
        running.stop()
