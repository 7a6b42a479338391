"""`gamebatch hack` on real workers and the sandbox: programs with planted bugs (wrong past a
width, crashing on one shape, endless on one width, over the memory on one width) are each
hacked with a one-case input on which they really fail; a correct one is not."""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import redis

from pipeline.games.reader import read_cases
from pipeline.games.registry import get_problem
from pipeline.games.strgame import words_of
from pipeline.games.tokens import TokenReader
from pipeline.local.redis_server import RedisServer
from tests.conftest import Workers, run_reference
from tests.helpers import command_env
from tests.integration.server import Server, wait_until_ended
from tests.integration.test_judge import GOOD, _tar_gz

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="the sandbox runs programs as other uids: it needs root"
)
STRGAME = get_problem("strgame")
LEAVES = (
    "int leaves = 0; for (auto &v : next) { bool leaf = true;"
    " for (int c : v) if (c >= 0) leaf = false; leaves += leaf; }"
)
FAULTS = {
    "good": "",
    "wide": "if (n > 6) pure = !pure;",  # wrong past a width
    "chain": f"{{ {LEAVES} if (n >= 3 && leaves == 1) {{ volatile int *p = nullptr; *p = 1; }} }}",
    "endless": "if (n == 7) { volatile long x = 0; for (;;) x++; }",
    "hungry": "if (n == 5) { vector<char> big(512 << 20, 1); if (big[99] == 2) pure = !pure; }",
}


def _programs(root: Path) -> Path:
    mark = f"// {root.name} {os.getpid()}\n"  # this run's own sources (verdicts are kept)
    for name, fault in FAULTS.items():
        (root / "progs" / name).mkdir(parents=True)
        (root / "progs" / name / "main.cpp").write_text(GOOD.replace("// FAULT", fault) + mark)
    return root / "progs"


def _package(root: Path) -> Path:
    """A problem package whose tests the wide program fails (8 strings) and the others pass."""
    sample, secret = root / "pkg/data/sample", root / "pkg/data/secret/big"
    sample.mkdir(parents=True)
    secret.mkdir(parents=True)
    (sample / "1.in").write_text("2\n1 1\nab\n2 3\nab\nb\n")
    (sample / "1.ans").write_text("Dirty\nPure\n")
    (secret / "1.in").write_text("1\n8 1\n" + "".join(f"{c}\n" for c in "abcdefgh"))
    (secret / "1.ans").write_text("Pure\n")
    return root / "pkg"


def _command(root: Path, out: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "pipeline.cli", "hack", "-q", "-p", "strgame",
            "--programs", str(root / "progs"), "--out", str(root / out),
            "--json", str(root / f"{out}.json"), "--seed", "3", "--budget", "110",
            "--time-limit", "1", "--memory-limit", "128", *extra]  # fmt: skip


def _read(root: Path, out: str) -> dict[str, Any]:
    doc = json.loads((root / f"{out}.json").read_text())
    return {e["contestant"]: e for e in doc["contestants"]}


