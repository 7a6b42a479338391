"""A chaos soak: several jobs of both games run through real workers, `solve` processes and
a Redis with an append-only file, while a seeded fault loop kills pool processes, whole
workers, producers/collectors (`solve`) and Redis itself, and pulls the network cable of a
worker's host (a network namespace, when this machine allows them) at random moments. At the
end every result must be byte-identical to the answers, every job done and no process left.

`python -m tests.soak.soak --seconds 600 --seed 7` runs a long one; the test runs a short one.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import random
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import redis

from pipeline.games import toolkit
from pipeline.games.registry import get_problem
from pipeline.local.redis_server import RedisServer
from pipeline.store import keys
from pipeline.store.jobstore import JobStore
from tests.conftest import compile_reference
from tests.sentinels import Sentinels

GOLDEN = Path(__file__).with_name("expected.json")
FAULTS = ("pool process", "worker", "solve", "redis", "failover", "network")
_ENV = {  # quick recovery, and many small chunks so that faults land in the middle of jobs
    "GAMEBATCH_LEASE_SECONDS": "3",
    "GAMEBATCH_STALL_SECONDS": "4",
    "GAMEBATCH_CHUNK__TARGET_WORK": "40000",
    "GAMEBATCH_CHUNK__PLACE_SCALE": "1",  # as many chunks when they name their place
    "GAMEBATCH_WARM_SECONDS": "0",
}


@dataclass
class Figures:
    """What a soak did and found."""

    seed: int
    seconds: float = 0.0
    faults: Counter[str] = field(default_factory=Counter)
    jobs: int = 0
    cases: int = 0
    longest_stall: float = 0.0
    lost: int = 0  # result files that differ from the answers (must be 0)
    failed_solves: list[str] = field(default_factory=list)  # solves that ended badly unkilled
    unfinished: int = 0  # jobs whose result was written but which are not marked done (0)
    unfinished_states: Counter[str] = field(default_factory=Counter)  # what they say instead
    unfinished_jobs: list[str] = field(default_factory=list)  # each, and how far it got
    left: int = 0  # processes still alive at the end (must be 0)

    def lines(self) -> list[str]:
        kinds = ", ".join(f"{kind} {self.faults[kind]}" for kind in FAULTS)
        return [
            f"soak seed {self.seed}: {self.seconds:.0f} s, {self.jobs} jobs, {self.cases} cases",
            f"faults injected: {kinds}",
            f"longest stall: {self.longest_stall:.1f} s; lost answers: {self.lost};"
            f" jobs not marked done: {self.unfinished}{self._states()}; processes left:"
            f" {self.left}",
            *(f"    {line}" for line in self.unfinished_jobs),
            f"solves that failed on their own: {len(self.failed_solves)}",
            *(f"    {line}" for line in self.failed_solves),
        ]

    def _states(self) -> str:
        said = ", ".join(f"{state} {n}" for state, n in sorted(self.unfinished_states.items()))
        return f" ({said})" if said else ""


class WorkerHost:
    """A network namespace joined to this one by a veth pair: a worker host on its own
    address, whose cable can be pulled and plugged in again."""

    OUTSIDE, INSIDE = "10.231.78.1", "10.231.78.2"  # only ever assigned to this pair

    def __init__(self) -> None:
        tag = secrets.token_hex(2)
        self.ns, self.veth = f"gbsoak{tag}", f"gbsoak{tag}"
        self.cut_until: float | None = None  # while the cable is out: when it goes back in

    @staticmethod
    def available() -> bool:
        """Root, iproute2 and permission to make namespaces."""
        if os.geteuid() != 0 or shutil.which("ip") is None:
            return False
        probe = subprocess.run(
            ["ip", "netns", "add", "gbsoakprobe"], capture_output=True, check=False
        )
        subprocess.run(["ip", "netns", "del", "gbsoakprobe"], capture_output=True, check=False)
        return probe.returncode == 0

    def create(self) -> WorkerHost:
        _ip("netns", "add", self.ns)
        _ip("link", "add", self.veth, "type", "veth", "peer", "name", "eth0", "netns", self.ns)
        _ip("addr", "add", f"{self.OUTSIDE}/30", "dev", self.veth)
        _ip("link", "set", self.veth, "up")
        _ip("-n", self.ns, "addr", "add", f"{self.INSIDE}/30", "dev", "eth0")
        _ip("-n", self.ns, "link", "set", "eth0", "up")
        _ip("-n", self.ns, "link", "set", "lo", "up")
        return self

    def cut(self, seconds: float) -> None:
        """Pull the cable for `seconds` (see tick)."""
        _ip("-n", self.ns, "link", "set", "eth0", "down")
        self.cut_until = time.monotonic() + seconds

    def tick(self, *, now: bool = False) -> None:
        """Plug the cable back in once its time is up (or `now`)."""
        if self.cut_until is not None and (now or time.monotonic() >= self.cut_until):
            _ip("-n", self.ns, "link", "set", "eth0", "up")
            self.cut_until = None

    def command(self, args: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.ns, *args]

    def destroy(self) -> None:
        subprocess.run(["ip", "netns", "del", self.ns], capture_output=True, check=False)


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


class Soak:
    """The processes of one soak and the fault loop over them."""

    def __init__(self, root: Path, seed: int, *, sentinel: bool = False) -> None:
        """`sentinel`: a primary, a replica and three sentinels, and the Redis fault is a
        failover (the primary killed, the replica promoted, the old one back as replica)."""
        self.root, self.rng = root, random.Random(seed)
        self.figures = Figures(seed)
        # a worker on another host, when namespaces are allowed (sentinels announce loopback
        # addresses, which another host cannot reach: no remote worker with them)
        self.host = WorkerHost() if not sentinel and WorkerHost.available() else None
        bind = f"bind 127.0.0.1 {WorkerHost.OUTSIDE}\n" if self.host else ""
        self.redis = RedisServer(root / "redis", appendonly=True, extra=bind)
        # as shipped (min-replicas-to-write): a failover brings the old primary back
        self.cluster = Sentinels(root / "cluster") if sentinel else None
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("GAMEBATCH_")}
        self.env.update(_ENV, GAMEBATCH_BROKER_URL=self.url)
        self.workers: list[subprocess.Popen[bytes]] = []
        self.remote: subprocess.Popen[bytes] | None = None  # the worker on the other host
        self.solves: dict[Path, subprocess.Popen[bytes]] = {}  # input -> its running solve
        self.runs: dict[Path, int] = {}  # input -> solves started for it
        self.first_of_each: list[str] | None = None  # fault kinds not injected yet
        self.groups: set[int] = set()  # every process group started (each a session)

    @property
    def url(self) -> str:
        return self.cluster.settings_url() if self.cluster else self.redis.url

    def start_redis(self) -> None:
        if self.cluster:
            self.cluster.start()
            self.env["GAMEBATCH_BROKER_URL"] = self.url
        else:
            if self.host:
                self.host.create()
            self.redis.start()

    def _spawn(
        self, *args: str, remote: bool = False, log: Path | None = None
    ) -> subprocess.Popen[bytes]:
        command, env = [sys.executable, "-m", "pipeline.cli", *args], self.env
        if remote:
            assert self.host is not None
            command = self.host.command(command)
            url = self.redis.url.replace("@127.0.0.1:", f"@{WorkerHost.OUTSIDE}:")
            env = {**self.env, "GAMEBATCH_BROKER_URL": url}
        with (log or self.root / "processes.log").open("ab") as out:
            process = subprocess.Popen(
                command, env=env, stdout=out, stderr=out, start_new_session=True
            )
        self.groups.add(process.pid)
        return process

    def start_worker(self, *, remote: bool = False) -> None:
        process = self._spawn("worker", "--concurrency", "2", remote=remote)
        if remote:
            self.remote = process
        else:
            self.workers.append(process)

    def start_workers(self) -> None:
        """Two workers here, and one on the other host when there is one."""
        for _ in range(2):
            self.start_worker()
        if self.host:
            self.start_worker(remote=True)

    def start_solve(self, path: Path) -> None:
        game = path.name.split("-")[0]
        out = path.with_suffix(".out")
        self.runs[path] = self.runs.get(path, 0) + 1
        log = self.root / f"{path.stem}.{self.runs[path]}.log"  # its own: why it ended
        self.solves[path] = self._spawn(
            "solve", "-q", "-p", game, str(path), "-o", str(out), log=log
        )

    def inject(self) -> None:
        """One fault, chosen by the seeded generator: every kind once first (in a seeded
        order), so that a short soak meets each of them, then any."""
        kinds = [k for k in FAULTS if k != ("redis" if self.cluster else "failover")]
        kinds = [k for k in kinds if k != "network" or self.host]
        if self.first_of_each is None:
            self.first_of_each = self.rng.sample(kinds, len(kinds))
        kind = self.first_of_each.pop() if self.first_of_each else self.rng.choice(kinds)
        everyone = [*self.workers, *([self.remote] if self.remote else [])]
        if kind == "pool process":
            pool = [p for w in everyone for c in _children(w.pid) for p in _children(c)]
            if not pool:
                return
            _kill(self.rng.choice(pool))
        elif kind == "worker":
            victim = self.rng.choice(everyone)
            _kill_group(victim)
            if victim is self.remote:
                self.start_worker(remote=True)
            else:
                self.workers.remove(victim)
                self.start_worker()
        elif kind == "network":
            assert self.host is not None
            if self.host.cut_until is not None:
                return
            self.host.cut(self.rng.uniform(1.0, 6.0))
        elif kind == "solve":
            running = [p for p, s in self.solves.items() if s.poll() is None]
            if not running:
                return
            path = self.rng.choice(running)
            _kill_group(self.solves[path])
            self.start_solve(path)
        elif kind == "failover":
            assert self.cluster is not None
            self.cluster.fail_over()
        else:  # Redis dies; it comes back on its port with its append-only file
            assert self.redis.process is not None
            os.kill(self.redis.process.pid, signal.SIGKILL)
            self.redis.process.wait()
            time.sleep(self.rng.uniform(0.2, 1.5))
            self.redis.start()
        self.figures.faults[kind] += 1

    def heal(self) -> None:
        """A `solve` the fault loop did not kill must end with its result: one that ended
        otherwise is a failure of the soak (noted with its last line), started again so
        that the soak still ends."""
        for path, process in list(self.solves.items()):
            code = process.poll()
            if code is None or (code == 0 and path.with_suffix(".out").exists()):
                continue
            log = self.root / f"{path.stem}.{self.runs[path]}.log"
            lines = log.read_text(errors="replace").strip().splitlines() or ["(no output)"]
            self.figures.failed_solves.append(f"{path.name}: exit {code}: {lines[-1][:300]}")
            self.start_solve(path)

    def done_cases(self) -> int | None:
        """Cases answered over every job (None while Redis is away)."""
        try:
            store = JobStore.from_url(self.url)
            try:
                ids = [v.decode() for v in store.client.zrange(keys.JOBS, 0, -1)]
                return sum(int(store.client.hget(keys.job(i), "done_cases") or 0) for i in ids)
            finally:
                store.close()
        except (redis.RedisError, OSError):
            return None

    def stop(self) -> None:
        for process in [
            *self.workers,
            *([self.remote] if self.remote else []),
            *self.solves.values(),
        ]:
            _kill_group(process)
        if self.cluster:
            self.cluster.stop()
        else:
            self.redis.stop()
        if self.host:
            self.host.destroy()
        deadline = time.monotonic() + 10  # what was killed a moment ago may still be exiting
        while time.monotonic() < deadline:
            self.figures.left = sum(_group_alive(group) for group in self.groups)
            if not self.figures.left:
                break
            time.sleep(0.2)


def make_inputs(folder: Path, jobs: int, scale: float, seed: int) -> list[Path]:
    """Inputs of both games, `jobs` files of 600 x `scale` cases each."""
    folder.mkdir(parents=True, exist_ok=True)
    made = []
    for n in range(jobs):
        game, shape, size = [("strgame", "random", 300), ("pathgame", "random", 200)][n % 2]
        problem = get_problem(game)
        cases = list(toolkit.generate(problem, int(600 * scale), seed * 1000 + n, shape, size))
        text = io.StringIO()
        toolkit.write_input(problem, cases, text)
        path = folder / f"{game}-{n:03d}.in"
        path.write_text(text.getvalue())
        made.append(path)
    return made


def answer_digests(inputs: list[Path], key: str, reference: dict[str, Path] | None) -> list[str]:
    """SHA-256 of the right answers to each input, never from the solver under test: by the
    reference programs when there are any, else as they gave them for the test's soaks
    (expected.json, keyed `seed:jobs:scale`)."""
    if reference is None:
        known = json.loads(GOLDEN.read_text()).get(key)
        if known is None:
            raise RuntimeError(f"no reference answers for the soak {key}: build the reference")
        return [known[path.name] for path in inputs]
    digests = []
    for path in inputs:
        binary = reference[path.name.split("-")[0]]
        with path.open("rb") as stream:
            out = subprocess.run([str(binary)], stdin=stream, capture_output=True, check=True)
        digests.append(hashlib.sha256(out.stdout).hexdigest())
    return digests


def run(
    root: Path,
    seconds: float,
    seed: int,
    *,
    jobs: int = 8,
    scale: float = 1.0,
    sentinel: bool = False,
    reference: dict[str, Path] | None = None,
) -> Figures:
    """A soak of at least `seconds` of faults, then until every job is done."""
    paths = make_inputs(root / "inputs", jobs, scale, seed)
    digests = answer_digests(paths, f"{seed}:{jobs}:{scale}", reference)
    inputs = dict(zip(paths, digests, strict=True))
    cases = sum(int(path.read_text().split(maxsplit=1)[0]) for path in paths)  # per round
    soak = Soak(root, seed, sentinel=sentinel)
    try:
        soak.start_redis()
        soak.start_workers()
        start = time.monotonic()  # the seconds of faults count from here, not the servers' start
        waiting = sorted(inputs)
        last_progress, last_done = time.monotonic(), -1
        next_fault = time.monotonic() + soak.rng.uniform(0.5, 2.0)
        deadline = start + seconds + 600  # faults stop at `seconds`; the rest must finish
        while time.monotonic() < deadline:
            while waiting and sum(s.poll() is None for s in soak.solves.values()) < 3:
                soak.start_solve(waiting.pop(0))
            finished = not waiting and all(
                p.with_suffix(".out").exists() and soak.solves[p].poll() == 0 for p in inputs
            )
            if finished and time.monotonic() - start >= seconds:
                break
            if finished:  # faults go on: run the jobs again from scratch, their cache gone
                _forget(soak, paths, cases)
                waiting = sorted(inputs)
            if time.monotonic() >= next_fault and time.monotonic() - start < seconds:
                soak.inject()
                next_fault = time.monotonic() + soak.rng.uniform(0.3, 2.0)
            soak.heal()
            if soak.host:
                soak.host.tick(now=time.monotonic() - start >= seconds)
            done = soak.done_cases()
            if done is not None and done != last_done:
                soak.figures.longest_stall = max(
                    soak.figures.longest_stall, time.monotonic() - last_progress
                )
                last_progress, last_done = time.monotonic(), done
            time.sleep(0.1)
        soak.figures.seconds = time.monotonic() - start
        for path, digest in inputs.items():
            out = path.with_suffix(".out")
            soak.figures.lost += not out.exists() or _sha256(out) != digest
        store = JobStore.from_url(soak.url)
        jobs = [p for p in store.progress_of(store.jobs()) if p is not None]
        store.close()
        for job in (p for p in jobs if p.state.value != "done"):
            soak.figures.unfinished += 1
            soak.figures.unfinished_states[job.state.value] += 1
            soak.figures.unfinished_jobs.append(  # which one, and how far it got
                f"not done: job {job.job_id[:12]} ({job.name}): {job.state.value}, cases"
                f" {job.done}/{job.total}, chunks {job.done_chunks}/{job.chunks}"
            )
        if soak.figures.unfinished and soak.cluster:  # one failover injected: were there more?
            soak.figures.unfinished_jobs += soak.cluster.failover_log().splitlines()
        soak.figures.cases += cases
        soak.figures.jobs += len(inputs)
    finally:
        soak.stop()
    return soak.figures


def _sha256(path: Path) -> str:
    with path.open("rb") as stream:
        return hashlib.file_digest(stream, "sha256").hexdigest()


def _forget(soak: Soak, inputs: list[Path], cases: int) -> None:
    """Count the round, and drop its jobs so that the next round computes them again."""
    soak.figures.jobs += len(inputs)
    soak.figures.cases += cases
    with contextlib.suppress(redis.RedisError):
        store = JobStore.from_url(soak.url)
        for job_id in store.jobs():
            store.delete(job_id)
        store.close()
    for path in inputs:
        path.with_suffix(".out").unlink(missing_ok=True)
    soak.solves.clear()


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def _group_alive(group: int) -> int:
    """Processes of a process group still running (zombies waiting for init do not count)."""
    alive = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        alive += int(fields[2]) == group and fields[0] != "Z"  # pgrp, state
    return alive


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=600)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=8)
    parser.add_argument("--scale", type=float, default=4.0, help="cases per job, x 600")
    parser.add_argument("--dir", type=Path, default=Path("/tmp/gamebatch-soak"))
    parser.add_argument("--sentinel", action="store_true", help="fail over instead of restart")
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    reference = compile_reference(Path(tempfile.mkdtemp(dir=args.dir)))
    figures = run(
        args.dir,
        args.seconds,
        args.seed,
        jobs=args.jobs,
        scale=args.scale,
        sentinel=args.sentinel,
        reference=reference,
    )
    print("\n".join(figures.lines()))
    clean = figures.lost == figures.unfinished == figures.left == 0
    return 0 if clean and not figures.failed_solves else 1


if __name__ == "__main__":
    sys.exit(main())
