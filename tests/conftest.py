"""Shared fixtures: a private Redis server, worker processes and the compiled reference programs."""

from __future__ import annotations

import compileall
import fcntl
import gc
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
import redis

from pipeline.children import terminate
from pipeline.local.redis_server import RedisServer
from tests.helpers import judge_first_uid

ROOT = Path(__file__).resolve().parents[1]
WARM = "GAMEBATCH_WARM_SECONDS"
FIRST_UID = "GAMEBATCH_JUDGE__FIRST_UID"
SHARED = Path(os.environ.get("REFERENCE_SHARED_DIR", ROOT.parent / "shared"))


@pytest.fixture(scope="session")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The reference C++ programs, compiled once per run (skip when impossible): the first
    pytest-xdist worker to ask compiles them, the others wait on its lock and take them."""
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # the run's folder, above each worker's own
    folder = shared / "reference"
    folder.mkdir(exist_ok=True)
    with (shared / "reference.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = folder / "built"
        if done.exists():
            return {name: folder / name for name in ("strgame", "pathgame")}
        built = compile_reference(folder)
        if built is None:
            pytest.skip("reference programs need g++ and ../shared/reference")
        done.touch()
    return built


def compile_reference(out: Path) -> dict[str, Path] | None:
    """The reference C++ programs compiled into `out`; None without g++ or their sources."""
    source = SHARED / "reference"
    compiler = shutil.which("g++")
    if compiler is None or not source.is_dir():
        return None
    built = {}
    for name in ("strgame", "pathgame"):
        binary = out / name
        subprocess.run(
            [compiler, "-O2", "-o", str(binary), str(source / f"{name}.cpp")],
            check=True,
            capture_output=True,
        )
        built[name] = binary
    return built


def run_reference(binary: Path, text: str) -> str:
    """The reference program's output for `text` (with a stack big enough for deep tries)."""
    result = subprocess.run(
        [
            "bash",
            "-c",
            'ulimit -s unlimited 2>/dev/null || ulimit -s 1048576; exec "$0"',
            str(binary),
        ],
        input=text.encode(),
        capture_output=True,
        check=True,
    )
    return result.stdout.decode()


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A Redis server of this test's own, on a free port, with a password."""
    with RedisServer(tmp_path) as server:
        yield server


@pytest.fixture
def redis_client(redis_server: RedisServer) -> redis.Redis:
    """A client of the test's own Redis."""
    return redis.Redis.from_url(redis_server.url)


class Workers:
    """Worker processes started by a test, killed at its end."""

    def __init__(self, url: str, log_dir: Path) -> None:
        self.url = url
        self.log_dir = log_dir
        self.processes: list[subprocess.Popen[bytes]] = []

    def start(
        self, concurrency: int = 1, prefix: Sequence[str] = (), **env: str
    ) -> subprocess.Popen[bytes]:
        """Start `gamebatch worker` (a supervised Celery worker), run by `prefix` (e.g. in a
        namespace of its own), and wait until it is ready."""
        log = self.log_dir / f"worker-{len(self.processes)}.log"
        command = [
            *prefix,
            sys.executable,
            "-m",
            "pipeline.cli",
            "worker",
            "--broker",
            self.url,
            "--concurrency",
            str(concurrency),
        ]
        with log.open("ab") as out:
            process = subprocess.Popen(
                command,
                stdout=out,
                stderr=out,
                start_new_session=True,
                env={**os.environ, **env},
            )
        self.processes.append(process)
        deadline = time.monotonic() + 30
        while b"ready." not in log.read_bytes():
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"worker did not start: {log.read_text()[-2000:]}")
            time.sleep(0.05)
        return process

    def stop(self) -> None:
        """Stop every worker at once: SIGKILL to each one's group, its Celery and pool
        processes with it (a warm shutdown costs a second per test, and nothing of a
        test's Redis outlives the test)."""
        for process in self.processes:
            terminate(process, 0)


@pytest.fixture
def workers(redis_server: RedisServer, tmp_path: Path) -> Iterator[Workers]:
    """Start real Celery workers on the test's Redis with `workers.start()`."""
    pool = Workers(redis_server.url, tmp_path)
    yield pool
    pool.stop()


@pytest.fixture(autouse=True)
def _collect_garbage() -> Iterator[None]:
    """Collect each test's garbage in its own teardown: what it left open warns there, not
    in whichever test the collector happens to run in next."""
    yield
    gc.collect()


@pytest.fixture(autouse=True, scope="session")
def private_state_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Keep the embedded Redis's data of the tests out of the user's state folder, and start
    no warm service (the tests of it ask for one)."""
    saved = {name: os.environ.get(name) for name in ("GAMEBATCH_STATE_DIR", WARM, FIRST_UID)}
    os.environ["GAMEBATCH_STATE_DIR"] = str(tmp_path_factory.mktemp("state"))
    os.environ[WARM] = "0"
    os.environ[FIRST_UID] = str(judge_first_uid())  # this test process's sandbox uids
    yield
    for name, previous in saved.items():
        if previous is None:
            del os.environ[name]
        else:
            os.environ[name] = previous


def pytest_configure(config: pytest.Config) -> None:
    """Write the project's bytecode once, before pytest-xdist starts its processes, as an
    installed package has it: with PYTHONDONTWRITEBYTECODE set (as on these machines), each of
    the hundreds of commands the tests start would compile its modules again (0.1-0.25 s)."""
    if not hasattr(config, "workerinput"):
        for package in ("pipeline", "workers", "tests"):
            compileall.compile_dir(ROOT / package, quiet=1)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Everything under tests/integration/ runs real servers and processes: mark it so."""
    for item in items:
        if "integration" in item.path.parts:
            item.add_marker(pytest.mark.integration)
