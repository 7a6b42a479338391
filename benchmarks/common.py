"""What the benchmark groups share: the Row, inputs, reference runs, commands, timings, CPU."""

from __future__ import annotations

import compileall
import contextlib
import io
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import count as counter
from pathlib import Path

import redis

from pipeline.games import toolkit
from pipeline.games.reader import read_cases
from pipeline.games.registry import get_problem
from pipeline.games.tokens import TokenReader

ROOT = Path(__file__).resolve().parents[1]
REFERENCE_SOURCES = (
    Path(os.environ.get("REFERENCE_SHARED_DIR", ROOT.parent / "shared")) / "reference"
)


@dataclass
class Row:
    """One figure: our time (or value) against a baseline measured in the same run."""

    group: str
    name: str
    ours: float
    baseline: float | None
    unit: str
    ratio: float | None  # ours / baseline for times (lower is better), or the figure itself
    target: str
    met: bool | None
    note: str = ""


# --- timings and the reference programs ------------------------------------------------------


def best_of(runs: int, fn: Callable[[], object]) -> float:
    """The fastest of `runs` wall-clock timings."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def compile_reference(out: Path) -> dict[str, Path] | None:
    """The reference programs, or None without g++ or sources."""
    compiler = shutil.which("g++")
    if compiler is None or not REFERENCE_SOURCES.is_dir():
        return None
    built = {}
    for name in ("strgame", "pathgame"):
        binary = out / f"ref-{name}"
        subprocess.run([compiler, "-O2", "-o", str(binary), str(REFERENCE_SOURCES / f"{name}.cpp")],
                       check=True, capture_output=True)  # fmt: skip
        built[name] = binary
    return built


def run_reference(binary: Path, path: Path) -> bytes:
    """The reference's output on one file (with the stack its recursion needs)."""
    return subprocess.run(
        ["bash", "-c", 'ulimit -s unlimited 2>/dev/null; exec "$0" < "$1"', str(binary), str(path)],
        check=True, capture_output=True,
    ).stdout  # fmt: skip


def two_copies(binary: Path, path: Path) -> float:
    """What the machine gives two single-threaded copies of a program over one, now."""

    def timed(fn: Callable[[], object]) -> float:
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start

    one = min(timed(lambda: run_reference(binary, path)) for _ in range(3))
    with ThreadPoolExecutor(2) as pool:
        two = min(timed(lambda: list(pool.map(lambda _: run_reference(binary, path), range(2))))
                  for _ in range(3))  # fmt: skip
    return 2 * one / two


# --- inputs (kept between runs: generation is deterministic) ---------------------------------


def write_cases(path: Path, game: str, shape: str, count: int, *, size: int, seed: int) -> Path:
    """A generated input file (kept between runs: generation is deterministic)."""
    if not path.exists():
        problem = get_problem(game)
        text = io.StringIO()
        toolkit.write_input(
            problem, list(toolkit.generate(problem, count, seed, shape, size)), text
        )
        path.write_text(text.getvalue())
    return path


def random_words(path: Path, games: int, width: int, *, seed: int) -> Path:
    """A strgame file of one long random a/b word per game (kept between runs)."""
    if not path.exists():
        rng = random.Random(seed)
        table = bytes.maketrans(bytes(range(256)), b"ab" * 128)
        with path.open("wb") as out:
            out.write(f"{games}\n".encode())
            for _ in range(games):
                out.write(b"1 1\n" + rng.randbytes(width).translate(table) + b"\n")
    return path


_LETTERS = bytes.maketrans(bytes(range(256)), (b"abcdefghijklmnopqrstuvwxyz" * 10)[:256])


def random_word_games(path: Path, games: int, letters: int, *, seed: int) -> Path:
    """strgame: `games` games of random words (1-12 letters of a-z), `letters` in all each
    (kept between runs)."""
    if not path.exists():
        rng = random.Random(seed)
        with path.open("wb") as out:
            out.write(f"{games}\n".encode())
            for _ in range(games):
                raw = rng.randbytes(letters).translate(_LETTERS)
                words, pos = [], 0
                while pos < letters:
                    words.append(raw[pos : pos + rng.randint(1, 12)])
                    pos += len(words[-1])
                out.write(f"{len(words)} {rng.randint(1, 10)}\n".encode() + b"\n".join(words))
                out.write(b"\n")
    return path


