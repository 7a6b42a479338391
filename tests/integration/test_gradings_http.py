"""Grading over HTTP against a real `gamebatch serve`, Redis and workers."""

from __future__ import annotations

import csv
import gzip
import io
import json
import tarfile
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import httpx
import pytest
import redis

from pipeline.games.registry import get_problem
from pipeline.local.redis_server import RedisServer
from tests.conftest import Workers
from tests.helpers import answers, input_text, random_cases
from tests.integration.server import Server, wait_until_ended

STRGAME = get_problem("strgame")


@pytest.fixture
def server(tmp_path: Path, redis_server: RedisServer, workers: Workers) -> Iterator[Server]:
    workers.start(concurrency=2)
    limits = {"max_archive_files": 20, "max_archive_bytes": 1 << 20}
    running = Server(tmp_path, redis_server.url, limits=limits).start()
    yield running
    running.stop()


def _contest() -> dict[str, bytes]:
    t1 = input_text(STRGAME, random_cases(STRGAME, "random", 30, 40, seed=1))
    t2 = input_text(STRGAME, random_cases(STRGAME, "random", 20, 40, seed=2))
    a1, a2 = answers(STRGAME, t1), answers(STRGAME, t2)
    wrong = a1.replace("Pure", "Dirty", 1) if "Pure" in a1 else a1.replace("Dirty", "Pure", 1)
    return {
        "tests/t1.in": t1.encode(),
        "tests/t2.in": t2.encode(),
        "tests/t2.ans": a2.encode(),
        "subs/alice/t1.out": a1.encode(),
        "subs/alice/t2.out": a2.encode(),
        "subs/bob/t1.out": wrong.encode(),  # and no t2.out: all MISSING
    }


