"""The partition bench: a Redis primary, its replica, three sentinels, a worker host and two
client hosts, each in a network namespace of its own (net.py). Clients solve, grade output
files and judge a program, one file after another, while one fault is injected and healed;
then, once the leases have lapsed, every acknowledged operation is checked: a solve's result
file is exact and its job still done on whichever Redis the sentinels name primary, a
grading's report has the exact verdicts, and no job is left open unfinished.
`python -m tests.partition.bench --runs 20` runs the long mode and prints the table of
docs/operations.md."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import secrets
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import redis

from pipeline.games import toolkit
from pipeline.games.registry import get_problem
from pipeline.local.redis_server import redis_server_binary
from pipeline.store import keys
from pipeline.store.jobstate import JobState
from tests.partition.net import Host, Net
from tests.sentinels import MIN_REPLICAS, sentinel_conf

MASTER = "gamebatch"
PORT, SENTINEL_PORT = 6379, 26379
DOWN_AFTER_MS, FAILOVER_TIMEOUT_MS = 2000, 6000
FAULTS = ("partition", "pause", "lagging replica", "two failovers")
CLIENT_ENV = {
    "GAMEBATCH_LEASE_SECONDS": "3",
    "GAMEBATCH_STALL_SECONDS": "4",
    "GAMEBATCH_CHUNK__TARGET_WORK": "20000",
    "GAMEBATCH_WARM_SECONDS": "0",
    "GAMEBATCH_FAILOVER_SECONDS": "60",
    "GAMEBATCH_DEBUG": "1",  # a solve that fails leaves its traceback in its log
}
SOLVE_SECONDS = 120  # an operation still running this long after the faults healed is stuck
KINDS = ("solve", "grade", "judge")  # each client's operations, in turn
JUDGED = "import sys\nprint('\\n'.join(['Pure'] * int(sys.stdin.readline())))\n"


@dataclass
class Operation:
    """One client's operation on one input file (`kind`): `gamebatch solve`, whose result is
    `expected`; or `grade` of a submission with some answers turned, or `grade --programs`
    of a program that answers Pure to every case, whose report's verdicts are `expected`."""

    client: str
    path: Path
    expected: str
    job_id: str
    process: subprocess.Popen[bytes]
    started: float
    kind: str = "solve"
    ended: float | None = None

    @property
    def out(self) -> Path:
        """What the operation writes: a result file, or a JSON report."""
        return self.path.with_suffix(".out" if self.kind == "solve" else ".json")

    def exact(self) -> bool:
        """Whether what it wrote is what it should be."""
        if self.kind == "solve":
            return self.out.read_text() == self.expected
        with contextlib.suppress(ValueError, KeyError, IndexError):
            return bool(
                json.loads(self.out.read_text())["submissions"][0]["verdicts"] == self.expected
            )
        return False


@dataclass
class Tally:
    """One fault's runs: operations acknowledged, and those lost, wrong or stuck."""

    runs: int = 0
    acknowledged: int = 0
    kinds: Counter[str] = field(default_factory=Counter)  # acknowledged, by kind
    failed: int = 0  # operations that ended with an error (not acknowledged: allowed)
    lost: int = 0  # acknowledged solves, then not done (or gone) on the primary
    wrong: int = 0  # a result file that is not the right answers, a report not the verdicts
    stuck: int = 0  # operations never ended, jobs left open unfinished
    seconds: list[float] = field(default_factory=list)
    longest: float = 0.0  # from the fault's start until an operation begun before it ended
    notes: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return self.lost == self.wrong == self.stuck == 0


