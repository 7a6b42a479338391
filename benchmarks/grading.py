"""Benchmarks of grading at contest scale: a 500-contestant contest cold and re-graded, report
sizes, peak memory of every process, and a simulated large contest's comparison rate with one
and two worker processes, held against two copies of the reference program run the same way."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

from benchmarks.common import (
    Row,
    fresh_state,
    solve_in_process,
    stop_warm,
    two_copies,
    wait_warm,
    write_cases,
)
from pipeline.local.redis_server import RedisServer


def contest(root: Path, contestants: int, tests: int, cases: int, *, seed: int) -> Path:
    """pathgame tests and one folder of outputs per contestant, a tenth of the lines wrong
    (kept between runs: generation is deterministic)."""
    if (root / "done").exists():
        return root
    rng = random.Random(seed)
    (root / "tests").mkdir(parents=True, exist_ok=True)
    words = ("Snuke", "Sothe")
    for t in range(tests):
        path = write_cases(root / "tests" / f"t{t:02d}.in", "pathgame", "random", cases,
                           size=20, seed=seed + t)  # fmt: skip
        right = solve_in_process("pathgame", path).decode().splitlines()
        for c in range(contestants):
            folder = root / "subs" / f"c{c:05d}"
            folder.mkdir(parents=True, exist_ok=True)
            lines = [w if rng.random() < 0.9 else rng.choice(words) for w in right]
            (folder / f"t{t:02d}.out").write_text("\n".join(lines) + "\n")
    (root / "done").touch()
    return root


def _grade(root: Path, env: dict[str, str], *reports: str) -> tuple[float, int]:
    """Wall seconds of `gamebatch grade` on a contest, and the peak RSS in bytes of the largest
    of its processes and their children (the embedded Redis and workers)."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("GAMEBATCH_")}
    full.update(env)
    start = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-m", "pipeline.launch", "grade", "-q", "-p", "pathgame", "--tests",
         str(root / "tests"), "--submissions", str(root / "subs"), *reports],
        env=full, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    peaks = [0]

    def sample() -> None:  # beside the wait, so that the wall time is not rounded to a poll
        while process.poll() is None:
            peaks.append(max(peaks[-1], _peak_rss(process.pid)))
            time.sleep(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, err = process.communicate()
    took = time.perf_counter() - start
    sampler.join()
    assert process.returncode in (0, 1), err
    return took, max(peaks)


def _peak_rss(pid: int) -> int:
    """The largest VmHWM among a process and its descendants."""
    peak, todo = 0, [pid]
    while todo:
        current = todo.pop()
        try:
            status = Path(f"/proc/{current}/status").read_text()
            peak = max(peak, int(status.split("VmHWM:")[1].split()[0]) * 1024)
            children = Path(f"/proc/{current}/task/{current}/children").read_text().split()
        except (OSError, IndexError):
            continue
        todo += [int(child) for child in children]
    return peak


def _change(root: Path, fraction: float, seed: int) -> int:
    """Rewrite a fraction of the outputs (one line each): what a re-grade finds changed."""
    paths = sorted((root / "subs").glob("*/*.out"))
    chosen = random.Random(seed).sample(paths, max(1, int(len(paths) * fraction)))
    for path in chosen:
        lines = path.read_text().splitlines()
        lines[0] = "Sothe" if lines[0] == "Snuke" else "Snuke"
        path.write_text("\n".join(lines) + "\n")
    return len(chosen)


def contest_rows(data: Path, quick: bool) -> list[Row]:
    """The 500-contestant contest: cold, re-graded with 1 % changed, and its reports."""
    contestants = 50 if quick else 500
    root = contest(data / f"contest-{contestants}", contestants, 5, 1000, seed=11)
    reports = data / "reports"
    reports.mkdir(exist_ok=True)
    wanted = ["--json", str(reports / "r.json"), "--junit", str(reports / "r.xml"),
              "--scoreboard", str(reports / "board.csv")]  # fmt: skip
    colds, agains, peaks = [], [], []
    for run in range(3):  # best of three, each from a fresh state
        state = fresh_state(warm=60)
        try:
            cold, peak = _grade(root, state, *wanted)
            changed = _change(root, 0.01, seed=run)
            wait_warm(state)  # the organiser comes back with the resubmissions
            again, _ = _grade(root, state, *wanted)
        finally:
            stop_warm(state)
        colds.append(cold)
        agains.append(again)
        peaks.append(peak)
    cold, again, peak = min(colds), min(agains), max(peaks)
    json_mb = (reports / "r.json").stat().st_size / 2**20
    junit_mb = (reports / "r.xml").stat().st_size / 2**20
    name = f"{contestants} contestants x 5 pathgame tests x 1000 cases"
    rss = peak / 2**20
    return [
        Row("grading", f"{name}, cold, every report", cold, None, "s", None, "<= 5 s", cold <= 5),
        Row("grading", f"{name}: peak RSS of the largest process", rss, None, "MiB", rss,
            "< 256 MiB", rss < 256),
        Row("grading", f"{name}: JSON report", json_mb, None, "MiB", json_mb, "< 10 MiB",
            json_mb < 10),
        Row("grading", f"{name}: JUnit report", junit_mb, None, "MiB", junit_mb, "< 2 MiB",
            junit_mb < 2),
        Row("grading", f"{name}: re-grade, {changed} files changed", again, cold, "s",
            again / cold, "<= 0.10x cold", again / cold <= 0.10,
            "the warm service a grading leaves runs it; report bodies of unchanged files are"
            " kept; every file is still listed and hashed, and every report rewritten"),
    ]  # fmt: skip


def _comparisons_on_cluster(root: Path, data: Path, workers: int) -> tuple[float, int]:
    """Seconds of the comparisons alone on a running cluster of `workers` processes (a cold
    grading less an unchanged re-grade, the answers known beforehand), and the peak RSS of
    the grader and of the workers."""
    with RedisServer(data / f"redis-{workers}") as redis:
        command = [sys.executable, "-m", "pipeline.cli", "worker", "--broker", redis.url,
                   "--concurrency", str(workers)]  # fmt: skip
        env = {k: v for k, v in os.environ.items() if not k.startswith("GAMEBATCH_")}
        worker = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
        try:
            on = {"GAMEBATCH_BROKER_URL": redis.url}
            nobody = data / "no-submissions"
            (nobody / "subs").mkdir(parents=True, exist_ok=True)
            (nobody / "tests").mkdir(exist_ok=True)
            for test in (root / "tests").glob("*.in"):
                (nobody / "tests" / test.name).write_bytes(test.read_bytes())
            _grade(nobody, on)  # the answers, solved and cached
            cold, peak = _grade(root, on)
            again, _ = _grade(root, on)  # nothing to compare: everything else
            return cold - again, max(peak, _peak_rss(worker.pid))
        finally:
            os.killpg(worker.pid, 9)
            worker.wait()


def large_contest(data: Path, ref: dict[str, Path] | None, quick: bool) -> list[Row]:
    """A simulated large contest (10 pathgame tests of 1,000 cases; GRADING_BENCH_CONTESTANTS
    contestants, 10,000 by default, 200 in quick mode) graded on a running cluster of one
    and of two worker processes: cases compared per second, and peak RSS of every process."""
    contestants = 200 if quick else int(os.environ.get("GRADING_BENCH_CONTESTANTS", "10000"))
    root = contest(data / f"large-{contestants}", contestants, 10, 1000, seed=12)
    cases = contestants * 10 * 1000
    rows, times = [], {}
    for workers in (1, 2):
        times[workers], peak = _comparisons_on_cluster(root, data, workers)
        rate, rss = cases / times[workers], peak / 2**20
        name = f"{contestants} x 10 x 1000 contest ({cases:.0e} verdicts), {workers} worker(s)"
        rows.append(Row("grading", f"{name}: comparisons", rate, None, "cases/s", rate, "", None))
        rows.append(Row("grading", f"{name}: peak RSS of the largest process", rss, None, "MiB",
                        rss, "< 256 MiB", rss < 256))  # fmt: skip
    speedup = times[1] / times[2]
    if ref is not None:  # what the machine gives two single-threaded copies over one
        big = write_cases(data / "ref-scale.in", "pathgame", "random", 2000 if quick else 20000,
                          size=1000, seed=3)  # fmt: skip
        machine = two_copies(ref["pathgame"], big)
        rows.append(Row("grading", "comparison rate, 2 workers over 1", speedup, machine, "x",
                        speedup / machine, ">= 0.8x what the machine gives 2 reference copies",
                        speedup / machine >= 0.8))  # fmt: skip
    return rows


def grading(data: Path, ref: dict[str, Path] | None, quick: bool) -> list[Row]:
    """Every grading figure."""
    return contest_rows(data, quick) + large_contest(data, ref, quick)
