"""Findings of a hostile review of `gamebatch serve` (issue 23), each against a real server,
Redis and workers: races, leaks between tokens, webhooks, slow clients, the event feed."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import io
import json
import socket
import tarfile
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from pipeline.config import ServerSettings
from pipeline.games.registry import get_problem
from pipeline.local.redis_server import RedisServer
from pipeline.server import webhooks
from pipeline.server.auth import digest
from tests.conftest import Workers
from tests.helpers import answers, input_text, random_cases
from tests.integration.server import WEBHOOK_SECRET, Server, wait_until_ended

STRGAME = get_problem("strgame")
UPLOADER = "submit-only-token-of-the-tests"


def _text(cases: int, seed: int = 1) -> str:
    return input_text(STRGAME, random_cases(STRGAME, "random", cases, 40, seed=seed))


def _content_digest(data: bytes) -> str:
    return "sha-256=:" + base64.b64encode(hashlib.sha256(data).digest()).decode() + ":"


def _error(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, (response.status_code, response.text)
    assert response.headers["content-type"] == "application/json", response.text
    message: str = response.json()["error"]
    return message


def _start(tmp_path: Path, broker: str, **server: Any) -> Server:
    """A server whose tokens are the admin token file, a reader and a submit-only uploader."""
    running = Server(tmp_path, broker, server=server)
    config = yaml.safe_load((running.dir / "config.yaml").read_text())
    config["server"]["tokens"].append(
        {"name": "uploader", "sha256": digest(UPLOADER), "scopes": ["submit"]}
    )
    (running.dir / "config.yaml").write_text(yaml.safe_dump(config))
    return running.start()


@pytest.fixture
def served(tmp_path: Path, redis_server: RedisServer, workers: Workers) -> Iterator[Server]:
    workers.start(concurrency=2)
    running = _start(tmp_path, redis_server.url)
    yield running
    running.stop()


def _no_traceback(server: Server) -> None:
    log = server.log.read_text()
    assert "Traceback" not in log, log[-4000:]


# ---- 2: identical archives posted at once


def _contest(tests: int, seed: int) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as tar:
        for n in range(tests):
            text = _text(3, seed=seed * 1000 + n)
            for name, data in (
                (f"tests/t{n:02}.in", text),
                (f"subs/alice/t{n:02}.out", answers(STRGAME, text)),
            ):
                info = tarfile.TarInfo(name)
                info.size = len(data.encode())
                tar.addfile(info, io.BytesIO(data.encode()))
    return raw.getvalue()


def _at_once(server: Server, archive: bytes, posts: int) -> list[httpx.Response]:
    """The same archive posted by `posts` clients at the same moment."""
    start = threading.Barrier(posts)
    answered: list[httpx.Response] = []

    def post() -> None:
        with server.client() as http:
            start.wait()
            answered.append(http.post("/v1/gradings?problem=strgame", content=archive))

    threads = [threading.Thread(target=post) for _ in range(posts)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answered


def test_identical_archives_posted_at_once_are_one_complete_grading(served: Server) -> None:
    for seed in (1, 2, 3):
        answered = _at_once(served, _contest(40, seed), 4)
        statuses = sorted(r.status_code for r in answered)
        assert statuses == [200, 200, 200, 201], [(r.status_code, r.text) for r in answered]
        ids = {r.json()["id"] for r in answered}
        assert len(ids) == 1
        with served.client() as http:
            ended = wait_until_ended(http, ids.pop(), kind="gradings")
        assert ended["state"] == "done", ended
        assert ended["summary"]["tests"] == 40 and ended["summary"]["submissions"] == 40, ended
        assert ended["summary"]["all_accepted"] and ended["notes"] == [], ended
    assert [p.name for p in (served.spool / "gradings").iterdir() if p.name.startswith(".")] == []
    _no_traceback(served)


# ---- 5: a batch names only jobs its caller may read


def test_a_batch_names_only_jobs_its_caller_may_read(served: Server) -> None:
    url = "http://127.0.0.1:9/hook"
    with served.client() as admin, served.client(UPLOADER) as uploader:
        theirs = admin.put("/v1/jobs?problem=strgame", content=_text(3).encode()).json()["id"]
        mine = uploader.put("/v1/jobs?problem=strgame", content=_text(3, 2).encode()).json()["id"]
        unknown = f"strgame-{'0' * 24}"
        refused = uploader.post("/v1/batches", json={"jobs": [theirs], "callback_url": url})
        never = uploader.post("/v1/batches", json={"jobs": [unknown], "callback_url": url})
        assert _error(refused, 404) == f"no job {theirs}"
        assert _error(never, 404) == f"no job {unknown}"
        both = uploader.post("/v1/batches", json={"jobs": [mine, theirs], "callback_url": url})
        assert _error(both, 404) == f"no job {theirs}"
        own = uploader.post("/v1/batches", json={"jobs": [mine], "callback_url": url})
        assert own.status_code == 201, own.text
        assert (
            admin.post(
                "/v1/batches", json={"jobs": [theirs, mine], "callback_url": url}
            ).status_code
            == 201
        )


def test_an_upload_of_known_content_shows_a_submit_only_caller_nothing_of_its_owner(
    served: Server,
) -> None:
    """Content is known by its digest, so an upload of it gets that job's id; but another
    owner's file name, size and outcome stay theirs."""
    text = _text(3, 5).encode()
    with served.client() as admin, served.client(UPLOADER) as uploader:
        theirs = admin.put(
            "/v1/jobs", params={"problem": "strgame", "name": "secret-plan.in"}, content=text
        ).json()
        assert wait_until_ended(admin, theirs["id"])["state"] == "done"
        for headers in ({}, {"Content-Digest": _content_digest(text)}):
            again = uploader.put("/v1/jobs?problem=strgame", content=text, headers=headers)
            assert again.status_code == 200 and again.json()["id"] == theirs["id"], again.text
            shown = again.json()
            assert "secret-plan" not in again.text and "result_sha256" not in shown, shown
        assert admin.put("/v1/jobs?problem=strgame", content=text).json()["name"] == (
            "secret-plan.in"
        )  # its owner (an admin) sees it all


