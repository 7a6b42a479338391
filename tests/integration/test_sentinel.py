"""Redis Sentinel: a primary, a replica and three sentinels on loopback; the primary is
killed in the middle of a job, and the job ends with the exact answers on the new primary."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from pipeline.config import load_settings, mask_url
from pipeline.jobstore import JobStore
from pipeline.local.children import terminate
from pipeline.local.redis_server import RedisServer, free_port, redis_server_binary
from pipeline.sentinel import SentinelUrl
from tests.helpers import command_env
from tests.integration.test_faults import FAULT_ENV, dataset

MASTER = "gamebatch"
# Faster than the defaults (30 s down-after, 3 min failover timeout) to keep the test short;
# with the defaults the stall is about 30 s longer.
DOWN_AFTER_MS = int(os.environ.get("SENTINEL_TEST_DOWN_AFTER_MS", "1000"))  # default: 30000
FAILOVER_TIMEOUT_MS = max(5000, 2 * DOWN_AFTER_MS)


class Sentinels:
    """A primary with a replica and three sentinels watching them."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.password, self.sentinel_password = secrets.token_hex(12), secrets.token_hex(12)
        self.primary = RedisServer(root / "primary", appendonly=True, password=self.password,
                                   extra=f"masterauth {self.password}\n")  # fmt: skip
        self.replica = RedisServer(root / "replica", appendonly=True, password=self.password)
        self.ports = [free_port() for _ in range(3)]
        self.processes: list[subprocess.Popen[bytes]] = []

    def start(self) -> Sentinels:
        self.primary.start()
        self.replica.extra = (f"replicaof 127.0.0.1 {self.primary.port}\n"
                              f"masterauth {self.password}\n")  # fmt: skip
        self.replica.start()
        for n, port in enumerate(self.ports):
            folder = self.root / f"sentinel-{n}"
            folder.mkdir()
            conf = folder / "sentinel.conf"
            conf.write_text(
                f"port {port}\nbind 127.0.0.1\ndir {folder}\nlogfile sentinel.log\n"
                f"requirepass {self.sentinel_password}\n"
                f"sentinel sentinel-pass {self.sentinel_password}\n"
                f"sentinel monitor {MASTER} 127.0.0.1 {self.primary.port} 2\n"
                f"sentinel auth-pass {MASTER} {self.password}\n"
                f"sentinel down-after-milliseconds {MASTER} {DOWN_AFTER_MS}\n"
                f"sentinel failover-timeout {MASTER} {FAILOVER_TIMEOUT_MS}\n"
            )
            conf.chmod(0o600)
            self.processes.append(subprocess.Popen(
                [redis_server_binary(), str(conf), "--sentinel"], stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, start_new_session=True,
            ))  # fmt: skip
        self._wait_until_they_see_each_other()
        return self

    def _wait_until_they_see_each_other(self) -> None:
        deadline = time.monotonic() + 60
        for port in self.ports:
            client = self.sentinel(port)
            while True:
                try:
                    replicas = client.execute_command("SENTINEL", "REPLICAS", MASTER)
                    others = client.execute_command("SENTINEL", "SENTINELS", MASTER)
                    if len(replicas) == 1 and len(others) == 2:
                        break
                except redis.RedisError:
                    pass
                assert time.monotonic() < deadline, f"sentinel {port} does not see the rest"
                time.sleep(0.1)

    def sentinel(self, port: int) -> redis.Redis:
        return redis.Redis(port=port, password=self.sentinel_password, socket_timeout=2)

    @property
    def url(self) -> str:
        hosts = ";".join(f"sentinel://{'' if n else f':{self.password}@'}127.0.0.1:{port}"
                         for n, port in enumerate(self.ports))  # fmt: skip
        return f"{hosts}/0"

    def env(self, **extra: str) -> dict[str, str]:
        return command_env(GAMEBATCH_BROKER_URL=self.url, GAMEBATCH_SENTINEL_MASTER=MASTER,
                           GAMEBATCH_SENTINEL_PASSWORD=self.sentinel_password, **extra)  # fmt: skip

    def stop(self) -> None:
        for process in self.processes:
            terminate(process, 5)
        self.replica.stop()
        self.primary.stop()