class Cluster:
    """The processes of one run on the hosts of `net`."""

    def __init__(self, root: Path, net: Net) -> None:
        self.root, self.net = root, net
        self.password, self.sentinel_password = secrets.token_hex(12), secrets.token_hex(12)
        self.redis: dict[str, subprocess.Popen[bytes]] = {}
        self.spawned: list[subprocess.Popen[bytes]] = []  # every process, for stop()

    # --- processes -------------------------------------------------------------------------

    def _spawn(self, host: Host, args: list[str], log: Path, **env: str) -> subprocess.Popen[bytes]:
        with log.open("ab") as out:
            process = subprocess.Popen(
                host.command(args),
                stdout=out,
                stderr=out,
                env={**os.environ, **env},
                start_new_session=True,
            )
        self.spawned.append(process)
        return process

    def start(self) -> None:
        primary = self.net.hosts["primary"]
        for name in ("primary", "replica"):
            host = self.net.hosts[name]
            folder = self.root / name
            folder.mkdir(parents=True)
            follow = f"replicaof {primary.ip} {PORT}\n" if name == "replica" else ""
            conf = folder / "redis.conf"
            conf.write_text(
                f"bind {host.ip}\nport {PORT}\ndir {folder}\nappendonly yes\nsave ''\n"
                f"requirepass {self.password}\nmasterauth {self.password}\n{MIN_REPLICAS}{follow}"
            )
            self.redis[name] = self._spawn(host, [redis_server_binary(), str(conf)], folder / "log")
        passwords = (self.password, self.sentinel_password)
        timing = (DOWN_AFTER_MS, FAILOVER_TIMEOUT_MS)
        for n in range(3):
            host, folder = self.net.hosts[f"sentinel{n}"], self.root / f"sentinel{n}"
            watched = (primary.ip, PORT)
            conf = sentinel_conf(folder, host.ip, SENTINEL_PORT, watched, passwords, timing)
            args = [redis_server_binary(), str(conf), "--sentinel"]
            self._spawn(host, args, folder / "log")
        self._wait_until_watched()
        worker = [sys.executable, "-m", "pipeline.cli", "worker", "--concurrency", "2"]
        self._spawn(self.net.hosts["worker"], worker, self.root / "worker.log", **self.env())
        deadline = time.monotonic() + 60
        store = self.store()
        while not store.zcard(keys.CAPACITY):  # the worker says it lives
            assert time.monotonic() < deadline, "the worker never started"
            time.sleep(0.1)
        store.close()

    def _wait_until_watched(self) -> None:
        deadline = time.monotonic() + 60
        for n in range(3):
            asked = self.sentinel(n)
            while True:
                with contextlib.suppress(redis.RedisError):
                    replicas = asked.execute_command("SENTINEL", "REPLICAS", MASTER)
                    others = asked.execute_command("SENTINEL", "SENTINELS", MASTER)
                    if len(replicas) == 1 and len(others) == 2:
                        break
                assert time.monotonic() < deadline, f"sentinel {n} does not see the rest"
                time.sleep(0.1)

    def sentinel(self, n: int) -> redis.Redis:
        host = self.net.hosts[f"sentinel{n}"]
        return redis.Redis(
            host.ip, SENTINEL_PORT, password=self.sentinel_password, socket_timeout=2
        )

    def env(self) -> dict[str, str]:
        hosts = ";".join(
            f"sentinel://{'' if n else f':{self.password}@'}{self.net.hosts[f'sentinel{n}'].ip}"
            f":{SENTINEL_PORT}"
            for n in range(3)
        )
        return {
            **CLIENT_ENV,
            "GAMEBATCH_BROKER_URL": f"{hosts}/0",
            "GAMEBATCH_SENTINEL_MASTER": MASTER,
            "GAMEBATCH_SENTINEL_PASSWORD": self.sentinel_password,
        }

    def primary(self) -> str:
        """The host the sentinels (a majority that answers) name primary now."""
        named: list[str] = []
        for n in range(3):
            with contextlib.suppress(redis.RedisError):
                ip = self.sentinel(n).execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER)
                named.append(ip[0].decode())
        for name in ("primary", "replica"):
            if named.count(self.net.hosts[name].ip) >= 2:
                return name
        raise AssertionError(f"no majority of sentinels names a primary: {named}")

    def store(self) -> redis.Redis:
        """A client of the Redis the sentinels name primary (from this namespace)."""
        host = self.net.hosts[self.primary()]
        return redis.Redis(host.ip, PORT, password=self.password, socket_timeout=5)

    def pause(self, name: str) -> None:
        os.kill(self.redis[name].pid, signal.SIGSTOP)

    def resume(self, name: str) -> None:
        os.kill(self.redis[name].pid, signal.SIGCONT)

    def wait_for_primary(self, name: str, timeout: float = 60) -> float:
        """Seconds until the sentinels name `name` primary."""
        start = time.monotonic()
        while True:
            with contextlib.suppress(AssertionError):
                if self.primary() == name:
                    return time.monotonic() - start
            assert time.monotonic() - start < timeout, f"{name} was never made primary"
            time.sleep(0.1)

    def stop(self) -> None:
        """Every process this run started (the clients' too, when the run was cut short)."""
        for process in self.spawned:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGCONT)
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()


