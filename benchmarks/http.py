"""Benchmarks of the HTTP service, each against `gamebatch solve` or its own target, measured
in the same run: a big file over HTTP, one-case latency with warm workers, concurrent uploads."""

from __future__ import annotations

import hashlib
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from benchmarks.common import Row, fresh_state, gamebatch, random_words, solve_in_process
from pipeline.local.redis_server import free_port


def _environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GAMEBATCH_")}
    return {**env, **fresh_state()}


@contextmanager
def _server() -> Iterator[tuple[httpx.Client, subprocess.Popen[bytes]]]:
    """`gamebatch serve` on the embedded default, fresh state, until healthy."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "pipeline.cli", "serve", "--port", str(port)],
        env=_environment(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    http = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=httpx.Timeout(60, write=None))
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if http.get("/healthz").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline and process.poll() is None, "serve did not start"
            time.sleep(0.1)
        yield http, process
    finally:
        http.close()
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(30)


def _peak_rss(pid: int) -> int:
    """The high-water mark of a process's resident memory, in bytes (0 when gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        return int(status.split("VmHWM:")[1].split()[0]) * 1024
    except (OSError, IndexError):
        return 0


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(child) for child in text.split()]


def _round_trip(http: httpx.Client, path: Path | bytes, problem: str, out: Path | None) -> bytes:
    """Upload, wait on the event feed, download: what a script with a URL does."""
    body: Any = path if isinstance(path, bytes) else _blocks(path)
    job = http.put("/v1/jobs", params={"problem": problem}, content=body).json()
    since = job["links"]["events"].split("since=")[1]
    with http.stream("GET", "/v1/events", params={"since": since, "job": job["id"]}) as events:
        for line in events.iter_lines():
            if line.startswith(("event: done", "event: failed")):
                assert line == "event: done", line
                break
    if out is None:
        return http.get(job["links"]["result"]).content
    digest = hashlib.sha256()
    with http.stream("GET", job["links"]["result"]) as response, out.open("wb") as sink:
        for block in response.iter_bytes(1 << 20):
            digest.update(block)
            sink.write(block)
    return digest.hexdigest().encode()


def _blocks(path: Path) -> Iterator[bytes]:
    with path.open("rb") as stream:
        while block := stream.read(1 << 20):
            yield block


def _big_file(data: Path, quick: bool) -> Path:
    games, width = (4, 5 * 10**6) if quick else (100, 10**7)
    return random_words(data / f"http-{games}x{width}.in", games, width, seed=8)


def big_upload(data: Path, quick: bool) -> list[Row]:
    """A big strgame file uploaded, solved and downloaded over HTTP, against `solve` of it."""
    path = _big_file(data, quick)
    scratch = Path(tempfile.mkdtemp(prefix="gamebatch-bench-http-"))
    started = time.perf_counter()
    gamebatch("solve", "-q", "-p", "strgame", str(path), "-o", str(scratch / "solve.out"),
              env=fresh_state())  # fmt: skip
    solve_time = time.perf_counter() - started
    one = scratch / "one.in"
    one.write_text("1\n1 1\na\n")
    started = time.perf_counter()
    gamebatch("solve", "-q", "-p", "strgame", str(one), "-o", os.devnull, env=fresh_state())
    startup = time.perf_counter() - started
    with _server() as (http, process):
        started = time.perf_counter()  # the client mode of the command line, as a user runs it
        gamebatch("solve", "-q", "--server", str(http.base_url).rstrip("/"), "-p", "strgame",
                  str(path), "-o", str(scratch / "http.out"))  # fmt: skip
        http_time = time.perf_counter() - started
        sha = hashlib.sha256((scratch / "http.out").read_bytes()).hexdigest().encode()
        server_rss = _peak_rss(process.pid)
        runner_rss = max((_peak_rss(child) for child in _children(process.pid)), default=0)
    expected = hashlib.sha256((scratch / "solve.out").read_bytes()).hexdigest().encode()
    assert sha == expected, "the HTTP result differs from solve's"
    size = f"{path.stat().st_size / 2**30:.2f} GiB"
    ratio = http_time / solve_time
    work = max(solve_time - startup, 1e-3)
    server_mb, runner_mb = server_rss / 2**20, runner_rss / 2**20
    return [
        Row("http", f"{size} strgame: upload + solve + download, vs gamebatch solve", http_time,
            solve_time, "s", ratio, "<= 1.2x", ratio <= 1.2,
            "the server is started beforehand; solve's time includes its start-up"),
        Row("http", f"{size} strgame over HTTP, vs solve less its one-case start-up time",
            http_time, work, "s", http_time / work, "<= 1.2x", http_time / work <= 1.2,
            f"start-up measured as {startup:.2f} s"),
        Row("http", f"peak RSS of the server process on the {size} upload", server_mb, None,
            "MiB", server_mb, "< 256 MiB", server_mb < 256),
        Row("http", f"peak RSS of a runner process (producer + collector), {size}", runner_mb,
            None, "MiB", runner_mb, "< 256 MiB", runner_mb < 256),
    ]  # fmt: skip


