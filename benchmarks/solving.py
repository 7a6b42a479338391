"""Solving, measured: the solvers in process against the reference programs, the pipeline's
rate, per-case overhead, memory and start-up of `gamebatch solve`, each stage's MB/s on one
core, and how the workers and producers scale from one process to two."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.common import (
    Row,
    best_of,
    fresh_state,
    gamebatch,
    random_words,
    run_reference,
    solve_in_process,
    stop_warm,
    two_copies,
    wait_warm,
    write_cases,
)
from pipeline.config import load_settings
from pipeline.data import slices
from pipeline.data.chunking import chunk_cases
from pipeline.data.messages import ChunkPayload, SlicePayload, decode_payload
from pipeline.games.problem import Problem
from pipeline.games.reader import read_batches
from pipeline.games.registry import get_problem
from pipeline.games.tokens import TokenReader
from pipeline.local.redis_server import RedisServer
from pipeline.store.jobstate import JobState
from pipeline.store.jobstore import JobStore


def strgame_solver(data: Path, ref: dict[str, Path] | None, quick: bool) -> list[Row]:
    """strgame per shape of game: our reader+solver in process against the reference."""
    rows = []
    size, games, runs = (10**4, 2, 1) if quick else (10**5, 10, 3)
    for shape in ("long", "singles", "random", "wide", "mixed"):
        path = write_cases(
            data / f"str-{shape}-{size}.in", "strgame", shape, games, size=size, seed=7
        )
        ours = best_of(runs, lambda p=path: solve_in_process("strgame", p))
        base = best_of(runs, lambda p=path: run_reference(ref["strgame"], p)) if ref else None
        if ref:
            assert solve_in_process("strgame", path) == run_reference(ref["strgame"], path)
        ratio = ours / base if base else None
        rows.append(Row("strgame solver", f"{games} games, shape {shape}, {size} letters each",
                        ours, base, "s", ratio, "<= 2x reference",
                        None if ratio is None else ratio <= 2.0))  # fmt: skip
    return rows


def pathgame_solver(data: Path, ref: dict[str, Path] | None, quick: bool) -> list[Row]:
    """pathgame boards: fully white and mixed against the reference; huge single boards."""
    rows = []
    get_problem("pathgame").prepare(None)  # once per worker process in the pipeline
    boards, runs = (200, 1) if quick else (1000, 3)
    for shape, target, limit in (("white", ">= 50x faster", 1 / 50), ("random", "", None)):
        path = write_cases(
            data / f"path-{shape}-{boards}.in", "pathgame", shape, boards, size=1000, seed=3
        )
        ours = best_of(runs, lambda p=path: solve_in_process("pathgame", p))
        base = best_of(runs, lambda p=path: run_reference(ref["pathgame"], p)) if ref else None
        if ref:
            assert solve_in_process("pathgame", path) == run_reference(ref["pathgame"], path)
        ratio = ours / base if base else None
        met = None if ratio is None or limit is None else ratio <= limit
        rows.append(Row("pathgame solver", f"{boards} boards 2x1000, {shape}", ours, base, "s",
                        ratio, target, met))  # fmt: skip
    for width in (10**5, 10**6) if quick else (10**6, 10**7):
        path = data / f"path-wide-{width}.in"
        if not path.exists():
            rng = random.Random(width)
            top = bytearray(b"." * width)
            for i in rng.sample(range(1, width - 1), width // 50):
                top[i] = ord("#")
            path.write_bytes(b"1\n" + bytes(top) + b" " + b"." * width + b"\n")
        ours = best_of(runs, lambda p=path: solve_in_process("pathgame", p))
        ok = ours < 2.0 if width == 10**7 else None
        rows.append(Row("pathgame solver", f"one board 2x{width}", ours, None, "s", None,
                        "< 2 s" if width == 10**7 else "", ok,
                        "the reference's tables stop at width 1023"))  # fmt: skip
    return rows


def pipeline_rate(data: Path, ref: dict[str, Path] | None, quick: bool) -> list[Row]:
    """Whole pipeline on many strgame files against the reference run two at a time."""
    many, size = (6, 10**4) if quick else (40, 10**5)
    files = [
        write_cases(data / f"pipe-{size}-{i:02}.in", "strgame", "random", 10, size=size, seed=i)
        for i in range(many)
    ]

    def ours(paths: list[Path]) -> float:
        out = Path(tempfile.mkdtemp(prefix="gamebatch-bench-out-"))
        start = time.perf_counter()
        gamebatch("solve", "-q", "-p", "strgame", *map(str, paths), "--out-dir", str(out),
                  env=fresh_state())  # fmt: skip
        took = time.perf_counter() - start
        if ref:
            for p in paths:
                assert (out / f"{p.name}.out").read_bytes() == run_reference(ref["strgame"], p)
        shutil.rmtree(out)
        return took

    def reference(paths: list[Path]) -> float:
        assert ref is not None
        script = (
            'printf "%s\\n" "$@" | xargs -P 2 -I{} sh -c '
            '\'ulimit -s unlimited; "$0" < {} > /dev/null\' "$REF"'
        )
        start = time.perf_counter()
        subprocess.run(["bash", "-c", script, "bash", *map(str, paths)], check=True,
                       env={**os.environ, "REF": str(ref["strgame"])})  # fmt: skip
        return time.perf_counter() - start

    rows = []
    total, first = ours(files), ours(files[:2])
    steady = (total - first) / (many - 2)
    base_total = reference(files) if ref else None
    base_steady = (base_total - reference(files[:2])) / (many - 2) if base_total else None
    rows.append(Row("pipeline", f"{many} strgame files of 10 games x {size} letters, total",
                    total, base_total, "s", total / base_total if base_total else None, "", None,
                    "embedded broker, default workers; reference: 2 files at a time"))  # fmt: skip
    ratio = steady / base_steady if base_steady else None
    rows.append(Row("pipeline", "steady state, seconds per file (total minus 2-file run)",
                    steady, base_steady, "s/file", ratio, "<= 1.5x reference",
                    None if ratio is None else ratio <= 1.5))  # fmt: skip
    rows.append(Row("pipeline", "start-up cost (2-file run)", first, None, "s", None, "", None))
    return rows


def overhead(data: Path, quick: bool) -> list[Row]:
    """Tiny pathgame cases end to end, in cases per second."""
    count = 10**5 if quick else 10**6
    path = data / f"tiny-{count}.in"
    if not path.exists():
        problem = get_problem("pathgame")
        rng = random.Random(1)
        with path.open("w") as out:
            out.write(f"{count}\n")
            for _ in range(count):
                out.write(problem.format_case(problem.generate(rng, "random", rng.randint(1, 8))))
    out = Path(tempfile.mkdtemp()) / "tiny.out"
    took = best_of(1, lambda: gamebatch("solve", "-q", "-p", "pathgame", str(path), "-o", str(out),
                                        env=fresh_state()))  # fmt: skip
    rate = count / took
    return [Row("overhead", f"{count} tiny pathgame cases (width <= 8), end to end", rate, None,
                "cases/s", rate, ">= 300000 cases/s", rate >= 300_000)]  # fmt: skip


def memory(data: Path, quick: bool) -> list[Row]:
    """Peak RSS of the `gamebatch solve` process itself on a large input."""
    games, width = (8, 8 * 10**6) if quick else (200, 10**7)
    path = random_words(data / f"big-{games}x{width}.in", games, width, seed=5)
    size = path.stat().st_size
    env = {k: v for k, v in os.environ.items() if not k.startswith("GAMEBATCH_")}
    env.update(fresh_state())
    process = subprocess.Popen(
        [sys.executable, "-m", "pipeline.cli", "solve", "-q", "-p", "strgame", str(path),
         "-o", os.devnull], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    peak = 0
    while process.poll() is None:
        try:
            status = Path(f"/proc/{process.pid}/status").read_text()
            peak = max(peak, int(status.split("VmHWM:")[1].split()[0]) * 1024)
        except (OSError, IndexError):
            pass
        time.sleep(0.05)
    assert process.returncode == 0, process.stderr.read() if process.stderr else ""
    mb = peak / 2**20
    name = f"peak RSS of solve (producer + collector) on a {size / 2**30:.2f} GiB input"
    return [Row("memory", name, mb, None, "MiB", mb, "< 256 MiB", mb < 256)]


def startup(data: Path, quick: bool) -> list[Row]:
    """`gamebatch --help`, and `gamebatch solve` of a one-case file never solved before: with
    a fresh state folder, and with the warm service a command before left."""
    runs = 3 if quick else 5
    help_time = best_of(runs, lambda: gamebatch("--help"))
    one = data / "one.in"
    one.write_text("1\n1 1\na\n")
    solve_time = best_of(runs, lambda: gamebatch("solve", "-q", "-p", "strgame", str(one),
                                                 env=fresh_state()))  # fmt: skip
    env = fresh_state(warm=60)
    try:
        gamebatch("solve", "-q", "-p", "strgame", str(one), env=env)
        wait_warm(env)
        letters = iter("bcdefghijklmnopqrstuvwxyz")

        def new_case() -> object:
            one.write_text(f"1\n1 1\n{next(letters)}\n")  # nothing cached
            return gamebatch("solve", "-q", "-p", "strgame", str(one), env=env)

        warm_time = best_of(runs, new_case)
    finally:
        stop_warm(env)
    return [
        Row("start-up", "gamebatch --help", help_time, None, "s", None, "< 0.1 s", help_time < 0.1),
        Row("start-up", "gamebatch solve, one new case, fresh state folder (solved by the command"
            " itself)", solve_time, None, "s", None, "< 0.3 s", solve_time < 0.3),
        Row("start-up", "gamebatch solve, one new case, with the warm service", warm_time, None,
            "s", None, "< 0.1 s", warm_time < 0.1),
    ]  # fmt: skip


def worker_phase(path: Path, workers: int, expected: bytes) -> float:
    """Seconds from the first chunk's start to the last answers, the job queued beforehand.

    The job is queued in full before any worker runs, so that the producer does not share the
    two cores with the workers: this is how a cluster sees a job submitted from elsewhere.
    """
    with (
        tempfile.TemporaryDirectory(prefix="gamebatch-scale-") as tmp,
        RedisServer(Path(tmp) / "redis") as server,
    ):
        env = {"GAMEBATCH_BROKER_URL": server.url}
        job = gamebatch("submit", "-p", "strgame", str(path), env=env).stdout.split()[-1].decode()
        worker = subprocess.Popen(
            [sys.executable, "-m", "pipeline.cli", "worker", "--concurrency", str(workers)],
            env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
        try:
            out = Path(tmp) / "result.out"
            gamebatch("collect", job, "-o", str(out), env=env)
            if out.read_bytes() != expected:
                raise SystemExit(f"scaling: wrong answers with {workers} worker(s)")
            status = json.loads(gamebatch("status", job, "--json", env=env).stdout)
            return float(status["answered"] - status["started"])
        finally:
            os.killpg(worker.pid, signal.SIGTERM)
            worker.wait()


def stage_rates(data: Path, quick: bool) -> list[Row]:
    """The inputs of the sizing model: MB of input per second on one core, for the producer
    (read, validate, chunk, encode) and for a worker (decode, solve), per kind of input; the
    producer by the game's C path, beside the Python reader that was its only path before."""
    rows = []
    settings = load_settings()
    target, most = settings.chunk.target_work, settings.chunk.max_cases
    kinds = [("strgame", "random"), ("strgame", "singles"), ("strgame", "long"),
             ("pathgame", "random"), ("pathgame", "small")]  # fmt: skip
    for game, shape in kinds:
        problem = get_problem(game)
        problem.prepare(None)
        size = 1000 if game == "pathgame" else 200000
        cases = (20 if quick else 200) * (50 if shape == "small" else 1)
        count = cases * (200 if game == "pathgame" else 1)
        path = write_cases(data / f"rate-{game}-{shape}.in", game, shape, count, size=size, seed=5)
        payloads: list[bytes] = []
        scan = getattr(problem, "scan_chunk", None)

        def in_python(problem: Problem = problem, path: Path = path) -> list[bytes]:
            with path.open("rb") as stream:
                batches = read_batches(problem, TokenReader(stream, str(path)))
                return [ChunkPayload(problem.name, chunk.first, chunk.cases).encode()
                        for chunk in chunk_cases(batches, problem.work, target, most)]  # fmt: skip

        def in_c(problem: Problem = problem, path: Path = path, scan: Any = scan) -> list[bytes]:
            limits = slices.Limits(target, most, settings.limits.max_token_bytes, 0)
            with path.open("rb") as stream:
                return [SlicePayload(problem.name, c.first, c.count, c.data).encode()
                        for c in slices.slice_chunks(scan, stream, limits)]  # fmt: skip

        def produce(out: list[bytes] = payloads, fn: Callable[[], list[bytes]] = in_c) -> None:
            out[:] = fn()

        def solve(problem: Problem = problem, payloads: list[bytes] = payloads) -> None:
            for raw in payloads:
                payload = decode_payload(raw)
                if isinstance(payload, SlicePayload):
                    problem.solve_slice(payload.data, payload.count)  # type: ignore[attr-defined]
                else:
                    for case in ChunkPayload.decode(raw).cases:
                        problem.solve(case)

        megabytes = path.stat().st_size / 1e6
        python = megabytes / best_of(3, lambda: produce(fn=in_python))
        produced = megabytes / best_of(3, produce) if scan is not None else python
        solved = megabytes / best_of(3, solve)
        label = f"{game} {shape}"
        rows += [
            Row("stage rates", f"{label}: producer (C path), MB/s per core", produced, python,
                "MB/s", produced / python, ">= 400 MB/s", produced >= 400,
                "baseline: the Python reader, chunker and JSON payloads"),
            Row("stage rates", f"{label}: producer / one worker, MB/s per core", produced,
                solved, "MB/s", produced / solved, "", None,
                f"one producer keeps {produced / solved:.2f} workers busy"),
        ]  # fmt: skip
    return rows