# --- faults ----------------------------------------------------------------------------------


def _partition(c: Cluster) -> None:
    """The primary cut off from the sentinels, the replica and the worker, but not from the
    first client: it goes on taking that client's writes until it is demoted."""
    c.net.isolate("primary", but=("client0",))
    c.wait_for_primary("replica")
    time.sleep(3)
    c.net.heal_all()


def _pause(c: Cluster) -> None:
    """The primary stopped for 5 s (SIGSTOP: a stalled VM, a long fork), then resumed."""
    old = c.primary()
    c.pause(old)
    time.sleep(5)
    c.resume(old)


def _lagging_replica(c: Cluster) -> None:
    """The replica stopped for 4 s: writes are not acknowledged by it meanwhile."""
    replica = "replica" if c.primary() == "primary" else "primary"
    c.pause(replica)
    time.sleep(4)
    c.resume(replica)


def _two_failovers(c: Cluster) -> None:
    """The primary paused until the sentinels name the replica, resumed; then the new primary
    paused until they name the old one again, resumed."""
    for _ in range(2):
        old = c.primary()
        new = "replica" if old == "primary" else "primary"
        c.pause(old)
        try:
            c.wait_for_primary(new)
        finally:
            c.resume(old)
        _wait_replicating(c, old)


def _wait_replicating(c: Cluster, name: str, timeout: float = 60) -> None:
    """Until `name` is a replica in sync with the primary again."""
    host = c.net.hosts[name]
    client = redis.Redis(host.ip, PORT, password=c.password, socket_timeout=2)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(redis.RedisError):
            info = client.info("replication")
            if info.get("role") == "slave" and info.get("master_link_status") == "up":
                return
        time.sleep(0.2)


INJECT: dict[str, Callable[[Cluster], None]] = {
    "partition": _partition,
    "pause": _pause,
    "lagging replica": _lagging_replica,
    "two failovers": _two_failovers,
}


# --- one run ---------------------------------------------------------------------------------


def _inputs(folder: Path, seed: int, count: int) -> Iterator[tuple[Path, str, str]]:
    """Input files of strgame (new to the cluster), each with its right answers and job id."""
    import hashlib

    from pipeline.data.producer import job_id_for

    problem = get_problem("strgame")
    folder.mkdir(parents=True, exist_ok=True)
    for n in range(count):
        cases = list(toolkit.generate(problem, 300, seed * 1000 + n, "random", 200))
        text = io.StringIO()
        toolkit.write_input(problem, cases, text)
        path = folder / f"in-{n:03d}.in"
        path.write_text(text.getvalue())
        expected = "".join(problem.answers[problem.solve(case)] + "\n" for case in cases)
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        yield path, expected, job_id_for(problem, digest)


