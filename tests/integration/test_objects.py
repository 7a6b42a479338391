"""Inputs and results by URL, on a real S3 API server on loopback (moto_server): workers that
share nothing with the producer but Redis and the object store solve an object exactly, Redis
never holds its bytes, and a result object appears whole or not at all."""

from __future__ import annotations

import base64
import hashlib
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from pipeline.data import objects
from pipeline.data.payload_store import COPY_GRACE_SECONDS, sweep_payload_store
from pipeline.games.registry import get_problem
from pipeline.local.redis_server import RedisServer
from pipeline.store import keys
from pipeline.store.jobstate import PAYLOAD_OBJECT
from pipeline.store.jobstore import JobStore
from tests.conftest import Workers, run_reference
from tests.helpers import answers, command_env, input_text, random_cases
from tests.integration.server import Server, wait_until_ended
from tests.s3server import BUCKET, S3, can_hide, hidden


@pytest.fixture
def s3(tmp_path: Path) -> Iterator[S3]:
    server = S3(tmp_path / "moto.log")
    try:
        yield server
    finally:
        server.stop()


def _gamebatch(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pipeline.cli", *args],
        capture_output=True,
        text=True,
        check=False,
        env=command_env(**env),
        timeout=300,
    )


def _expected(text: str, reference: dict[str, Path] | None) -> str:
    if reference and "strgame" in reference:
        return run_reference(reference["strgame"], text)
    return answers(get_problem("strgame"), text)


def _warmed(s3: S3, redis_server: RedisServer) -> redis.Redis:
    """A client of the Redis once the workers have solved a first case: what a first job
    stores once per cluster (the game's tables, Celery's bindings, a few hundred KB) is then
    in Redis before the peak is measured, so that the peak's growth is the job's alone."""
    url = s3.put("in/warm.in", b"1\n1 1\nab\n")
    warm = _gamebatch("solve", "-q", "-p", "strgame", "--broker", redis_server.url, url, env=s3.env)
    assert warm.returncode == 0, warm.stderr
    return redis.Redis.from_url(redis_server.url)


@pytest.mark.integration
@pytest.mark.slow
def test_workers_that_share_nothing_but_redis_and_the_store_solve_an_object_exactly(
    s3: S3, redis_server: RedisServer, tmp_path: Path, reference: dict[str, Path] | None
) -> None:
    if not can_hide():
        pytest.skip("needs unshare and root for a mount namespace")
    problem = get_problem("strgame")
    text = input_text(problem, random_cases(problem, "random", 40_000, 200, seed=25))
    data = text.encode()
    local = tmp_path / "producer"
    local.mkdir()
    (local / "data.in").write_bytes(data)  # the producer's copy, which workers cannot see
    url = s3.put("in/data.in", data)
    apart = hidden([tmp_path])
    seen = subprocess.run([*apart, "test", "-e", str(local / "data.in")], check=False)
    assert seen.returncode == 1  # the namespace hides the producer's files
    pool = Workers(redis_server.url, tmp_path.parent)  # logs outside what the workers see
    try:
        pool.start(concurrency=2, prefix=apart, **s3.env)
        client = _warmed(s3, redis_server)
        before = int(client.info("memory")["used_memory"])
        done = _gamebatch(
            "solve",
            "-q",
            "-p",
            "strgame",
            "--broker",
            redis_server.url,
            url,
            "-o",
            f"s3://{BUCKET}/out/data.out",
            env=s3.env,
        )
        assert done.returncode == 0, done.stderr
        peak = int(client.info("memory")["used_memory_peak"])
    finally:
        pool.stop()
    assert s3.get("out/data.out") == _expected(text, reference).encode()
    assert peak - before < len(data) // 10, (peak - before, len(data))  # Redis held no input


@pytest.mark.integration
def test_a_bad_or_missing_object_is_one_line_and_leaves_no_result(s3: S3) -> None:
    good = s3.put("in/good.in", b"2\n1 1\nab\n1 2\nab\n")
    bad = s3.put("in/bad.in", b"3\n1 1\nab\n1 2\nab\n1 x\nab\n")
    out = f"s3://{BUCKET}/out/bad.out"
    done = _gamebatch("solve", "-q", "-p", "strgame", bad, "-o", out, env=s3.env)
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(f"gamebatch: error: {bad}:6: case 3:"), line
    assert s3.get("out/bad.out") is None and s3.unfinished_uploads() == []
    missing = _gamebatch("solve", "-q", "-p", "strgame", f"s3://{BUCKET}/nope.in", env=s3.env)
    assert missing.returncode == 2
    assert (
        missing.stderr.strip()
        == f"gamebatch: error: cannot read s3://{BUCKET}/nope.in: no such object"
    )
    odd = _gamebatch("solve", "-q", "-p", "strgame", "ftp://host/x.in", env=s3.env)
    assert odd.returncode == 2 and "unknown URL scheme ftp://" in odd.stderr
    # a result to a bucket that does not exist: the error names it, the answers are kept
    lost = _gamebatch(
        "solve", "-q", "-p", "strgame", good, "-o", "s3://no-such-bucket/x", env=s3.env
    )
    assert lost.returncode != 0 and "s3://no-such-bucket/x" in lost.stderr, lost.stderr
    assert "Traceback" not in lost.stderr
    done = _gamebatch(
        "solve", "-q", "-p", "strgame", good, "-o", f"s3://{BUCKET}/out/good.out", env=s3.env
    )
    assert done.returncode == 0, done.stderr
    assert s3.get("out/good.out") == _expected("2\n1 1\nab\n1 2\nab\n", None).encode()