def _tar_gz(files: dict[str, bytes]) -> bytes:
    """The same bytes for the same files (no time stamps), as a re-upload sends."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return gzip.compress(raw.getvalue(), mtime=0)


def _zip(files: dict[str, bytes]) -> bytes:
    raw = io.BytesIO()
    with zipfile.ZipFile(raw, "w", zipfile.ZIP_DEFLATED) as zipped:
        for name, data in files.items():
            zipped.writestr(name, data)
    return raw.getvalue()


def _ended(http: httpx.Client, grading: str) -> dict[str, Any]:
    return wait_until_ended(http, grading, kind="gradings")


def test_an_archive_is_graded_by_the_grading_service_with_every_report(server: Server) -> None:
    files = _contest()
    with server.client() as http:
        created = http.post("/v1/gradings", params={"problem": "strgame"}, content=_tar_gz(files))
        assert created.status_code == 201, created.text
        grading = created.json()["id"]
        assert created.json()["state"] in ("queued", "running")
        assert http.get(f"/v1/gradings/{grading}/junit").status_code == 409  # not yet done
        ended = _ended(http, grading)
        assert ended["state"] == "done", ended
        assert ended["summary"] == {
            "tests": 2,
            "submissions": 4,
            "all_accepted": False,
            "contestants": 2,
            "cases_wrong": 21,
        }
        report = http.get(ended["links"]["report.json"]).json()
        assert report["version"] == 2 and len(report["submissions"]) == 4
        bob = {s["test"]: s for s in report["submissions"] if s["contestant"] == "bob"}
        assert bob["t1"]["accepted"] == 29 and bob["t2"]["accepted"] == 0
        assert {"test": "t2", "source": "file"} in report["answers"]
        junit = ElementTree.fromstring(http.get(ended["links"]["junit"]).content)
        assert junit.tag in ("testsuites", "testsuite")
        board = list(csv.reader(io.StringIO(http.get(ended["links"]["scoreboard.csv"]).text)))
        assert board[1][1] == "alice" and board[2][1] == "bob"
        scoreboard = http.get(ended["links"]["scoreboard.json"]).json()
        assert json.dumps(scoreboard).count("alice") == 1
        case = http.get(f"/v1/gradings/{grading}/cases/t1/1").json()
        assert case["case"] == 1 and case["input"].split()[0].isdigit()
        assert http.get(f"/v1/gradings/{grading}/cases/t9/1").status_code == 404
        assert http.get(f"/v1/gradings/{grading}/cases/..%2Ft1/1").status_code == 404
        again = http.post("/v1/gradings", params={"problem": "strgame"}, content=_tar_gz(files))
        assert again.status_code == 200 and again.json()["id"] == grading  # idempotent


def test_a_zip_is_graded_the_same_way(server: Server) -> None:
    with server.client() as http:
        created = http.post("/v1/gradings", params={"problem": "strgame"}, content=_zip(_contest()))
        assert created.status_code == 201, created.text
        assert _ended(http, created.json()["id"])["summary"]["cases_wrong"] == 21


def _refused(http: httpx.Client, body: bytes, status: int) -> str:
    response = http.post("/v1/gradings", params={"problem": "strgame"}, content=body)
    assert response.status_code == status, response.text
    assert "traceback" not in response.text.lower()
    message: str = response.json()["error"]
    return message


def test_hostile_archives_are_refused_and_leave_nothing(
    server: Server, redis_server: RedisServer
) -> None:
    files = _contest()
    link = io.BytesIO()
    with tarfile.open(fileobj=link, mode="w") as tar:
        info = tarfile.TarInfo("subs/mallory/t1.out")
        info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(info)
    with server.client() as http:
        assert "climbs out" in _refused(http, _tar_gz({"../x/tests/a.in": b"1"}), 422)
        assert "absolute" in _refused(http, _tar_gz({"/tmp/tests/a.in": b"1"}), 422)
        assert "link" in _refused(http, link.getvalue(), 422)
        assert "same file" in _refused(http, _tar_gz({**files, "tests/T1.in": b"1"}), 422)
        many = {f"subs/c{i}/t1.out": b"Pure\n" for i in range(30)}
        assert "max_archive_files" in _refused(http, _tar_gz({**files, **many}), 413)
        bomb = _tar_gz({"tests/t1.in": b"1\n" + b" " * (4 << 20)})
        assert len(bomb) < 20_000 and "max_archive_bytes" in _refused(http, bomb, 413)
        assert "tests/" in _refused(http, _tar_gz({"subs/a/t1.out": b"Pure\n"}), 422)
        assert "not a readable" in _refused(http, b"this is no archive" * 10, 422)
        response = http.post("/v1/gradings", params={"problem": "chess"}, content=b"x")
        assert response.status_code == 400
    assert not list((server.spool / "gradings").iterdir())
    assert not list((server.spool / "uploads").iterdir())
    client = redis.Redis.from_url(redis_server.url)
    assert not list(client.scan_iter("gb:api:grading*"))
    client.close()


def test_a_grading_with_a_bad_test_fails_with_the_cli_message_or_grades_the_rest(
    server: Server,
) -> None:
    files = {**_contest(), "tests/t1.in": b"2\n1 1\nab\n"}
    with server.client() as http:
        grading = http.post(
            "/v1/gradings", params={"problem": "strgame"}, content=_tar_gz(files)
        ).json()["id"]
        ended = _ended(http, grading)
        assert ended["state"] == "failed" and "t1.in:3: case 2:" in ended["error"], ended
        assert ended["error"].startswith("tests/t1.in:3:"), ended  # as in the archive
        assert str(server.spool) not in json.dumps(ended), ended  # never the server's folders
        kept = http.post(
            "/v1/gradings", params={"problem": "strgame", "keep_going": "1"}, content=_tar_gz(files)
        ).json()["id"]
        assert kept == f"{grading}-keep-going"
        ended = _ended(http, kept)
        assert ended["state"] == "done", ended  # the other test is graded
        assert "t1.in:3: case 2:" in ended["summary"]["invalid_tests"]["t1"]
        report = http.get(ended["links"]["report.json"]).json()
        marked = {s["test"]: s for s in report["submissions"]}
        assert marked["t1"]["error"].startswith("not graded: ") and "verdicts" in marked["t2"]


def test_a_grading_can_be_cancelled_by_its_owner(tmp_path: Path, redis_server: RedisServer) -> None:
    running = Server(tmp_path, redis_server.url).start(wait_healthy=False)  # no workers: it waits
    try:
        with running.client() as http:
            grading = http.post(
                "/v1/gradings", params={"problem": "strgame"}, content=_tar_gz(_contest())
            ).json()["id"]
            deadline = time.monotonic() + 20
            while http.get(f"/v1/gradings/{grading}").json()["state"] != "running":
                assert time.monotonic() < deadline
                time.sleep(0.05)
            with running.client("reader") as reader:
                assert reader.delete(f"/v1/gradings/{grading}").status_code == 403
            with running.client("other") as other:  # may cancel, but not another's grading
                refused = other.delete(f"/v1/gradings/{grading}")
                assert refused.status_code == 403 and "owner" in refused.json()["error"]
            cancelled = http.delete(f"/v1/gradings/{grading}")
            assert cancelled.status_code == 200 and cancelled.json()["state"] == "cancelled"
            assert http.delete(f"/v1/gradings/{grading}").status_code == 409
            assert http.get(f"/v1/gradings/{grading}/report.json").status_code == 409
    finally:
        running.stop()