def one_case_latency(quick: bool) -> list[Row]:
    """One-case jobs over HTTP with warm workers: upload to result, p50 and p99."""
    count = 30 if quick else 200
    with _server() as (http, _):
        _round_trip(http, b"1\n1 1\nwarm\n", "strgame", None)
        times = []
        for i in range(count):
            body = f"1\n1 1\n{'ab' * (1 + i % 7)}{_letters(i)}\n".encode()
            started = time.perf_counter()
            _round_trip(http, body, "strgame", None)
            times.append(time.perf_counter() - started)
    times.sort()
    p50 = times[len(times) // 2] * 1000
    p99 = times[min(len(times) - 1, int(len(times) * 0.99))] * 1000
    return [
        Row("http", f"one-case job, upload to result, p50 of {count}", p50, None, "ms", p50,
            "< 50 ms", p50 < 50),
        Row("http", f"one-case job, upload to result, p99 of {count}", p99, None, "ms", p99,
            "< 200 ms", p99 < 200),
    ]  # fmt: skip


def _letters(number: int) -> str:
    """A number written in letters (so each one-case input is new)."""
    word = ""
    while True:
        number, digit = divmod(number, 26)
        word += chr(97 + digit)
        if not number:
            return word


def concurrent_uploads(quick: bool) -> list[Row]:
    """Many small uploads at once: every result must be right."""
    count = 10 if quick else 50
    scratch = Path(tempfile.mkdtemp(prefix="gamebatch-bench-http-"))
    files = []
    for i in range(count):
        rng = random.Random(i)
        pieces = ["ab", "ba", "aab", "abb", "b"]
        words = [rng.choice(pieces) * rng.randint(1, 30) for _ in range(40)]
        path = scratch / f"c{i}.in"
        path.write_text("40\n" + "".join(f"1 {i + 1}\n{w}\n" for w in words))
        files.append(path)
    with _server() as (http, _), ThreadPoolExecutor(count) as pool:
        started = time.perf_counter()
        results = list(
            pool.map(lambda p: _round_trip(http, p.read_bytes(), "strgame", None), files)
        )
        seconds = time.perf_counter() - started
    right = sum(result == solve_in_process("strgame", path) for result, path in zip(
        results, files, strict=True))  # fmt: skip
    return [
        Row("http", f"{count} concurrent small uploads, correct results", right, count, "jobs",
            right, f"{count} of {count}", right == count, f"all in {seconds:.2f} s"),
    ]  # fmt: skip


def http_service(data: Path, quick: bool) -> list[Row]:
    """Every HTTP figure."""
    return [*big_upload(data, quick), *one_case_latency(quick), *concurrent_uploads(quick)]