# ---- 6: webhooks


def test_malformed_callback_urls_get_422(served: Server) -> None:
    bad = [
        "http://[::1",
        "http://127.0.0.1:99999/",
        "http://127.0.0.1:0/",
        "ftp://x",
        "http:///x",
        "http://",
        "http://127.0.0.1/" + "a" * 5000,
        "http://127.0.0.1/a b",
        "http://127.0.0.1/\x01",
    ]
    with served.client() as http:
        job = http.put("/v1/jobs?problem=strgame", content=_text(2).encode()).json()["id"]
        for url in bad:
            _error(
                http.put(
                    "/v1/jobs",
                    params={"problem": "strgame", "callback_url": url},
                    content=_text(2, 9).encode(),
                ),
                422,
            )
            _error(http.post("/v1/batches", json={"jobs": [job], "callback_url": url}), 422)
            form = http.post(
                "/v1/jobs?problem=strgame",
                data={"callback_url": url},
                files={"file": ("f.in", _text(2, 11).encode())},
            )
            _error(form, 422 if len(url) < 4096 else 400)  # checked as a query parameter is
        assert [j["id"] for j in http.get("/v1/jobs").json()["jobs"]] == [job]
    _no_traceback(served)


@pytest.fixture
def silent_host() -> Iterator[str]:
    """A callback URL whose host accepts connections and never answers."""
    listener = socket.create_server(("127.0.0.1", 0), backlog=64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                held.append(listener.accept()[0])

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}/hook"
    stop.set()
    thread.join()
    for connection in held:
        connection.close()
    listener.close()


