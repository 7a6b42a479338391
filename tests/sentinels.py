"""A Redis primary with two replicas and three sentinels on loopback, as the shipped Sentinel
configuration has them, for the tests and the soak."""

from __future__ import annotations

import os
import secrets
import subprocess
import time
from pathlib import Path

import redis

from pipeline.children import terminate
from pipeline.config import load_settings
from pipeline.local.redis_server import RedisServer, free_port, redis_server_binary
from tests.helpers import command_env

MASTER = "gamebatch"
# Faster than the defaults (30 s down-after, 3 min failover timeout) to keep the test short;
# with the defaults the stall is about 30 s longer. Not 1 s: a Redis that the suite's load
# (compilers, JVMs) keeps from answering for a second was failed over when nobody asked, and
# the failover soak then lost "done" writes acknowledged on the primary it left (issue 43).
DOWN_AFTER_MS = int(os.environ.get("SENTINEL_TEST_DOWN_AFTER_MS", "3000"))  # default: 30000
FAILOVER_TIMEOUT_MS = max(5000, 2 * DOWN_AFTER_MS)
# as the shipped configurations set them (docker-compose.sentinel.yml): a primary cut off
# from its replica for 10 s takes no more writes that it would lose once demoted
MIN_REPLICAS = "min-replicas-to-write 1\nmin-replicas-max-lag 10\n"


def sentinel_conf(
    folder: Path,
    bind: str,
    port: int,
    primary: tuple[str, int],
    passwords: tuple[str, str],
    timing_ms: tuple[int, int] = (DOWN_AFTER_MS, FAILOVER_TIMEOUT_MS),
) -> Path:
    """A sentinel's configuration file, in a new `folder`: it listens on `bind`:`port` and
    watches `primary`; `passwords` are the data Redis's and the sentinels' own, `timing_ms`
    its down-after and failover timeout."""
    folder.mkdir(parents=True)
    data, own = passwords
    conf = folder / "sentinel.conf"
    conf.write_text(
        f"port {port}\nbind {bind}\ndir {folder}\nlogfile sentinel.log\n"
        f"requirepass {own}\nsentinel sentinel-pass {own}\n"
        f"sentinel monitor {MASTER} {primary[0]} {primary[1]} 2\n"
        f"sentinel auth-pass {MASTER} {data}\n"
        f"sentinel down-after-milliseconds {MASTER} {timing_ms[0]}\n"
        f"sentinel failover-timeout {MASTER} {timing_ms[1]}\n"
    )
    conf.chmod(0o600)
    return conf


class Sentinels:
    """A primary with two replicas and three sentinels watching them; each Redis takes
    writes only while a replica keeps up (min-replicas), so a primary lost for good leaves
    its successor one replica to write through."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.password, self.sentinel_password = secrets.token_hex(12), secrets.token_hex(12)
        self.primary = RedisServer(
            root / "primary",
            appendonly=True,
            password=self.password,
            extra=f"masterauth {self.password}\n{MIN_REPLICAS}",
        )
        self.replicas = [
            RedisServer(root / f"replica-{n}", appendonly=True, password=self.password)
            for n in range(2)
        ]
        self.ports = [free_port() for _ in range(3)]
        self.processes: list[subprocess.Popen[bytes]] = []

    @property
    def servers(self) -> list[RedisServer]:
        return [self.primary, *self.replicas]

    def _follow(self, server: RedisServer, port: int) -> None:
        """Make `server` (not running) a replica of the Redis on `port` when it starts."""
        server.extra = f"replicaof 127.0.0.1 {port}\nmasterauth {self.password}\n{MIN_REPLICAS}"

    def start(self) -> Sentinels:
        self.primary.start()
        for replica in self.replicas:
            self._follow(replica, self.primary.port)
            replica.start()
        passwords = (self.password, self.sentinel_password)
        for n, port in enumerate(self.ports):
            where = self.root / f"sentinel-{n}"
            conf = sentinel_conf(
                where, "127.0.0.1", port, ("127.0.0.1", self.primary.port), passwords
            )
            self.processes.append(
                subprocess.Popen(
                    [redis_server_binary(), str(conf), "--sentinel"],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                )
            )
        self._wait_until_they_see_each_other()
        return self

    def _wait_until_they_see_each_other(self) -> None:
        deadline = time.monotonic() + 60
        for n, (port, process) in enumerate(zip(self.ports, self.processes, strict=True)):
            client = self.sentinel(port)
            while True:
                log = self.root / f"sentinel-{n}" / "sentinel.log"
                assert process.poll() is None, f"sentinel {port} exited: {log.read_text()[-2000:]}"
                try:
                    replicas = client.execute_command("SENTINEL", "REPLICAS", MASTER)
                    others = client.execute_command("SENTINEL", "SENTINELS", MASTER)
                    if len(replicas) == len(self.replicas) and len(others) == 2:
                        break
                except redis.RedisError:
                    pass
                assert time.monotonic() < deadline, f"sentinel {port} does not see the rest"
                time.sleep(0.1)

    def sentinel(self, port: int) -> redis.Redis:
        return redis.Redis(port=port, password=self.sentinel_password, socket_timeout=2)

    @property
    def url(self) -> str:
        hosts = ";".join(
            f"sentinel://{'' if n else f':{self.password}@'}127.0.0.1:{port}"
            for n, port in enumerate(self.ports)
        )
        return f"{hosts}/0"

    def env(self, **extra: str) -> dict[str, str]:
        return command_env(
            GAMEBATCH_BROKER_URL=self.url,
            GAMEBATCH_SENTINEL_MASTER=MASTER,
            GAMEBATCH_SENTINEL_PASSWORD=self.sentinel_password,
            **extra,
        )

    def stop(self) -> None:
        for process in self.processes:
            terminate(process, 5)
        for server in self.servers:
            server.stop()

    def failover_log(self) -> str:
        """What each sentinel logged of the primary's loss and its replacement."""
        marks = ("sdown", "odown", "failover", "elected", "promoted", "switch-master", "vote")
        found = []
        for n in range(len(self.ports)):
            log = self.root / f"sentinel-{n}" / "sentinel.log"
            lines = log.read_text(errors="replace").splitlines() if log.exists() else []
            found += [f"sentinel {n}: {line}" for line in lines if any(m in line for m in marks)]
        return "\n".join(found[-60:])

    def settings_url(self) -> str:
        """The broker URL with the sentinel settings in it (what every process uses)."""
        url = load_settings(
            broker_url=self.url, sentinel_master=MASTER, sentinel_password=self.sentinel_password
        ).broker_url
        return url or ""

    def primary_port(self) -> int:
        """The port of the Redis the sentinels name primary now."""
        for port in self.ports:
            try:
                found = self.sentinel(port).execute_command(
                    "SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER
                )
                return int(found[1])
            except redis.RedisError:
                continue
        raise AssertionError("no sentinel answers")

    def named_primary(self) -> RedisServer:
        """The Redis the sentinels name primary now."""
        port = self.primary_port()
        return next(server for server in self.servers if server.port == port)

    def fail_over(self) -> float:
        """Kill the primary, wait until the sentinels promote a replica, and bring the old
        one back as the new primary's replica; the seconds until the promotion."""
        old = self.named_primary()
        assert old.process is not None
        killed = time.monotonic()
        os.kill(old.process.pid, 9)
        old.process.wait()
        old.process = None
        deadline = killed + 120
        while (port := self.primary_port()) == old.port:
            assert time.monotonic() < deadline, "no failover"
            time.sleep(0.1)
        took = time.monotonic() - killed
        self._follow(old, port)
        old.start()
        return took