def _operation(kind: str, path: Path, answers: str, rng: random.Random) -> tuple[list[str], str]:
    """The command of one operation on an input file, and what it should write: the answers
    (solve), or a report's verdicts (grade, judge)."""
    command = [sys.executable, "-m", "pipeline.cli"]
    words = answers.split()
    if kind == "solve":
        out = str(path.with_suffix(".out"))
        return [*command, "solve", "-q", "-p", "strgame", str(path), "-o", out], answers
    report = ["--json", str(path.with_suffix(".json"))]
    if kind == "grade":  # a submission with a few answers turned into the other word
        turned = set(rng.sample(range(len(words)), 5))
        found = [
            ("Dirty" if w == "Pure" else "Pure") if i in turned else w for i, w in enumerate(words)
        ]
        submission = path.with_name(path.stem + "-sub.out")
        submission.write_text("".join(w + "\n" for w in found))
        verdicts = "".join("W" if i in turned else "A" for i in range(len(words)))
        args = ["grade", "-q", "-p", "strgame", str(path), str(submission)]
        return [*command, *args, *report], verdicts
    tests, programs = path.with_name(path.stem + "-tests"), path.with_name(path.stem + "-programs")
    tests.mkdir()
    programs.mkdir()
    (tests / "t.in").write_bytes(path.read_bytes())
    (programs / "pure.py").write_text(JUDGED)
    verdicts = "".join("A" if w == "Pure" else "W" for w in words)
    args = ["grade", "-q", "-p", "strgame", "--tests", str(tests), "--programs", str(programs)]
    return [*command, *args, *report], verdicts


def run_once(root: Path, fault: str, seed: int, tally: Tally) -> None:
    """One run of one fault: clients work through it; the history is checked after."""
    net = Net().create()
    try:
        for name in ("primary", "replica", "sentinel0", "sentinel1", "sentinel2", "worker"):
            net.host(name)
        for n in range(2):
            net.host(f"client{n}")
        cluster = Cluster(root, net)
        try:
            cluster.start()
            _run_history(cluster, fault, seed, tally)
        finally:
            cluster.stop()
    finally:
        net.destroy()


def _run_history(c: Cluster, fault: str, seed: int, tally: Tally) -> None:
    inputs = iter(_inputs(c.root / "inputs", seed, 200))  # generated as they are taken
    solves: list[Operation] = []
    running: dict[str, Operation | None] = {"client0": None, "client1": None}
    rng = random.Random(seed)
    start = time.monotonic()
    inject_at = start + rng.uniform(2.0, 4.0)
    injected = healed = None  # when the fault began, and when it had healed

    def launch(client: str) -> None:
        path, answers, job_id = next(inputs)
        kind = KINDS[len(solves) % len(KINDS)]
        args, expected = _operation(kind, path, answers, rng)
        process = c._spawn(c.net.hosts[client], args, path.with_suffix(".log"), **c.env())
        solve = Operation(client, path, expected, job_id, process, time.monotonic(), kind)
        solves.append(solve)
        running[client] = solve

    for client in running:
        launch(client)
    while True:
        now = time.monotonic()
        if healed is None and now >= inject_at:
            injected = now
            INJECT[fault](c)
            healed = time.monotonic()
        for client, solve in running.items():
            if solve is not None and solve.process.poll() is not None:
                solve.ended = time.monotonic()
                running[client] = None
                if injected is not None and solve.started < injected:
                    tally.longest = max(tally.longest, solve.ended - injected)
                if healed is None or time.monotonic() < healed + 5:
                    launch(client)  # clients go on until the faults have healed
        if all(s is None for s in running.values()) and healed is not None:
            break
        if healed is not None and now > healed + SOLVE_SECONDS:
            break
        time.sleep(0.05)
    tally.runs += 1
    tally.seconds.append(time.monotonic() - start)
    _check(c, solves, tally)