@pytest.mark.integration
@pytest.mark.slow
def test_a_local_input_goes_through_the_payload_store_not_redis_and_leaves_nothing(
    s3: S3, redis_server: RedisServer, tmp_path: Path, reference: dict[str, Path] | None
) -> None:
    if not can_hide():
        pytest.skip("needs unshare and root for a mount namespace")
    problem = get_problem("strgame")
    text = input_text(problem, random_cases(problem, "random", 20_000, 200, seed=26))
    given = tmp_path / "producer" / "data.in"
    given.parent.mkdir()
    given.write_text(text)
    pool = Workers(redis_server.url, tmp_path.parent)
    try:
        pool.start(concurrency=2, prefix=hidden([tmp_path]), **s3.env)
        client = _warmed(s3, redis_server)
        before = int(client.info("memory")["used_memory"])
        # without the store these workers could not read the file: chunks would carry bytes
        # (Redis's peak then grows by about twice the input)
        env = {**s3.env, "GAMEBATCH_PAYLOAD_STORE": f"s3://{BUCKET}/spool/"}
        out = tmp_path / "producer" / "data.out"
        args = ("solve", "-q", "-p", "strgame", "--broker", redis_server.url, str(given))
        done = _gamebatch(*args, "-o", str(out), env=env)
        assert done.returncode == 0, done.stderr
        peak = int(client.info("memory")["used_memory_peak"])
        kept = s3.client.list_objects_v2(Bucket=BUCKET, Prefix="spool/").get("KeyCount")
    finally:
        pool.stop()
    assert out.read_text() == _expected(text, reference)
    assert peak - before < len(text) // 10, (peak - before, len(text))
    assert kept == 0 and s3.unfinished_uploads() == []  # the copy went with the job


