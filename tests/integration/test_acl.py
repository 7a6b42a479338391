"""configs/redis-acl.conf: a whole job runs with the worker and client users, and each role
is refused what it does not need (admin commands, other programs' keys, others' roles)."""

from __future__ import annotations

import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from pipeline.children import terminate
from pipeline.games.registry import get_problem
from pipeline.local.redis_server import RedisServer
from pipeline.store import keys
from pipeline.store.jobstore import JobStore
from tests.conftest import ROOT, run_reference
from tests.helpers import command_env, input_text, random_cases
from tests.integration.server import Server

ROLES = ("admin", "worker", "client")


class AclRedis:
    """A Redis whose users come from the ACL file, with passwords of this test."""

    def __init__(self, root: Path) -> None:
        self.passwords = {role: secrets.token_hex(16) for role in ROLES}
        text = (ROOT / "configs" / "redis-acl.conf").read_text()
        for role, password in self.passwords.items():
            text = text.replace(f">CHANGE-ME-{role}", f">{password}")
        assert not [
            line for line in text.splitlines() if "CHANGE-ME" in line and not line.startswith("#")
        ]
        acl = root / "users.acl"
        acl.write_text(text)
        self.server = RedisServer(root / "redis", password=self.passwords["admin"], acl_file=acl)
        self.clients: list[redis.Redis] = []  # closed with the server

    def url(self, role: str) -> str:
        return f"redis://{role}:{self.passwords[role]}@127.0.0.1:{self.server.port}/0"

    def client(self, role: str) -> redis.Redis:
        made = redis.Redis.from_url(self.url(role))
        self.clients.append(made)
        return made


@pytest.fixture
def acl_redis(tmp_path: Path) -> Iterator[AclRedis]:
    made = AclRedis(tmp_path)
    with made.server:
        yield made
        for client in made.clients:
            client.close()


def _gamebatch(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pipeline.cli", *args, "--broker", url],
        capture_output=True,
        text=True,
        env=command_env(GAMEBATCH_CHUNK__MAX_CASES="7"),
        timeout=180,
        check=False,
    )


def test_a_whole_job_runs_with_the_role_users(
    acl_redis: AclRedis, tmp_path: Path, reference: dict[str, Path]
) -> None:
    problem = get_problem("strgame")
    text = input_text(problem, random_cases(problem, "random", 60, 20, seed=8))
    (tmp_path / "a.in").write_text(text)
    (tmp_path / "b.in").write_text(text + "\n")
    log = (tmp_path / "worker.log").open("wb")
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pipeline.cli",
            "worker",
            "--broker",
            acl_redis.url("worker"),
            "--concurrency",
            "2",
        ],
        stdout=log,
        stderr=log,
        env=command_env(),
        start_new_session=True,
    )
    client = acl_redis.url("client")
    try:
        solved = _gamebatch(client, "solve", "-q", "-p", "strgame", str(tmp_path / "a.in"))
        assert (solved.returncode, solved.stdout) == (0, run_reference(reference["strgame"], text))
        submitted = _gamebatch(client, "submit", "-p", "strgame", str(tmp_path / "b.in"))
        job = submitted.stdout.split()[-1]
        collected = _gamebatch(client, "collect", job, "-o", str(tmp_path / "b.out"))
        assert collected.returncode == 0, collected.stderr
        assert (tmp_path / "b.out").read_text() == solved.stdout
        listed = _gamebatch(client, "status")
        assert listed.returncode == 0 and job in listed.stdout, listed.stderr
        assert "worker" in listed.stdout  # the live workers answered the ping
        assert JobStore(acl_redis.client("client")).capacity(60) == 2  # it said it lives
        (tmp_path / "c.in").write_text(text + "\n\n")
        other = _gamebatch(client, "submit", "-p", "strgame", str(tmp_path / "c.in"))
        cancelled = _gamebatch(client, "cancel", other.stdout.split()[-1])
        assert cancelled.returncode == 0, cancelled.stderr
        tests, subs = tmp_path / "tests", tmp_path / "subs" / "alice"
        tests.mkdir()
        subs.mkdir(parents=True)
        (tests / "t.in").write_text(text)
        (subs / "t.out").write_text(solved.stdout)
        graded = _gamebatch(
            client,
            "grade",
            "-q",
            "-p",
            "strgame",
            "--tests",
            str(tests),
            "--submissions",
            str(tmp_path / "subs"),
        )
        assert graded.returncode == 0, graded.stderr
        serve = Server(tmp_path, client).start()  # the HTTP service is a client too
        try:
            (tmp_path / "d.in").write_text(text + "\n\n\n")
            remote = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pipeline.cli",
                    "solve",
                    "-q",
                    "-p",
                    "strgame",
                    str(tmp_path / "d.in"),
                    "--server",
                    serve.url,
                    "--token-file",
                    str(serve.dir / "token"),
                ],
                capture_output=True,
                text=True,
                env=command_env(),
                timeout=180,
                check=False,
            )
            assert (remote.returncode, remote.stdout) == (0, solved.stdout), remote.stderr
        finally:
            serve.stop()
    finally:
        terminate(worker, 10)
        log.close()
    admin = acl_redis.client("admin")
    denied = [e for e in admin.execute_command("ACL", "LOG") if not _setinfo(admin, e)]
    assert denied == [], f"refused while the job ran: {denied}"