def wide_boards(path: Path, boards: int, width: int, *, seed: int) -> Path:
    """pathgame: `boards` boards of `width` columns, a black cell in one column of 750."""
    if not path.exists():
        rng = random.Random(seed)
        with path.open("wb") as out:
            out.write(f"{boards}\n".encode())
            for _ in range(boards):
                rows = [bytearray(b"." * width), bytearray(b"." * width)]
                for column in rng.sample(range(0, width, 3), width // 750):
                    rows[rng.randrange(2)][column] = ord("#")
                out.write(bytes(rows[0]) + b" " + bytes(rows[1]) + b"\n")
    return path


def tiny_boards(path: Path, count: int, *, seed: int) -> Path:
    """pathgame: `count` boards of 1-8 columns (kept between runs)."""
    if not path.exists():
        rng = random.Random(seed)
        cells = [b".", b".", b".", b"#"]
        with path.open("wb") as out:
            out.write(f"{count}\n".encode())
            for _ in range(count):
                width = rng.randint(1, 8)
                top = bytearray(b"".join(rng.choices(cells, k=width)))
                bottom = bytearray(b"." * width)
                for i in range(width):  # a black below where the top is white, now and then
                    ok = top[i] == ord(".") and (i == 0 or top[i - 1] == ord("."))
                    ok = ok and (i + 1 == width or top[i + 1] == ord("."))
                    if ok and rng.random() < 0.2:
                        bottom[i] = ord("#")
                out.write(bytes(top) + b" " + bytes(bottom) + b"\n")
    return path


# --- solving: in process, and by the real command line ---------------------------------------


def solve_in_process(game: str, path: Path) -> bytes:
    """Read, validate and solve a file in this process: the solver alone, no pipeline."""
    problem = get_problem(game)  # its tables are prepared before the timings
    with path.open("rb") as stream:
        cases = read_cases(problem, TokenReader(stream, str(path)))
        return "".join(problem.answers[problem.solve(c.case)] + "\n" for c in cases).encode()


def gamebatch(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    """Run the real command line."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("GAMEBATCH_")}
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", "pipeline.launch", *args], env=full,
                          check=True, capture_output=True)  # fmt: skip


def solve_tree(game: str, path: Path, env: dict[str, str], out: Path) -> tuple[float, float]:
    """`gamebatch solve` of one file: seconds, and the peak RSS (MiB) of the largest process
    of its tree (the command, its Redis and its workers)."""
    probe = (
        "import resource, subprocess, sys, time\n"
        "start = time.perf_counter()\n"
        "subprocess.run(sys.argv[1:], check=True)\n"
        "took = time.perf_counter() - start\n"
        "print(took, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    )
    full = {k: v for k, v in os.environ.items() if not k.startswith("GAMEBATCH_")}
    full.update(env)
    done = subprocess.run(
        [sys.executable, "-c", probe, sys.executable, "-m", "pipeline.launch", "solve", "-q",
         "-p", game, str(path), "-o", str(out)], env=full, check=True, capture_output=True,
        text=True,
    )  # fmt: skip
    took, peak = done.stdout.split()
    return float(took), int(peak) / 1024


def compile_bytecode() -> None:
    """Write the project's bytecode, as `pip install` does for an installed package: run from
    the source tree with PYTHONDONTWRITEBYTECODE set (as on these machines), every command
    would compile its modules again at start (about 0.1-0.25 s)."""
    for package in ("pipeline", "workers", "benchmarks", "tests"):
        compileall.compile_dir(ROOT / package, quiet=1)


# --- state folders and the warm service ------------------------------------------------------


def fresh_state(warm: int = 0) -> dict[str, str]:
    """An embedded Redis with nothing cached (and, with `warm`, a warm service left after
    each command for that many idle seconds: stop it with `stop_warm`)."""
    return {"GAMEBATCH_STATE_DIR": tempfile.mkdtemp(prefix="gamebatch-bench-"),
            "GAMEBATCH_WARM_SECONDS": str(warm)}  # fmt: skip


def wait_warm(env: dict[str, str]) -> None:
    """Wait until the state folder's warm service listens (a user coming back later)."""
    sock = Path(env["GAMEBATCH_STATE_DIR"]) / "warm.sock"
    deadline = time.monotonic() + 30
    while not sock.exists():
        assert time.monotonic() < deadline, "no warm service started"
        time.sleep(0.02)


def stop_warm(env: dict[str, str]) -> None:
    """Stop the state folder's warm service (and its Redis) and wait until it is gone."""
    log = Path(env["GAMEBATCH_STATE_DIR"]) / "warm.log"
    text = log.read_text() if log.exists() else ""
    for pid in {int(p) for p in re.findall(r"warm service (\d+): serving", text)}:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 30
            while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
                if Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z":
                    break
                time.sleep(0.02)


# --- CPU used: by Redis, by a process tree ---------------------------------------------------

_TICK = os.sysconf("SC_CLK_TCK")


def cpu_of_tree(pid: int) -> float:
    """CPU seconds (user and system) used so far by a process and its live descendants."""
    total, todo = 0.0, [pid]
    while todo:
        current = todo.pop()
        try:
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / _TICK
            kids = Path(f"/proc/{current}/task/{current}/children").read_text().split()
        except (OSError, IndexError):
            continue
        todo += [int(kid) for kid in kids]
    return total


def idle_rate(pid: int) -> float:
    """CPU seconds per second the worker uses doing nothing (heartbeats, the sweep)."""
    first = cpu_of_tree(pid)
    time.sleep(1.0)
    return max(cpu_of_tree(pid) - first, 0.0) / 1.0


def redis_cpu(client: redis.Redis) -> float:
    """CPU seconds the Redis has used since it started."""
    info = client.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


# --- slow hosts: cgroup v1 CPU quotas --------------------------------------------------------

CPU_CGROUPS = Path("/sys/fs/cgroup/cpu")  # cgroup v1's cpu controller
SHARE = 0.1  # of a core, per worker host
PERIOD_US = 100_000
_NAMES = counter()  # each use of quotas names its groups afresh


def throttled_worker(env: dict[str, str], group: Path) -> subprocess.Popen[bytes]:
    """`gamebatch worker` of one pool process, in `group` with everything it starts."""
    procs = str(group / "cgroup.procs")

    def enter() -> None:
        Path(procs).write_text(str(os.getpid()))

    return subprocess.Popen(
        [sys.executable, "-m", "pipeline.cli", "worker", "--concurrency", "1"],
        env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True, preexec_fn=enter,  # noqa: PLW1509
    )  # fmt: skip


@contextlib.contextmanager
def quotas(count: int, share: float) -> Iterator[list[Path]]:
    """`count` cpu cgroups of `share` of a core each, removed afterwards (once the processes
    killed in them are gone)."""
    base = f"gamebatch-bench-{os.getpid()}-{next(_NAMES)}"
    groups = [CPU_CGROUPS / f"{base}-{i}" for i in range(count)]
    try:
        for group in groups:
            group.mkdir()
            (group / "cpu.cfs_period_us").write_text(str(PERIOD_US))
            (group / "cpu.cfs_quota_us").write_text(str(int(PERIOD_US * share)))
        yield groups
    finally:
        deadline = time.monotonic() + 10
        for group in groups:
            while group.exists():
                try:
                    group.rmdir()
                except OSError:  # busy while a killed process of it is still ending
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)


def quotas_work() -> bool:
    """Whether this process may make cpu cgroups with quotas here."""
    try:
        with quotas(1, SHARE):
            return True
    except OSError:
        return False