def _time_one_job(http: httpx.Client, seed: int) -> float:
    started = time.monotonic()
    job = http.put("/v1/jobs?problem=strgame", content=_text(1, seed).encode()).json()["id"]
    assert wait_until_ended(http, job, timeout=60)["state"] == "done"
    return time.monotonic() - started


def test_callbacks_to_a_silent_host_never_hold_a_runner(
    tmp_path: Path, redis_server: RedisServer, workers: Workers, silent_host: str
) -> None:
    workers.start(concurrency=2)
    running = _start(tmp_path, redis_server.url, webhook_timeout=1, webhook_attempts=2)
    try:
        with running.client() as http:
            alone = _time_one_job(http, 100)
            ids = [  # twice as many as the runners' senders (2 runners of 4)
                http.put(
                    "/v1/jobs",
                    params={"problem": "strgame", "callback_url": silent_host},
                    content=_text(2, seed).encode(),
                ).json()["id"]
                for seed in range(16)
            ]
            for job in ids:
                assert wait_until_ended(http, job, timeout=60)["state"] == "done"
            assert _time_one_job(http, 101) < alone + 2.0  # not behind 16 stuck deliveries
            deadline = time.monotonic() + 60
            while any(
                http.get(f"/v1/jobs/{j}").json()["webhook"]["state"] != "failed" for j in ids
            ):
                assert time.monotonic() < deadline
                time.sleep(0.2)
            error = http.get(f"/v1/jobs/{ids[0]}").json()["webhook"]["error"]
            assert "Timeout" in error, error
    finally:
        running.stop()
    _no_traceback(running)


def test_a_full_delivery_queue_fails_the_webhook_at_once(
    tmp_path: Path, redis_server: RedisServer, workers: Workers, silent_host: str
) -> None:
    workers.start(concurrency=2)
    running = _start(
        tmp_path,
        redis_server.url,
        webhook_timeout=30,
        webhook_attempts=1,
        webhook_queue=2,
        webhook_senders=1,
    )
    try:
        with running.client() as http:
            ids = [
                http.put(
                    "/v1/jobs",
                    params={"problem": "strgame", "callback_url": silent_host},
                    content=_text(2, seed).encode(),
                ).json()["id"]
                for seed in range(8)
            ]
            for job in ids:
                assert wait_until_ended(http, job, timeout=60)["state"] == "done"
            time.sleep(0.5)
            states = [http.get(f"/v1/jobs/{j}").json().get("webhook", {}) for j in ids]
            dropped = [s for s in states if s.get("state") == "failed"]
            assert len(dropped) >= 5, states  # one sent, two waiting, the rest dropped
            assert all("queue" in s["error"] and s["attempts"] == 0 for s in dropped), dropped
    finally:
        running.stop()


class _Hook(BaseHTTPRequestHandler):
    hosts: list[str]

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self.hosts.append(self.headers["Host"])
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def test_a_callback_connects_to_the_address_that_was_checked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hosts: list[str] = []
    receiver = HTTPServer(("127.0.0.1", 0), type("Hook", (_Hook,), {"hosts": hosts}))
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    port = receiver.server_port
    real = socket.getaddrinfo
    answers_ = iter(["127.0.0.1"])  # then the name "rebinds" to an address nobody serves

    def rebinding(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host != "rebind.test":
            return real(host, *args, **kwargs)
        return real(next(answers_, "127.0.0.2"), *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    settings = ServerSettings(
        webhook_secret=WEBHOOK_SECRET,
        webhook_hosts=("rebind.test",),
        webhook_private_networks=("127.0.0.1/32",),
        webhook_attempts=1,
        webhook_timeout=5,
    )
    states: list[dict[str, Any]] = []
    try:
        delivered = webhooks.deliver(
            f"http://rebind.test:{port}/hook",
            "job.done",
            {"job": {}},
            settings,
            lambda s: states.append(dict(s)),
        )
    finally:
        receiver.shutdown()
        receiver.server_close()
    assert delivered, states
    assert hosts == [f"rebind.test:{port}"]


# ---- 7: slow clients


def _closed_within(raw: socket.socket, seconds: float) -> tuple[bytes, float]:
    """What the server sent until it closed the connection, and when (it must close)."""
    started = time.monotonic()
    raw.settimeout(seconds)
    received = b""
    with contextlib.suppress(ConnectionResetError):
        while chunk := raw.recv(65536):
            received += chunk
    return received, time.monotonic() - started


def _connect(server: Server) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.port))


