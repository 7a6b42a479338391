"""Benchmarks of judging programs: the sandbox's start cost, a contest of correct C++
programs judged per case against compiling and running the same programs directly on the
whole files one by one, and the runs one faulty case costs in a batch."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import REFERENCE_SOURCES, Row, best_of, fresh_state, stop_warm, write_cases
from pipeline.config import JudgeSettings
from pipeline.judging.cases import CaseVerdict, judge_cases
from pipeline.judging.sandbox import Bind, Limits, Sandbox, shared_folder
from workers.programs import Running, run_batch


def judging(data: Path, quick: bool) -> list[Row]:
    """Every row, when this machine can judge (root, bubblewrap, cgroup v1)."""
    try:
        Sandbox().check()
    except Exception as exc:
        print(f"note: judging is skipped: {exc}")
        return []
    source = REFERENCE_SOURCES / "pathgame.cpp"
    if not source.exists() or shutil.which("g++") is None:
        print("note: judging is skipped: it judges copies of the reference pathgame program")
        return []
    return [
        *_start_cost(quick),
        *_contest(data, source, quick),
        *_faulty_case(data, quick),
        *_hack_rate(data, quick),
    ]


def _start_cost(quick: bool) -> list[Row]:
    """One empty run in the sandbox against the same run without it."""
    runs = 20 if quick else 200
    box = shared_folder("empty")
    sandbox = Sandbox()

    def sandboxed() -> None:
        for _ in range(runs):
            sandbox.run(["/bin/true"], Limits(), [Bind(box, "/box")])

    def plain() -> None:
        for _ in range(runs):
            subprocess.run(["/bin/true"], check=True)

    ours, bare = best_of(3, sandboxed) / runs, best_of(3, plain) / runs
    name = "start of one run: sandbox (bwrap, cgroups, uid) vs plain fork+exec"
    return [Row("judging", name, ours * 1000, bare * 1000, "ms", ours / bare, "report", None)]


def _contest(data: Path, source: Path, quick: bool) -> list[Row]:
    """N copies of a correct C++ program (each compiled on its own) on one pathgame test:
    `grade --programs` on the embedded default, against g++ and the binaries run directly on
    the whole file, one program after the other, on one core."""
    programs, cases = (3, 500) if quick else (100, 10**4)
    root = data / f"judge-{programs}-{cases}"
    tests = root / "tests"
    tests.mkdir(parents=True, exist_ok=True)
    test = write_cases(tests / "t1.in", "pathgame", "random", cases, size=100, seed=26)
    text = source.read_text()
    stamp = f"// {time.time_ns()}\n"  # never judged before (no compiled program, no verdict)
    progs = Path(tempfile.mkdtemp(dir=root))
    for n in range(programs):
        (progs / f"c{n:03d}").mkdir()
        (progs / f"c{n:03d}" / "main.cpp").write_text(f"{text}\n// contestant {n}\n{stamp}")
    env = fresh_state()
    start = time.perf_counter()
    command = ["grade", "-p", "pathgame", "--tests", str(tests), "--programs", str(progs)]
    judged = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", *command, "-q", "--time-limit", "10"],
        capture_output=True,
        env=env,
        check=False,
    )
    ours = time.perf_counter() - start
    stop_warm(env)
    if judged.returncode != 0:
        raise RuntimeError(f"judging failed: {judged.stderr.decode()[-2000:]}")
    direct = _direct(progs, test)
    shutil.rmtree(progs)
    cores = os.cpu_count() or 1
    total = programs * cases
    note = f"{programs} programs x {cases} cases, {cores} cores judging, direct on one"
    rate, direct_rate = total / ours / cores, total / direct
    target = "< 1 (faster than one by one)"
    return [
        Row(
            "judging",
            "contest judged per case (compile + runs)",
            ours,
            direct,
            "s",
            ours / direct,
            target,
            ours < direct,
            note,
        ),
        Row(
            "judging",
            "cases judged per second per core, against direct runs",
            rate,
            direct_rate,
            "cases/s",
            rate / direct_rate,
            "report",
            None,
            note,
        ),
    ]


def _hack_rate(data: Path, quick: bool) -> list[Row]:
    """`gamebatch hack` of a correct program (the reference strgame one) for N cases on the
    embedded default, against the same cases in one file run by the program directly: with
    the default largest size (the contest's limit), and with --largest 200 (small cases,
    where a round's fixed cost weighs most)."""
    return [*_hack_rate_at(data, quick, None), *_hack_rate_at(data, quick, 200)]


def _hack_rate_at(data: Path, quick: bool, largest: int | None) -> list[Row]:
    from pipeline.games.registry import get_problem
    from pipeline.hacking import plan

    cases = 300 if quick else 5000
    root = Path(tempfile.mkdtemp(dir=data))
    (root / "progs" / "reference").mkdir(parents=True)
    source = (REFERENCE_SOURCES / "strgame.cpp").read_text() + f"\n// {time.time_ns()}\n"
    (root / "progs" / "reference" / "main.cpp").write_text(source)
    env = fresh_state()
    command = ["hack", "-q", "-p", "strgame", "--programs", str(root / "progs"), "--seed", "9"]
    command += ["--cases", str(cases), "--budget", "900", "--json", str(root / "hack.json")]
    command += ["--out", str(root / "out")]
    command += [] if largest is None else ["--largest", str(largest)]
    done = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", *command], capture_output=True, env=env, check=False
    )
    stop_warm(env)
    if done.returncode not in (0, 1):
        raise RuntimeError(f"hack failed: {done.stderr.decode()[-2000:]}")
    (entry,) = __import__("json").loads((root / "hack.json").read_text())["contestants"]
    problem, generated = get_problem("strgame"), []
    searched = plan.largest_size(problem, largest)  # default: the contest's limit
    for found in plan.rounds(problem, 9, searched):  # the same cases, in one file
        generated += found.cases[: entry["cases_tried"] - len(generated)]
        if len(generated) >= entry["cases_tried"]:
            break
    test = root / "all.in"
    test.write_text(f"{len(generated)}\n" + "".join(problem.format_case(c) for c in generated))
    binary = root / "reference.bin"
    subprocess.run(["g++", "-O2", "-o", str(binary), str(root / "progs/reference/main.cpp")],
                   check=True)  # fmt: skip

    def direct() -> None:
        with test.open("rb") as stdin:
            subprocess.run([str(binary)], stdin=stdin, stdout=subprocess.DEVNULL, check=True)

    cores = os.cpu_count() or 1
    rate = entry["cases_tried"] / entry["seconds"] / cores
    direct_rate = len(generated) / best_of(3, direct)
    hacked = " (it was hacked: see its report)" if entry["hacked"] else ""
    note = f"{entry['cases_tried']} cases, {cores} local workers; direct: one run of them all"
    shutil.rmtree(root)
    return [
        Row(
            "judging",
            f"hack search: cases searched per second per worker, largest {searched}{hacked}",
            rate,
            direct_rate,
            "cases/s",
            rate / direct_rate,
            "report",
            None,
            note,
        )
    ]


