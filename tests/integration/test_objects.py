"""Inputs and results by URL, on a real S3 API server on loopback (moto_server): workers that
share nothing with the producer but Redis and the object store solve an object exactly, Redis
never holds its bytes, and a result object appears whole or not at all."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
import redis

from pipeline.local.children import terminate
from pipeline.local.redis_server import RedisServer
from pipeline.registry import get_problem
from tests.conftest import Workers, run_reference
from tests.helpers import answers, command_env, input_text, random_cases

BUCKET = "gamebatch-test"


class S3:
    """moto's S3 API server on a free loopback port, and the environment that points the
    AWS libraries at it (dummy keys: it checks none)."""

    def __init__(self, log: Path) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        server = Path(sys.executable).with_name("moto_server")
        with log.open("ab") as out:
            self.process = subprocess.Popen(
                [str(server), "-H", "127.0.0.1", "-p", str(self.port)],
                stdout=out,
                stderr=out,
                start_new_session=True,
            )
        self.env = {
            "AWS_ENDPOINT_URL": f"http://127.0.0.1:{self.port}",
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing-secret",
            "AWS_DEFAULT_REGION": "us-east-1",
        }
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"moto_server did not start: {log.read_text()}") from None
                time.sleep(0.1)
        self.client = boto3.client(
            "s3",
            endpoint_url=self.env["AWS_ENDPOINT_URL"],
            aws_access_key_id="testing",
            aws_secret_access_key="testing-secret",
            region_name="us-east-1",
        )
        self.client.create_bucket(Bucket=BUCKET)

    def put(self, key: str, data: bytes) -> str:
        self.client.put_object(Bucket=BUCKET, Key=key, Body=data)
        return f"s3://{BUCKET}/{key}"

    def get(self, key: str) -> bytes | None:
        try:
            body: bytes = self.client.get_object(Bucket=BUCKET, Key=key)["Body"].read()
        except self.client.exceptions.NoSuchKey:
            return None
        return body

    def unfinished_uploads(self) -> list[object]:
        return list(self.client.list_multipart_uploads(Bucket=BUCKET).get("Uploads", []))

    def stop(self) -> None:
        terminate(self.process, 5)


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


def _hidden(folders: list[Path]) -> list[str]:
    """A command prefix: a mount namespace of its own where each folder is an empty tmpfs
    (what a host that shares nothing with the producer sees there)."""
    mounts = " && ".join(f"mount -t tmpfs none {str(f)!r}" for f in folders)
    return [
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        f'{mounts} && exec "$@"',
        "-",
    ]


@pytest.mark.integration
def test_workers_that_share_nothing_but_redis_and_the_store_solve_an_object_exactly(
    s3: S3, redis_server: RedisServer, tmp_path: Path, reference: dict[str, Path] | None
) -> None:
    if shutil.which("unshare") is None or os.geteuid() != 0:
        pytest.skip("needs unshare and root for a mount namespace")
    problem = get_problem("strgame")
    text = input_text(problem, random_cases(problem, "random", 40_000, 200, seed=25))
    data = text.encode()
    local = tmp_path / "producer"
    local.mkdir()
    (local / "data.in").write_bytes(data)  # the producer's copy, which workers cannot see
    url = s3.put("in/data.in", data)
    hidden = _hidden([tmp_path])
    seen = subprocess.run([*hidden, "test", "-e", str(local / "data.in")], check=False)
    assert seen.returncode == 1  # the namespace hides the producer's files
    pool = Workers(redis_server.url, tmp_path.parent)  # logs outside what the workers see
    try:
        pool.start(concurrency=2, prefix=hidden, **s3.env)
        client = redis.Redis.from_url(redis_server.url)
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
def test_a_local_input_goes_through_the_payload_store_not_redis_and_leaves_nothing(
    s3: S3, redis_server: RedisServer, tmp_path: Path, reference: dict[str, Path] | None
) -> None:
    if shutil.which("unshare") is None or os.geteuid() != 0:
        pytest.skip("needs unshare and root for a mount namespace")
    problem = get_problem("strgame")
    text = input_text(problem, random_cases(problem, "random", 20_000, 200, seed=26))
    given = tmp_path / "producer" / "data.in"
    given.parent.mkdir()
    given.write_text(text)
    pool = Workers(redis_server.url, tmp_path.parent)
    try:
        pool.start(concurrency=2, prefix=_hidden([tmp_path]), **s3.env)
        client = redis.Redis.from_url(redis_server.url)
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