def _check(c: Cluster, solves: list[Operation], tally: Tally) -> None:
    """Every acknowledged operation: exact (a solve's job done on the primary); none, nor a job,
    left running (after the leases lapse)."""
    for solve in solves:
        if solve.process.poll() is None:
            tally.stuck += 1
            tally.notes.append(f"{solve.path.name}: never ended")
            with contextlib.suppress(ProcessLookupError):
                os.killpg(solve.process.pid, signal.SIGKILL)
            solve.process.wait()
            continue
        # a grading whose verdicts are not all accepted exits 1 with its report written
        told = solve.process.returncode == 0 or (solve.kind != "solve" and solve.out.exists())
        if not told or solve.process.returncode not in (0, 1):
            tally.failed += 1
            said = solve.path.with_suffix(".log").read_text(errors="replace").strip()
            tally.notes.append(f"{solve.kind} {solve.path.name}: failed: {said.splitlines()[-1:]}")
            if solve.out.exists():
                tally.wrong += 1
                tally.notes.append(f"{solve.path.name}: failed, yet wrote a result file")
            continue
        tally.acknowledged += 1
        tally.kinds[solve.kind] += 1
        if not solve.out.exists() or not solve.exact():
            tally.wrong += 1
            tally.notes.append(f"{solve.kind} {solve.path.name}: wrote what is not the answers")
    time.sleep(4)  # the leases (3 s) lapse; what is left open must be finished by then
    deadline = time.monotonic() + 60
    while True:
        store = c.store()
        try:
            open_jobs = {j.decode() for j in store.zrange(keys.OPEN_JOBS, 0, -1)}
            states = {s.job_id: store.hget(keys.job(s.job_id), "state") for s in solves}
        except redis.RedisError:
            open_jobs, states = {"?"}, {}
        finally:
            store.close()
        unfinished = [j for j in open_jobs if _unfinished(c, j)]
        if not unfinished or time.monotonic() > deadline:
            break
        time.sleep(1)
    for solve in solves:
        if (
            solve.kind == "solve"
            and solve.process.returncode == 0
            and states.get(solve.job_id) != JobState.DONE.value.encode()
        ):
            tally.lost += 1
            tally.notes.append(
                f"{solve.path.name}: acknowledged, then {states.get(solve.job_id)!r}"
            )
    tally.stuck += len(unfinished)
    tally.notes += [f"job {j}: left open unfinished: {_shown(c, j)}" for j in unfinished]


def _shown(c: Cluster, job_id: str) -> str:
    """A job's manifest, in short (for a note)."""
    store = c.store()
    try:
        manifest = {k.decode(): v.decode()[:40] for k, v in store.hgetall(keys.job(job_id)).items()}
        answered = store.hlen(keys.answers(job_id))
    finally:
        store.close()
    wanted = ("state", "total", "chunks", "plan", "producer")
    return (
        ", ".join(f"{k}={manifest[k]}" for k in wanted if k in manifest) + f", answered={answered}"
    )


def _unfinished(c: Cluster, job_id: str) -> bool:
    """Whether an open job still has chunks without answers (a finished producer's job whose
    every chunk is answered is complete: its next collector collects it)."""
    store = c.store()
    try:
        manifest = {k.decode(): v.decode() for k, v in store.hgetall(keys.job(job_id)).items()}
        if not manifest:
            return False
        state = manifest.get("state", "")
        return state not in (JobState.DONE.value, JobState.COMPLETE.value, "cancelled", "failed")
    finally:
        store.close()


def bench(root: Path, runs: int, faults: tuple[str, ...], seed: int) -> dict[str, Tally]:
    """`runs` runs of each fault."""
    tallies = {fault: Tally() for fault in faults}
    for fault in faults:
        for n in range(runs):
            where = root / f"{fault.replace(' ', '-')}-{n}"
            run_once(where, fault, seed + n, tallies[fault])
    return tallies


def table(tallies: dict[str, Tally]) -> list[str]:
    lines = [
        "| fault | runs | acknowledged (solve / grade / judge) | failed (not acknowledged)"
        " | lost | wrong | stuck | longest |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for fault, t in tallies.items():
        kinds = " / ".join(str(t.kinds[kind]) for kind in KINDS)
        lines.append(
            f"| {fault} | {t.runs} | {t.acknowledged} ({kinds}) | {t.failed} | {t.lost} |"
            f" {t.wrong} | {t.stuck} | {t.longest:.1f} s |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--seed", type=int, default=43)
    parser.add_argument("--fault", action="append", choices=FAULTS)
    args = parser.parse_args()
    import tempfile

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # the hosts are removed on the way out

    root = Path(tempfile.mkdtemp(prefix="gamebatch-partition-"))
    tallies = bench(root, args.runs, tuple(args.fault or FAULTS), args.seed)
    print("\n".join(table(tallies)))
    for fault, t in tallies.items():
        for note in t.notes:
            print(f"{fault}: {note}")
    sys.exit(0 if all(t.clean for t in tallies.values()) else 1)


if __name__ == "__main__":
    main()