def production_time(paths: list[Path], producers: int) -> float:
    """Seconds for `solve --producers N` to queue every chunk of these files (no workers)."""
    with (
        tempfile.TemporaryDirectory(prefix="gamebatch-produce-") as tmp,
        RedisServer(Path(tmp) / "redis") as server,
    ):
        store = JobStore.from_url(server.url)
        command = [sys.executable, "-m", "pipeline.cli", "solve", "-q", "-p", "strgame",
                   *map(str, paths), "--out-dir", tmp, "--producers", str(producers)]  # fmt: skip
        start = time.perf_counter()
        solve = subprocess.Popen(command, env={**os.environ, "GAMEBATCH_BROKER_URL": server.url},
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        try:
            while True:
                states = [p and p.state for p in store.progress_of(store.jobs())]
                if len(states) == len(paths) and all(s == JobState.RUNNING for s in states):
                    return time.perf_counter() - start
                if solve.poll() is not None:
                    raise SystemExit("production: solve ended early")
                time.sleep(0.01)
        finally:
            solve.kill()
            solve.wait()


def scaling(data: Path, ref: dict[str, Path] | None, quick: bool) -> list[Row]:
    """The same CPU-bound job (large strgame tries) with one and with two worker processes,
    beside what the machine gives two copies of the reference program over one."""
    count = 24 if quick else 1600
    path = write_cases(data / f"scale-{count}.in", "strgame", "random", count, size=200000, seed=9)
    expected = solve_in_process("strgame", path)
    phase = {w: min(worker_phase(path, w, expected) for _ in range(3)) for w in (1, 2)}
    ends = {}
    for workers in (1, 2):
        ends[workers] = best_of(1, lambda w=workers: gamebatch(
            "solve", "-q", "-p", "strgame", str(path), "-o", os.devnull, "--workers", str(w),
            env=fresh_state(),
        ))  # fmt: skip
    files = [
        write_cases(data / f"produce-{i}.in", "strgame", "random", count // 8, size=200000, seed=i)
        for i in range(4)
    ]
    made = {n: min(production_time(files, n) for _ in range(2)) for n in (1, 2)}
    speedup, whole, feed = phase[1] / phase[2], ends[1] / ends[2], made[1] / made[2]
    machine = None
    if ref is not None:  # a CPU-bound input within the reference's limits
        within = write_cases(data / "ref-scale.in", "pathgame", "random",
                             2000 if quick else 20000, size=1000, seed=3)  # fmt: skip
        machine = two_copies(ref["pathgame"], within)
    return [
        Row("scaling", "speed-up of 2 worker processes over 1 (tries of 2*10^5 letters, "
            "job queued first), against 2 reference copies over 1",
            speedup, machine, "x", speedup / machine if machine else None,
            ">= 0.9x the machine's", speedup / machine >= 0.9 if machine else None,
            f"worker phase: 1 worker {phase[1]:.2f} s, 2 workers {phase[2]:.2f} s"),
        Row("scaling", "the same, end to end: `solve` reads, queues and collects on the same "
            "2 cores", whole, None, "x", whole, "", None,
            f"1 worker {ends[1]:.2f} s, 2 workers {ends[2]:.2f} s"),
        Row("scaling", "queueing 4 files with `solve --producers 2` over 1 (no workers)",
            feed, None, "x", feed, "", None,
            f"1 producer {made[1]:.2f} s, 2 producers {made[2]:.2f} s"),
    ]  # fmt: skip