def _direct(progs: Path, test: Path) -> float:
    """Seconds to compile every program with g++ and run each on the whole test directly."""
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as out:
        for folder in sorted(progs.iterdir()):
            binary = Path(out) / folder.name
            command = ["g++", "-std=c++17", "-O2", "-pipe", "-o", str(binary)]
            subprocess.run(
                [*command, str(folder / "main.cpp")], check=True, stderr=subprocess.DEVNULL
            )
            with test.open("rb") as stdin:
                subprocess.run([str(binary)], stdin=stdin, stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


FAULTY = r"""
#include <stdio.h>
int main() {
  int t;
  if (scanf("%d", &t) != 1) return 0;
  for (int i = 0; i < t; i++) {
    int v;
    scanf("%d", &v);
    if (v == 500) { volatile int *p = 0; *p = 1; }
    printf("%d\n", v % 2);
  }
}
"""


def _faulty_case(data: Path, quick: bool) -> list[Row]:
    """Runs (and seconds) to judge a batch of 1000 cases with one crashing case, against the
    one run a correct batch takes."""
    box = Path(tempfile.mkdtemp(dir=shared_folder("bench")))
    os.chmod(box, 0o755)
    try:
        (box / "main.c").write_text(FAULTY)
        subprocess.run(["gcc", "-O2", "-o", str(box / "main"), str(box / "main.c")], check=True)
        os.chmod(box / "main", 0o755)
        c = JudgeSettings().languages["c"]
        running = Running(Sandbox(), box, c, "main.c", Limits(cpu_seconds=1.0))
        numbers = list(range(1000))
        correct = [n if n != 500 else 502 for n in numbers]  # the crashing case left out

        def judged(values: list[int]) -> tuple[list[CaseVerdict], int, float]:
            cases = [b"%d\n" % v for v in values]
            start = time.perf_counter()
            found, runs = judge_cases(
                [str(v % 2) for v in values],
                lambda b: run_batch(running, [cases[i] for i in b]),
                batch=len(values),
            )
            return found, runs, time.perf_counter() - start

        _, good_runs, one = judged(correct)
        found, runs, faulty = judged(numbers)
    finally:
        shutil.rmtree(box)
    assert found[500].code == "R" and sum(v.code != "A" for v in found) == 1
    name = "runs for a 1000-case batch with one crashing case (vs a correct one)"
    note = f"{faulty:.2f} s against {one:.2f} s; {JudgeSettings().batch_cases} cases a batch"
    return [Row("judging", name, runs, good_runs, "runs", runs / good_runs, "report", None, note)]