def _request(server: Server, path: str, length: int, extra: str = "") -> bytes:
    return (
        f"PUT {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {server.token}\r\n"
        f"Content-Length: {length}\r\n{extra}\r\n"
    ).encode()


def test_slow_headers_and_stalled_bodies_are_cut_off_and_leave_nothing(
    tmp_path: Path, redis_server: RedisServer, workers: Workers
) -> None:
    workers.start(concurrency=1)
    running = _start(tmp_path, redis_server.url, header_timeout=1.5, body_timeout=1.5)
    try:
        idle = [_connect(running) for _ in range(20)]
        half = [_connect(running) for _ in range(20)]
        for raw in half:
            raw.sendall(b"PUT /v1/jobs?problem=strgame HTTP/1.1\r\nHost: x\r\nAuthor")
        for raw in [*idle, *half]:
            got, took = _closed_within(raw, 6)
            assert took < 4, took
            assert got == b"" if raw in idle else got.startswith(b"HTTP/1.1 408 "), got
            raw.close()
        body = _text(2000).encode()
        digest_ = base64.b64encode(hashlib.sha256(body).digest()).decode()
        for path, extra, folder in (
            ("/v1/jobs?problem=strgame", "", "uploads"),
            ("/v1/jobs?problem=strgame", f"Content-Digest: sha-256=:{digest_}:\r\n", "inputs"),
            ("/v1/gradings?problem=strgame", "", "uploads"),
        ):
            method = "POST" if "gradings" in path else "PUT"
            with _connect(running) as raw:
                head = _request(running, path, len(body), extra).replace(b"PUT", method.encode())
                raw.sendall(head + body[: len(body) // 2])
                got, took = _closed_within(raw, 6)
            assert took < 4, took
            status, _, rest = got.partition(b"\r\n")
            assert status.startswith(b"HTTP/1.1 408"), got
            assert "body" in json.loads(rest.partition(b"\r\n\r\n")[2])["error"]
            deadline = time.monotonic() + 10  # an input read while it arrived: by its runner
            while list((running.spool / folder).iterdir()):
                assert time.monotonic() < deadline, list((running.spool / folder).iterdir())
                time.sleep(0.05)
        with running.client() as http:  # a slow but steady client is served
            assert http.get("/v1/jobs").json()["jobs"] == []
            created = http.put("/v1/jobs?problem=strgame", content=_text(3).encode())
            assert created.status_code == 201, created.text
    finally:
        running.stop()
    _no_traceback(running)


# ---- 11: the event feed and query parameters


def test_an_idle_event_stream_stays_open_and_bad_parameters_are_400(
    tmp_path: Path, redis_server: RedisServer, workers: Workers
) -> None:
    workers.start(concurrency=2)
    served = _start(tmp_path, redis_server.url, keep_alive=1.0)
    try:
        _idle_stream_and_bad_parameters(served)
    finally:
        served.stop()


def _idle_stream_and_bad_parameters(served: Server) -> None:
    with served.client() as http:
        seen: list[str] = []
        comments = 0
        started = time.monotonic()
        since = http.get("/v1/jobs").json()["events_since"]
        with http.stream("GET", "/v1/events", params={"since": since}) as stream:
            assert stream.status_code == 200
            for line in stream.iter_lines():
                comments += line.startswith(":")
                if line.startswith("event: "):
                    seen.append(line.removeprefix("event: "))
                    break
                if time.monotonic() - started > 3.5 and comments >= 2:  # kept open, then an event
                    threading.Thread(
                        target=http.put,
                        args=("/v1/jobs?problem=strgame",),
                        kwargs={"content": _text(2).encode()},
                    ).start()
                    started = float("inf")
        assert seen == ["created"] and comments >= 2
        _error(http.get("/v1/events", params={"since": f"{2**64}-0"}), 400)
        _error(http.get("/v1/events", params={"since": "99999999999999999999-1"}), 400)
        _error(http.get("/v1/events", headers={"Last-Event-ID": f"1-{2**64}"}), 400)
        for cursor in ("nan", "inf", "-inf", "1e999", "x"):
            _error(http.get("/v1/jobs", params={"cursor": cursor}), 400)
        for limit in ("1e3", "nan", "9" * 5000):
            _error(http.get("/v1/jobs", params={"limit": limit}), 400)
        _error(http.get("/v1/gradings", params={"cursor": "nan"}), 400)
        assert "unknown parameter 'before'" in _error(http.get("/v1/jobs?before=nan"), 400)
        twice = http.put("/v1/jobs?problem=strgame&problem=pathgame", content=_text(1).encode())
        assert "'problem' is given twice" in _error(twice, 400)
    _no_traceback(served)


def test_grading_case_numbers_that_are_no_numbers_are_404(served: Server) -> None:
    with served.client() as http:
        grading = http.post("/v1/gradings?problem=strgame", content=_contest(1, 5)).json()["id"]
        for number in ("²", "9" * 5000, "-1"):
            _error(http.get(f"/v1/gradings/{grading}/cases/t00/{number}"), 404)
    _no_traceback(served)


# ---- 14: the list of gradings, ranges past the end, the URL `serve` prints


def test_gradings_are_listed_and_a_range_past_the_end_is_416(served: Server) -> None:
    assert f"gamebatch serve: listening on http://127.0.0.1:{served.port}/" in (
        served.log.read_text().splitlines()
    )
    with served.client() as http, served.client("reader") as reader:
        made = []
        for seed in (7, 8, 9):  # one after the other: gradings that share a comparison fail
            posted = http.post("/v1/gradings?problem=strgame", content=_contest(2, seed))
            made.append(posted.json()["id"])
            assert wait_until_ended(http, made[-1], kind="gradings")["state"] == "done"
        listed = reader.get("/v1/gradings", params={"limit": 2})
        assert listed.status_code == 200, listed.text
        page = listed.json()
        assert [g["id"] for g in page["gradings"]] == made[::-1][:2]
        rest = reader.get(page["next"]).json()
        assert [g["id"] for g in rest["gradings"]] == made[:1] and rest["next"] is None
        with served.client(UPLOADER) as uploader:
            _error(uploader.get("/v1/gradings"), 403)
        job = http.put("/v1/jobs?problem=strgame", content=_text(5).encode()).json()["id"]
        assert wait_until_ended(http, job)["state"] == "done"
        size = len(http.get(f"/v1/jobs/{job}/result").content)
        past = http.get(f"/v1/jobs/{job}/result", headers={"Range": f"bytes={size}-"})
        assert "range" in _error(past, 416)
        assert past.headers["content-range"] == f"bytes */{size}"
        whole = http.get(f"/v1/jobs/{job}/result", headers={"Range": "bytes=0-"})
        assert whole.status_code == 206 and len(whole.content) == size
        _error(http.get(f"/v1/jobs/{job}/result", headers={"Range": "bytes=9-2"}), 400)
        report = http.get(f"/v1/gradings/{made[0]}/report.json", headers={"Range": "bytes=999999-"})
        assert _error(report, 416) and report.headers["content-range"].startswith("bytes */")