def _hack(root: Path, out: str, *extra: str) -> tuple[int, dict[str, Any], str]:
    done = subprocess.run(
        _command(root, out, "--cases", "1500", *extra),
        capture_output=True, text=True, env=command_env(), check=False, timeout=300,
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, _read(root, out), done.stdout


def _only_words(path: Path) -> list[str]:
    """The strings of a one-case input."""
    with path.open("rb") as stream:
        (numbered,) = list(read_cases(STRGAME, TokenReader(stream, str(path))))
    return list(words_of(numbered.case))


def _leaves(words: list[str]) -> int:
    return sum(not any(o != w and o.startswith(w) for o in words) for w in set(words))


def _compiled(folder: Path, name: str) -> Path:
    binary = folder / f"{name}.bin"
    source = folder / "progs" / name / "main.cpp"
    subprocess.run(["g++", "-O2", "-o", str(binary), str(source)], check=True)
    return binary


def test_planted_bugs_are_hacked_with_one_case_inputs_they_really_fail(
    tmp_path: Path, reference: dict[str, Path]
) -> None:
    _programs(tmp_path)
    status, screened, text = _hack(tmp_path, "screened", "--tests", str(_package(tmp_path)))
    assert status == 1, text
    assert screened["wide"]["skipped"] == "fails test secret/big/1 (WA on case 1)"
    assert not screened["good"]["hacked"] and screened["good"]["cases_tried"] == 1500
    assert {n: screened[n].get("verdict") for n in ("chain", "endless", "hungry")} == {
        "chain": "RE",
        "endless": "TLE",
        "hungry": "MLE",
    }
    assert "3 of 5 programs hacked" in text

    status, hacks, text = _hack(tmp_path, "all")
    assert status == 1 and "4 of 5 programs hacked" in text
    assert hacks["wide"]["verdict"] == "WA" and not hacks["good"]["hacked"]
    for name in ("chain", "endless", "hungry"):  # the same seed and cases: the same search
        assert {**hacks[name], "seconds": 0} == {**screened[name], "seconds": 0}
    out = tmp_path / "all"
    for name in ("wide", "chain", "endless", "hungry"):
        words = _only_words(out / f"{name}.in")
        truth = run_reference(reference["strgame"], (out / f"{name}.in").read_text())
        assert (out / f"{name}.ans").read_text() == truth == f"{hacks[name]['expected']}\n"
        assert hacks[name]["input"] == (out / f"{name}.in").read_text()
        planted = {
            "wide": len(words) > 6,
            "chain": len(words) >= 3 and _leaves(words) == 1,
            "endless": len(words) == 7,
            "hungry": len(words) == 5,
        }
        assert planted[name], words
    # each really fails on its input, run directly
    wide = _compiled(tmp_path, "wide")
    ran = subprocess.run([str(wide)], input=(out / "wide.in").read_text(), capture_output=True,
                         text=True, check=False)  # fmt: skip
    assert ran.stdout.strip() == hacks["wide"]["found"] != hacks["wide"]["expected"]
    chain = _compiled(tmp_path, "chain")
    crashed = subprocess.run([str(chain)], input=(out / "chain.in").read_bytes(),
                             capture_output=True, check=False)  # fmt: skip
    assert crashed.returncode < 0
    endless = _compiled(tmp_path, "endless")
    with pytest.raises(subprocess.TimeoutExpired):
        subprocess.run([str(endless)], input=(out / "endless.in").read_bytes(),
                       capture_output=True, check=False, timeout=3)  # fmt: skip
    together = (out / "hacks.in").read_text()
    assert together.startswith("4\n")
    assert run_reference(reference["strgame"], together) == (out / "hacks.ans").read_text()


def test_a_worker_killed_during_a_search_loses_nothing(
    tmp_path: Path, redis_server: RedisServer, workers: Workers
) -> None:
    """One of two workers killed while the search runs: its chunks are leased again, and the
    search ends as a search that lost nothing (the same report, read from kept verdicts)."""
    progs = _programs(tmp_path)
    for name in ("endless", "hungry"):  # the three others are enough here
        shutil.rmtree(progs / name)
    short = {"GAMEBATCH_LEASE_SECONDS": "2", "GAMEBATCH_STALL_SECONDS": "3"}
    doomed = workers.start(concurrency=1, **short)
    workers.start(concurrency=1, **short)
    broker = ["--broker", redis_server.url, "--cases", "800"]
    search = subprocess.Popen(
        _command(tmp_path, "killed", *broker), env=command_env(**short),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    client = redis.Redis.from_url(redis_server.url)
    deadline = time.monotonic() + 60
    while len(list(client.scan_iter(match="gb:job:judge.*"))) < 3:  # some rounds judged
        assert time.monotonic() < deadline and search.poll() is None, search.stderr
        time.sleep(0.05)
    os.killpg(doomed.pid, signal.SIGKILL)  # a worker host lost in the middle of a round
    _, err = search.communicate(timeout=240)
    assert search.returncode == 1, err
    killed = _read(tmp_path, "killed")
    assert killed["wide"]["verdict"] == "WA" and killed["chain"]["verdict"] == "RE"
    assert not killed["good"]["hacked"] and killed["good"]["cases_tried"] == 800
    again = subprocess.run(
        _command(tmp_path, "again", *broker), env=command_env(**short),
        capture_output=True, text=True, check=False, timeout=240,
    )  # fmt: skip
    assert again.returncode == 1, again.stderr
    calm = _read(tmp_path, "again")
    assert {n: {**e, "seconds": 0} for n, e in killed.items()} == {
        n: {**e, "seconds": 0} for n, e in calm.items()
    }
    assert (tmp_path / "killed" / "hacks.in").read_text() == (
        tmp_path / "again" / "hacks.in"
    ).read_text()


def test_a_hack_search_over_http(
    tmp_path: Path, redis_server: RedisServer, workers: Workers
) -> None:
    """POST /v1/hacks with an archive of programs: the search runs on the server's workers,
    its state, report and counterexamples are resources, and the same archive is the same
    search."""
    mark = f"// {tmp_path.name} {os.getpid()} http\n"
    files = {
        f"progs/{name}/main.cpp": (GOOD.replace("// FAULT", FAULTS[name]) + mark).encode()
        for name in ("good", "wide")
    }
    workers.start(concurrency=2)
    running = Server(tmp_path, redis_server.url).start()
    try:
        with running.client() as http:
            params = {"problem": "strgame", "cases": "400", "time_limit": "1", "seed": "3"}
            bad = http.post("/v1/hacks", params={**params, "cases": "0"}, content=_tar_gz(files))
            assert bad.status_code == 400 and "cases" in bad.json()["error"]
            none = http.post("/v1/hacks", params=params, content=_tar_gz({"tests/t.in": b"1\n"}))
            assert none.status_code == 422 and "progs/" in none.json()["error"]
            created = http.post("/v1/hacks", params=params, content=_tar_gz(files))
            assert created.status_code == 201, created.text
            search = created.json()["id"]
            assert search.startswith("hack.strgame-") and created.json()["kind"] == "hack"
            ended = wait_until_ended(http, search, kind="hacks")
            assert ended["state"] == "done", ended
            assert ended["summary"] == {"programs": 2, "hacked": 1}
            report = http.get(f"/v1/hacks/{search}/report.json").json()
            together = http.get(f"/v1/hacks/{search}/hacks.in").text
            again = http.post("/v1/hacks", params=params, content=_tar_gz(files))
            assert again.status_code == 200 and again.json()["id"] == search
            listed = http.get("/v1/gradings").json()["gradings"]
            assert any(g["id"] == search and g["kind"] == "hack" for g in listed)
        for name, data in files.items():  # the same programs, from the command line
            (tmp_path / "client" / name).parent.mkdir(parents=True)
            (tmp_path / "client" / name).write_bytes(data)
        client = subprocess.run(
            [sys.executable, "-m", "pipeline.cli", "hack", "-p", "strgame",
             "--programs", str(tmp_path / "client" / "progs"), "--cases", "400",
             "--time-limit", "1", "--seed", "3", "--out", str(tmp_path / "client" / "out"),
             "--json", str(tmp_path / "client.json"), "--server", running.url,
             "--token-file", str(running.dir / "token")],
            capture_output=True, text=True, env=command_env(), check=False, timeout=120,
        )  # fmt: skip
    finally:
        running.stop()
    assert client.returncode == 1, client.stderr
    assert "wide  HACKED WA" in client.stdout and "1 of 2 programs hacked" in client.stdout
    sent = json.loads((tmp_path / "client.json").read_text())  # another archive, the same
    for doc in (sent, report):  # search (its verdicts kept): the same report but the times
        for entry in doc["contestants"]:
            entry["seconds"] = 0
    assert sent == report
    assert (tmp_path / "client" / "out" / "hacks.in").read_text() == (
        tmp_path / "client" / "out" / "wide.in"
    ).read_text()
    found = {e["contestant"]: e for e in report["contestants"]}
    assert found["wide"]["verdict"] == "WA" and not found["good"]["hacked"]
    assert together == found["wide"]["input"] and together.startswith("1\n")
    assert len(_only_words_of(together)) > 6


def _only_words_of(text: str) -> list[str]:
    (numbered,) = list(read_cases(STRGAME, TokenReader(io.BytesIO(text.encode()), "<hack>")))
    return list(words_of(numbered.case))


def test_a_bug_near_the_contests_own_cases_is_hacked_by_their_mutants(tmp_path: Path) -> None:
    """Wrong only where a word of the tests ("gamebatch", which no generator makes) stands
    beside another: the tests have it alone, so only their mutants reach the bug."""
    source = (
        GOOD.replace("string word;", "string word; int marked = 0;")
        .replace("cin >> word;", 'cin >> word; marked += word == "gamebatch";')
        .replace("// FAULT", "if (marked && n >= 2) pure = !pure;")
    )
    (tmp_path / "progs" / "near").mkdir(parents=True)
    (tmp_path / "progs" / "near" / "main.cpp").write_text(source + f"// {tmp_path.name}\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "t1.in").write_text("3\n1 1\ngamebatch\n2 2\nab\nb\n1 3\nzz\n")
    status, found, text = _hack(tmp_path, "near", "--tests", str(tmp_path / "tests"))
    assert status == 1 and found["near"]["verdict"] == "WA", text
    words = _only_words(tmp_path / "near" / "near.in")
    assert "gamebatch" in words and len(words) >= 2
    assert found["near"]["cases_tried"] > 16 * 7  # after the generated small rounds