def test_the_worker_may_sweep_and_keep_verdicts(acl_redis: AclRedis) -> None:
    """What a worker does now and then (a sweep round, saying it lives) or only for judged
    programs, which a short job may never reach: the whole-job test above cannot be relied
    on for these."""
    store = JobStore(acl_redis.client("worker"))
    acl_redis.client("client").hset(keys.job("strgame-x"), "state", "running")
    for _ in range(2):
        assert store.sweep_candidates(further=1) is not None
    store.note_swept(["strgame-x"], [])
    store.note_swept([], ["strgame-x"])
    store.keep_verdicts("prog", {"case": "AC"}, 60)
    assert store.kept_verdicts("prog", ["case", "other"]) == [b"AC", None]
    store.note_judged("strgame-x", "prog", failed=False, run=1, kept=1)
    store.note_capacity("w1@host", 3, keep=60)
    assert JobStore(acl_redis.client("client")).capacity(60) == 3
    for role in ("worker", "client"):  # behind Sentinel: answers wait for a replica (none here)
        replicated = JobStore(acl_redis.client(role), replicated=True)
        assert replicated._wait_for_a_replica() is False
    admin = acl_redis.client("admin")
    assert admin.hget(keys.job("strgame-x"), "cases_run") == b"1"
    denied = [e for e in admin.execute_command("ACL", "LOG") if not _setinfo(admin, e)]
    assert denied == [], denied


def _setinfo(admin: redis.Redis, entry: dict[bytes, object]) -> bool:
    """redis-py's CLIENT SETINFO on connecting, which a Redis before 7.2 does not know (so
    no ACL can allow it; the client ignores the error)."""
    version = tuple(int(p) for p in str(admin.info("server")["redis_version"]).split(".")[:2])
    return entry[b"object"] == b"client" and version < (7, 2)


FORBIDDEN = [
    ("FLUSHALL",),
    ("FLUSHDB",),
    ("CONFIG", "GET", "*"),
    ("KEYS", "*"),
    ("DEBUG", "SLEEP", "0"),
    ("SHUTDOWN",),
    ("MONITOR",),
    ("ACL", "LIST"),
    ("CLIENT", "KILL", "TYPE", "normal"),
    ("SET", "someone-else:key", "1"),
    ("GET", "someone-else:key"),
    ("DEL", "someone-else:key"),
    ("EVAL", "return redis.call('SET', 'someone-else:key', '1')", "0"),
    ("SCRIPT", "FLUSH"),
    ("SWAPDB", "0", "1"),
    ("REPLICAOF", "127.0.0.1", "1"),
]


@pytest.mark.parametrize("role", ["worker", "client"])
def test_each_role_is_refused_what_it_does_not_need(acl_redis: AclRedis, role: str) -> None:
    admin, user = acl_redis.client("admin"), acl_redis.client(role)
    admin.set("someone-else:key", "theirs")
    for command in FORBIDDEN:
        with pytest.raises(redis.exceptions.ResponseError) as refused:
            user.execute_command(*command)
        message = str(refused.value)  # a script's refused command comes back as its error
        assert "no permissions" in message or "can't access" in message, (command, message)
    assert admin.get("someone-else:key") == b"theirs"
    assert admin.dbsize() == 1
    # the worker reads no verdicts, report bodies or HTTP records; the client may
    for key in ("gb:verdicts:x", "gb:bodies:x", "gb:api:job:x"):
        if role == "worker":
            with pytest.raises(redis.exceptions.NoPermissionError):
                user.get(key)
        else:
            assert user.get(key) is None
    assert user.set("gb:job:x", "1") and user.delete("gb:job:x") == 1


def test_only_admin_may_flush(acl_redis: AclRedis) -> None:
    admin = acl_redis.client("admin")
    admin.set("gb:job:x", "1")
    assert admin.flushall() and admin.dbsize() == 0
    assert acl_redis.client("worker").ping()
    with pytest.raises(redis.exceptions.AuthenticationError):
        redis.Redis.from_url(
            f"redis://:{acl_redis.passwords['admin']}@127.0.0.1:{acl_redis.server.port}/0"
        ).ping()