@pytest.mark.integration
def test_an_http_upload_reaches_workers_that_share_nothing_through_the_payload_store(
    s3: S3,
    redis_server: RedisServer,
    tmp_path: Path,
    reference: dict[str, Path] | None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`serve` with a payload store: a whole upload's spooled input is copied to the store
    and its chunks name ranges of the copy, for workers that cannot see the server's spool;
    Redis holds none of its bytes, and the copy goes with the job."""
    if not can_hide():
        pytest.skip("needs unshare and root for a mount namespace")
    for name, value in s3.env.items():
        monkeypatch.setenv(name, value)  # the server's AWS settings
    problem = get_problem("strgame")
    text = input_text(problem, random_cases(problem, "random", 12_000, 200, seed=27))
    pool = Workers(redis_server.url, tmp_path.parent)
    serve = Server(tmp_path, redis_server.url, payload_store=f"s3://{BUCKET}/spool")
    try:
        pool.start(concurrency=2, prefix=hidden([tmp_path]), **s3.env)
        client = _warmed(s3, redis_server)
        before = int(client.info("stats")["total_net_input_bytes"])
        serve.start()
        with serve.client() as http:
            job = http.put("/v1/jobs?problem=strgame", content=text.encode()).json()["id"]
            ended = wait_until_ended(http, job)
            assert ended["state"] == "done", ended
            result = http.get(f"/v1/jobs/{job}/result").text
        received = int(client.info("stats")["total_net_input_bytes"]) - before
        copy = client.hget(keys.job(job), PAYLOAD_OBJECT)
        kept = s3.client.list_objects_v2(Bucket=BUCKET, Prefix="spool/").get("KeyCount")
    finally:
        serve.stop()
        pool.stop()
    assert result == _expected(text, reference)
    assert copy is not None and copy.startswith(f"s3://{BUCKET}/spool/inputs/".encode())
    # what Redis was sent in all (the server's and workers' commands): none of the input
    # (its memory peak is no measure here: the server's connections take more than chunks)
    assert received < len(text) // 10, (received, len(text))
    assert kept == 0 and s3.unfinished_uploads() == []


@pytest.mark.integration
def test_chunks_that_carry_bytes_keep_them_in_the_payload_store_not_redis(
    s3: S3,
    redis_server: RedisServer,
    tmp_path: Path,
    reference: dict[str, Path] | None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What cannot be a range of a copy (the Python reader's chunks with --keep-going, an
    upload read while it arrives) keeps each chunk's payload in an object of the job's
    folder: workers that share nothing with the producer get the cases, Redis gets their
    places, and the folder goes with the job."""
    if not can_hide():
        pytest.skip("needs unshare and root for a mount namespace")
    for name, value in s3.env.items():
        monkeypatch.setenv(name, value)  # the server's AWS settings
    problem = get_problem("strgame")
    text = input_text(problem, random_cases(problem, "random", 12_000, 200, seed=28))
    given = tmp_path / "producer" / "data.in"
    given.parent.mkdir()
    given.write_text(text)
    store_env = {**s3.env, "GAMEBATCH_PAYLOAD_STORE": f"s3://{BUCKET}/spool/"}
    pool = Workers(redis_server.url, tmp_path.parent)
    serve = Server(tmp_path, redis_server.url, payload_store=f"s3://{BUCKET}/spool")
    try:
        pool.start(concurrency=2, prefix=hidden([tmp_path]), **s3.env)
        client = _warmed(s3, redis_server)
        sent = [int(client.info("stats")["total_net_input_bytes"])]
        out = tmp_path / "producer" / "data.out"
        args = ("solve", "-q", "-p", "strgame", "--broker", redis_server.url, "--keep-going")
        done = _gamebatch(*args, str(given), "-o", str(out), env=store_env)
        assert done.returncode == 0, done.stderr
        sent.append(int(client.info("stats")["total_net_input_bytes"]))
        serve.start()
        data = text.replace("\n", " \n").encode()  # other bytes: a job of its own
        digest = "sha-256=:" + base64.b64encode(hashlib.sha256(data).digest()).decode() + ":"
        with serve.client() as http:
            blocks = (data[i : i + 65536] for i in range(0, len(data), 65536))
            headers = {"Content-Digest": digest, "Content-Length": str(len(data))}
            created = http.put("/v1/jobs?problem=strgame", content=blocks, headers=headers)
            assert created.status_code == 201, created.text
            ended = wait_until_ended(http, created.json()["id"])
            assert ended["state"] == "done", ended
            uploaded = http.get(f"/v1/jobs/{ended['id']}/result").text
        sent.append(int(client.info("stats")["total_net_input_bytes"]))
        folders = [client.hget(keys.job(j), PAYLOAD_OBJECT) for j in (ended["id"],)]
        kept = s3.client.list_objects_v2(Bucket=BUCKET, Prefix="spool/").get("KeyCount")
    finally:
        serve.stop()
        pool.stop()
    assert out.read_text() == uploaded == _expected(text, reference)
    # all that Redis was sent, by each run: commands and places, none of the input
    assert sent[1] - sent[0] < len(text) // 10, sent
    assert sent[2] - sent[1] < len(text) // 10, sent
    assert folders[0] is not None and folders[0].endswith(b"/")
    assert kept == 0 and s3.unfinished_uploads() == []


@pytest.mark.integration
def test_copies_no_kept_job_names_are_swept_from_the_payload_store(
    s3: S3, redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A producer killed between its copy and its job's end leaves the copy: a later
    producer's sweep deletes it once it is older than the grace, never a kept job's copy."""
    for name, value in s3.env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(objects, "_FILESYSTEMS", {})  # none made for another test's server
    store = JobStore.from_url(redis_server.url)
    ours = f"spool/inputs/{store.cluster_id()}"
    assert store.cluster_id() == ours.rsplit("/", 1)[1]  # made once, then kept
    named = s3.put(f"{ours}/a/kept.in", b"1\n")
    s3.put(f"{ours}/b/lost.in", b"2\n")
    s3.put("spool/inputs/another-cluster/c/theirs.in", b"3\n")  # not this cluster's to sweep
    store.open_job("strgame-" + "a" * 24, {"problem": "strgame", PAYLOAD_OBJECT: named})
    folder = f"s3://{BUCKET}/{ours}"
    assert sweep_payload_store(store, folder, time.time()) == 0  # all young
    later = time.time() + COPY_GRACE_SECONDS + 60
    assert sweep_payload_store(store, folder, later) == 1
    assert s3.get(f"{ours}/b/lost.in") is None and s3.get(f"{ours}/a/kept.in") == b"1\n"
    assert s3.get("spool/inputs/another-cluster/c/theirs.in") == b"3\n"
    assert store.claim_store_sweep(60) and not store.claim_store_sweep(60)  # one at a time
    store.close()