@pytest.fixture
def sentinels(tmp_path: Path) -> Iterator[Sentinels]:
    cluster = Sentinels(tmp_path / "cluster")
    try:
        yield cluster.start()
    finally:
        cluster.stop()


def test_settings_make_one_sentinel_url_and_mask_its_passwords(sentinels: Sentinels) -> None:
    settings = load_settings(broker_url=sentinels.url, sentinel_master=MASTER,
                             sentinel_password=sentinels.sentinel_password)  # fmt: skip
    assert settings.broker_url is not None
    found = SentinelUrl.parse(settings.broker_url)
    assert (found.master, found.password, len(found.hosts)) == (MASTER, sentinels.password, 3)
    shown = mask_url(settings.broker_url)
    assert sentinels.password not in shown and sentinels.sentinel_password not in shown
    store = JobStore.from_url(settings.broker_url)
    assert store.client.ping() and store.replicated
    store.client.set("gb:job:probe", "1")
    assert (
        redis.Redis(port=sentinels.primary.port, password=sentinels.password).get("gb:job:probe")
        == b"1"
    )  # it reached the primary the sentinels name
    store.close()


def test_a_job_survives_the_loss_of_its_primary(sentinels: Sentinels, tmp_path: Path) -> None:
    path, expected = dataset(tmp_path, cases=3000)
    env = sentinels.env(**FAULT_ENV)
    log = (tmp_path / "worker.log").open("wb")
    worker = subprocess.Popen(
        [sys.executable, "-m", "pipeline.cli", "worker", "--concurrency", "2"],
        env=env, stdout=log, stderr=log, start_new_session=True,
    )  # fmt: skip
    solve = subprocess.Popen(
        [sys.executable, "-m", "pipeline.cli", "solve", "-q", "-p", "strgame", str(path), "-o",
         str(tmp_path / "out")], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    url = (
        load_settings(
            broker_url=sentinels.url,
            sentinel_master=MASTER,
            sentinel_password=sentinels.sentinel_password,
        ).broker_url
        or ""
    )
    try:
        done_at_kill = _wait_for_cases(url, 600)
        assert sentinels.primary.process is not None
        os.kill(sentinels.primary.process.pid, signal.SIGKILL)  # its host is gone
        killed = time.monotonic()
        _wait_for_cases(url, done_at_kill + 1, timeout=120)
        stall = time.monotonic() - killed
        print(f"\nfailover stall: {stall:.1f} s (down-after {DOWN_AFTER_MS} ms)")
        _, err = solve.communicate(timeout=300)
        assert solve.returncode == 0, err
        assert (tmp_path / "out").read_text() == expected
        assert stall < DOWN_AFTER_MS / 1000 + 25  # detection, election, then the rest
        new = sentinels.sentinel(sentinels.ports[0]).execute_command(
            "SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER
        )
        assert int(new[1]) == sentinels.replica.port  # the replica was made primary
    finally:
        terminate(worker, 10)
        log.close()
        if solve.poll() is None:
            solve.kill()
            solve.wait()


def _wait_for_cases(url: str, cases: int, timeout: float = 60) -> int:
    """Cases answered of the only job, once at least `cases`, through whichever primary
    the sentinels name."""
    store = JobStore.from_url(url)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            try:
                jobs = store.jobs()
                progress = store.progress(jobs[0]) if jobs else None
                if progress and progress.done >= cases:
                    return progress.done
            except redis.RedisError:
                pass
            time.sleep(0.05)
    finally:
        store.close()
    raise AssertionError(f"fewer than {cases} cases answered")
