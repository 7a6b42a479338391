"""Worker hosts on one machine: network namespaces joined by a bridge, Redis on its own host."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline.children import terminate
from pipeline.games.registry import get_problem
from pipeline.local.redis_server import redis_server_binary
from tests.helpers import answers, command_env, input_text, random_cases

pytestmark = pytest.mark.integration
SUBNET = "10.231.77"  # only ever assigned inside the namespaces this test creates


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


class Hosts:
    """Namespaces `redis`, `cli`, `w1`, `w2`, each with one veth into a bridge namespace."""

    def __init__(self) -> None:
        self.tag = secrets.token_hex(2)
        self.switch = f"gbsw{self.tag}"
        self.names: dict[str, str] = {}
        self.addresses: dict[str, str] = {}
        self.processes: list[subprocess.Popen[bytes]] = []

    def create(self) -> None:
        ip("netns", "add", self.switch)
        ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        ip("-n", self.switch, "link", "set", "br0", "up")
        for number, host in enumerate(("redis", "cli", "w1", "w2"), 1):
            ns = f"gb{host}{self.tag}"
            inside, outside = f"gb{host}", f"gb{host}{self.tag}"[:15]
            ip("netns", "add", ns)
            self.names[host] = ns
            ip(
                "link",
                "add",
                inside,
                "netns",
                ns,
                "type",
                "veth",
                "peer",
                "name",
                outside,
                "netns",
                self.switch,
            )
            ip("-n", self.switch, "link", "set", outside, "master", "br0", "up")
            self.addresses[host] = f"{SUBNET}.{number}"
            ip("-n", ns, "addr", "add", f"{self.addresses[host]}/24", "dev", inside)
            ip("-n", ns, "link", "set", inside, "up")
            ip("-n", ns, "link", "set", "lo", "up")

    def cut(self, host: str) -> None:
        """Pull the host's cable."""
        ip("-n", self.names[host], "link", "set", f"gb{host}", "down")

    def run(self, host: str, command: list[str], log: Path, **env: str) -> subprocess.Popen[bytes]:
        with log.open("ab") as out:
            process = subprocess.Popen(
                ["ip", "netns", "exec", self.names[host], *command],
                stdout=out,
                stderr=out,
                env=command_env(**env),
                start_new_session=True,
            )
        self.processes.append(process)
        return process

    def destroy(self) -> None:
        for process in self.processes:
            terminate(process, 3)
        for ns in [*self.names.values(), self.switch]:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)


@pytest.fixture
def hosts() -> Iterator[Hosts]:
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("network namespaces need root and iproute2")
    probe = subprocess.run(["ip", "netns", "add", "gbprobe"], capture_output=True, check=False)
    if probe.returncode != 0:
        pytest.skip(f"network namespaces are not permitted here: {probe.stderr.decode().strip()}")
    subprocess.run(["ip", "netns", "del", "gbprobe"], capture_output=True, check=False)
    made = Hosts()
    try:
        made.create()
        yield made
    finally:
        made.destroy()
    left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True)
    assert made.tag not in left.stdout


def test_a_job_spreads_over_worker_hosts_and_survives_losing_one(
    tmp_path: Path, hosts: Hosts
) -> None:
    problem = get_problem("strgame")
    path = tmp_path / "data.in"
    path.write_text(input_text(problem, random_cases(problem, "random", 3000, 200, seed=8)))
    password = secrets.token_urlsafe(16)
    (tmp_path / "redis.conf").write_text(
        f'bind {hosts.addresses["redis"]}\nport 6379\nrequirepass {password}\nsave ""\n'
        f"dir {tmp_path}\nprotected-mode yes\n"
    )
    hosts.run("redis", [redis_server_binary(), str(tmp_path / "redis.conf")], tmp_path / "r.log")
    url = f"redis://:{password}@{hosts.addresses['redis']}:6379/0"
    fast = {
        "GAMEBATCH_LEASE_SECONDS": "2",
        "GAMEBATCH_STALL_SECONDS": "3",
        "GAMEBATCH_CHUNK__MAX_CASES": "1",
    }
    worker = [sys.executable, "-m", "pipeline.cli", "worker", "--broker", url, "--concurrency", "1"]
    logs = {host: tmp_path / f"{host}.log" for host in ("w1", "w2")}
    for host, log in logs.items():
        hosts.run(host, worker, log, **fast)
    deadline = time.monotonic() + 60
    while not all(b"ready." in log.read_bytes() for log in logs.values()):
        assert time.monotonic() < deadline, "workers did not start"
        time.sleep(0.1)
    out = tmp_path / "out"
    solve = hosts.run(
        "cli",
        [
            sys.executable,
            "-m",
            "pipeline.cli",
            "solve",
            "-q",
            "-p",
            "strgame",
            str(path),
            "-o",
            str(out),
            "--broker",
            url,
        ],
        tmp_path / "cli.log",
        **fast,
    )
    while logs["w1"].read_bytes().count(b"succeeded") < 200:
        assert time.monotonic() < deadline + 60 and solve.poll() is None, "no progress on w1"
        time.sleep(0.05)
    hosts.cut("w1")  # a machine drops off the network in the middle of the job
    solve.wait(timeout=240)
    assert solve.returncode == 0, (tmp_path / "cli.log").read_text()[-2000:]
    assert out.read_text() == answers(problem, path.read_text())
    shares = {host: log.read_bytes().count(b"succeeded") for host, log in logs.items()}
    # both hosts solved, and between them every chunk: only the one chunk w1 was running when
    # it was cut may have stored its answers without w1 logging it (w2 then rightly skips it)
    assert shares["w1"] >= 200 and shares["w2"] > 0, shares
    assert shares["w1"] + shares["w2"] >= 3000 - 1, shares
