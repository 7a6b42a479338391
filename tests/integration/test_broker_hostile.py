"""A broker that carries poison: malformed messages and tasks, bad job ids, URLs and passwords."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis

from pipeline.config import load_settings
from pipeline.data import producer
from pipeline.data.messages import BadTask, task_args
from pipeline.games.registry import get_problem
from pipeline.local.redis_server import RedisServer
from pipeline.store.jobstore import JobStore
from tests.conftest import Workers
from tests.helpers import answers, command_env
from tests.integration.test_pipeline import gamebatch
from workers.runner import Outcome, run_chunk

pytestmark = pytest.mark.integration

QUEUE = "gamebatch.bulk"
NO_SUCH_JOB = "strgame-" + "0" * 24


def _envelope(body: str, args: object = None, encoding: str = "base64") -> str:
    """A message as kombu's Redis transport stores it."""
    headers = {"task": "gamebatch.solve_chunk", "id": "poison", "lang": "py"}
    if args is not None:
        headers["argsrepr"] = repr(args)
    return json.dumps(
        {
            "body": body,
            "content-encoding": "utf-8",
            "content-type": "application/json",
            "headers": headers,
            "properties": {
                "body_encoding": encoding,
                "delivery_tag": "poison-tag",
                "delivery_info": {"exchange": "", "routing_key": QUEUE},
                "priority": 0,
            },
        }
    )


def _task(args: list[object]) -> str:
    body = json.dumps([args, {}, {"callbacks": None, "errbacks": None, "chain": None}])
    return _envelope(base64.b64encode(body.encode()).decode(), args)


POISON = [
    "this is not JSON",
    "[1, 2, 3]",  # JSON, but not an envelope
    _envelope("!!!not base64"),
    _envelope(base64.b64encode(b"not json either").decode()),
]
BAD_TASKS = [
    ["../../etc", 0],
    [NO_SUCH_JOB, 10**30],
    [NO_SUCH_JOB, -1],
    [NO_SUCH_JOB, 0.5],
    [NO_SUCH_JOB, "0"],
    [None, 0],
]
ARITY = [[NO_SUCH_JOB, 0, 1], [NO_SUCH_JOB]]  # not the two arguments a producer sends


def test_poison_messages_are_dropped_and_the_worker_goes_on(
    tmp_path: Path, redis_server: RedisServer, workers: Workers
) -> None:
    client = redis.Redis.from_url(redis_server.url)
    worker = workers.start(concurrency=1)
    for message in POISON + [_task(args) for args in BAD_TASKS + ARITY]:
        client.lpush(QUEUE, message)
    client.close()
    path = tmp_path / "x.in"
    path.write_text("3\n1 1\na\n1 2\na\n2 1\nab\nb\n")
    solved = gamebatch("solve", "-p", "strgame", str(path), "--broker", redis_server.url, "-q")
    assert solved.returncode == 0, solved.stderr
    assert solved.stdout == answers(get_problem("strgame"), path.read_text())
    log = (tmp_path / "worker-0.log").read_text()
    deadline = time.monotonic() + 10
    rejected = len(BAD_TASKS) + len(ARITY)
    while log.count("rejected a chunk task") < rejected and time.monotonic() < deadline:
        time.sleep(0.1)
        log = (tmp_path / "worker-0.log").read_text()
    assert worker.poll() is None
    assert "Unrecoverable" not in log and "starting it again" not in log
    assert log.count("dropped a malformed message") >= 3, log[-3000:]  # the envelope errors
    assert log.count("rejected a chunk task") == rejected, log[-3000:]
    assert "'../../etc' is not a job id" in log and "0.5 is not a chunk index" in log


def test_task_arguments_are_checked() -> None:
    assert task_args(NO_SUCH_JOB + "-keep-going", 3) == (NO_SUCH_JOB + "-keep-going", 3)
    for args in [*BAD_TASKS, [NO_SUCH_JOB, True], ["gb:*", 0], [NO_SUCH_JOB + ":in:0", 0]]:
        with pytest.raises(BadTask):
            task_args(*args)


def test_a_malformed_payload_fails_its_chunk_with_one_reason(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    path = tmp_path / "x.in"
    path.write_text("1\n1 1\na\n")
    store = JobStore.from_url(redis_server.url)
    settings = load_settings(broker_url=redis_server.url)
    job = producer.submit(get_problem("strgame"), path, store, lambda j, i: None, settings)
    store.put_chunk(job.job_id, 0, b"{not json")
    assert run_chunk(store, job.job_id, 0) == Outcome.FAILED
    assert run_chunk(store, NO_SUCH_JOB, 0) == Outcome.GONE
    status = gamebatch("status", job.job_id, "--broker", redis_server.url)
    lines = status.stdout.splitlines()
    assert lines[1].startswith("    chunk 0: malformed chunk payload: "), status.stdout
    store.client.close()


@pytest.mark.parametrize("command", [["status"], ["cancel"], ["collect", "-o", "r.out"]])
def test_job_ids_that_are_malformed_or_unknown_exit_2(
    redis_server: RedisServer, command: list[str]
) -> None:
    name, *rest = command
    for job, words in (("../../etc", "is not a job id"), (NO_SUCH_JOB, "does not exist")):
        result = gamebatch(name, job, *rest, "--broker", redis_server.url)
        assert result.returncode == 2, result.stderr
        assert result.stderr.count("\n") == 1 and words in result.stderr, result.stderr


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("http://127.0.0.1:80/0", "broker URL must start with redis://"),
        ("redis://127.0.0.1:99999/0", "port must be a number from 1 to 65535"),
        ("redis://:secret@127.0.0.1:port/0", "port must be a number"),
        ("redis:///0", "broker URL has no host"),
    ],
)
def test_bad_broker_urls_exit_2_with_one_line(url: str, words: str) -> None:
    for command in (["status"], ["worker"], ["solve", "-p", "strgame", "x.in"]):
        result = gamebatch(*command, "--broker", url)
        assert result.returncode == 2, result.stderr
        assert result.stderr == f"gamebatch: error: --broker: {result.stderr.split(': ', 3)[3]}"
        assert words in result.stderr and "secret" not in result.stderr


def test_a_worker_with_a_wrong_password_says_so_at_once(redis_server: RedisServer) -> None:
    wrong = redis_server.url.replace(redis_server.password, "wrong-password")
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "worker", "--broker", wrong],
        capture_output=True,
        text=True,
        env=command_env(),
        timeout=60,
        check=False,
    )
    assert time.monotonic() - started < 10
    assert result.returncode == 2
    assert result.stderr.startswith("gamebatch: error: Redis at redis://:***@127.0.0.1:")
    assert "refused the credentials" in result.stderr and "wrong-password" not in result.stderr
