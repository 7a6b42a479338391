"""Grading runs: bulk contests with a scoreboard, reports and the answers cache."""

from __future__ import annotations

import csv
import json
import os
import random
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import redis

from pipeline.app.verdict_job import KEPT_SECONDS as COMPARE_KEPT_SECONDS
from pipeline.children import terminate
from pipeline.games.registry import get_problem
from pipeline.local.redis_server import RedisServer
from tests.conftest import Workers
from tests.helpers import answers, command_env, input_text, parse, random_cases


def gamebatch(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pipeline.cli", *args],
        capture_output=True,
        text=True,
        env=command_env(),
        timeout=180,
        check=False,
    )


@pytest.mark.integration
def test_bulk_grading_scoreboard_reports_and_cache(tmp_path: Path) -> None:
    problem = get_problem("strgame")
    tests, subs = tmp_path / "tests", tmp_path / "subs"
    tests.mkdir()
    expected = {}
    for i, shape in enumerate(("random", "wide", "chain"), 1):
        text = input_text(problem, random_cases(problem, shape, 30, 60, seed=i))
        (tests / f"0{i}.in").write_text(text)
        expected[f"0{i}"] = answers(problem, text)
    (tests / "03.ans").write_text(expected["03"])  # official answers for one test
    perfect, sloppy, lazy = subs / "perfect", subs / "sloppy", subs / "lazy"
    for folder in (perfect, sloppy, lazy):
        folder.mkdir(parents=True)
    for name, text in expected.items():
        (perfect / f"{name}.out").write_text(text)
        lines = text.splitlines()
        lines[4] = "Dirty" if lines[4] == "Pure" else "Pure"  # case 5: WA
        lines[7] = lines[7].upper()  # case 8: PE
        (sloppy / f"{name}.out").write_text("\n".join(lines) + "\n")
    (lazy / "01.out").write_text(expected["01"])  # nothing for 02 and 03: all MISSING

    args = ["grade", "-p", "strgame", "--tests", str(tests), "--submissions", str(subs)]
    reports = ["--json", str(tmp_path / "r1.json"), "--junit", str(tmp_path / "r.xml")]
    first = gamebatch(*args, "--scoreboard", str(tmp_path / "board.csv"), *reports)
    assert (first.returncode, first.stderr) == (1, ""), "wrong cases: exit status 1"
    rows = list(csv.DictReader((tmp_path / "board.csv").read_text().splitlines()))
    assert [(r["contestant"], r["accepted"]) for r in rows] == [
        ("perfect", "90"),
        ("sloppy", "84"),
        ("lazy", "30"),
    ]
    assert rows[1]["01"] == "28" and rows[0]["rank"] == "1"

    report = json.loads((tmp_path / "r1.json").read_text())
    assert report["version"] == 2
    assert {a["test"]: a["source"] for a in report["answers"]} == {
        "01": "solved",
        "02": "solved",
        "03": "file",
    }
    by_path = {s["path"]: s for s in report["submissions"]}
    sloppy01 = by_path["sloppy/01.out"]
    assert (sloppy01["accepted"], sloppy01["total"], sloppy01["score"]) == (28, 30, 28.0)
    assert sloppy01["verdicts"] == "A" * 4 + "W" + "AA" + "P" + "A" * 22
    shown = sloppy01["mismatches"]
    assert [(c["index"], c["verdict"]) for c in shown] == [(5, "WA"), (8, "PE")]
    assert shown[1]["found"] == expected["01"].splitlines()[7].upper() and shown[0]["input"]
    assert by_path["lazy/02.out"]["verdicts"] == "M" * 30
    assert by_path["lazy/02.out"]["more_mismatches"] == 20  # 10 kept with what was found
    assert "sloppy/01.out: 28/30 accepted" in first.stdout
    assert "case 5: WA, expected" in first.stdout and "input: " in first.stdout

    _check_junit_per_file(tmp_path / "r.xml")

    second = gamebatch(
        *args,
        "--json",
        str(tmp_path / "r2.json"),
        "--report-version",
        "1",
        "--junit",
        str(tmp_path / "cases.xml"),
        "--junit-cases",
    )
    assert (second.returncode, second.stderr) == (1, "")
    again = json.loads((tmp_path / "r2.json").read_text())
    assert {a["test"]: a["source"] for a in again["answers"]} == {
        "01": "cache",
        "02": "cache",
        "03": "file",
    }
    _check_version_1_and_cases(again, tmp_path / "cases.xml")
    unchanged = gamebatch("diff", str(tmp_path / "r1.json"), str(tmp_path / "r2.json"))
    assert unchanged.returncode == 0 and unchanged.stdout.strip() == "no verdict changed"

    (sloppy / "01.out").write_text(expected["01"])  # the contestant fixed case 5 and 8
    gamebatch(*args, "--json", str(tmp_path / "r3.json"))
    changed = gamebatch("diff", str(tmp_path / "r1.json"), str(tmp_path / "r3.json"))
    assert changed.returncode == 1
    assert changed.stdout.splitlines() == [
        "sloppy/01.out: case 5: WA -> AC",
        "sloppy/01.out: case 8: PE -> AC",
    ]


def _check_junit_per_file(path: Path) -> None:
    """One testcase per submission file; a failure lists the wrong cases."""
    suites = ET.parse(path).getroot().findall("testsuite")
    assert len(suites) == 9 and all(len(s.findall("testcase")) == 1 for s in suites)
    failures = [f.get("message", "") for s in suites for f in s.findall("testcase/failure")]
    assert len(failures) == 5  # sloppy's three files, lazy's two missing ones
    assert "2 of 30 cases wrong: case 5 WA: expected" in sorted(failures)[0]
    assert any("found end of file" in message for message in failures)


def _check_version_1_and_cases(again: dict[str, Any], cases_xml: Path) -> None:
    """The reports of today's consumers: every case an object, a JUnit testcase per case."""
    assert again["version"] == 1
    old_style = {s["path"]: s for s in again["submissions"]}
    wrong = [c for c in old_style["sloppy/01.out"]["cases"] if c["verdict"] != "AC"]
    assert [(c["index"], c["verdict"]) for c in wrong] == [(5, "WA"), (8, "PE")]
    assert {c["verdict"] for c in old_style["lazy/02.out"]["cases"]} == {"MISSING"}
    suites = ET.parse(cases_xml).getroot().findall("testsuite")
    assert len(suites) == 9 and all(len(s.findall("testcase")) == 30 for s in suites)
    assert sum(len(s.findall("testcase/failure")) for s in suites) == 2 * 3 + 2 * 30


@pytest.mark.integration
def test_single_input_with_official_answers_and_scoring(tmp_path: Path) -> None:
    (tmp_path / "t.in").write_text("3\n1 1\na\n1 2\na\n1 1\nab\n")
    (tmp_path / "t.ans").write_text("Pure\nDirty\nDirty\n")
    (tmp_path / "a.out").write_text("Pure\nDirty\nPure\n")
    (tmp_path / "s.yaml").write_text(
        "groups:\n  - {name: one, points: 30, cases: '1-2'}\n  - {name: all, points: 70}\n"
    )
    files = [str(tmp_path / "t.in"), str(tmp_path / "a.out")]
    result = gamebatch(
        "grade",
        "-p",
        "strgame",
        *files,
        "--answers",
        str(tmp_path / "t.ans"),
        "--scoring",
        str(tmp_path / "s.yaml"),
    )
    assert (result.returncode, result.stderr) == (1, "")
    assert f"{tmp_path / 'a.out'}: 2/3 accepted, score 30/100" in result.stdout
    bad = tmp_path / "bad.ans"
    bad.write_text("Pure\n\nMaybe\nDirty\n")
    refused = gamebatch("grade", "-p", "strgame", *files, "--answers", str(bad))
    assert refused.returncode == 2 and f"{bad}:3: case 2: 'Maybe' is not" in refused.stderr
    for short in ("Pure\nDirty\n", "Pure\nDirty\nDirty\nPure\n"):  # one too few, too many
        bad.write_text(short)
        refused = gamebatch("grade", "-p", "strgame", *files, "--answers", str(bad))
        assert refused.returncode == 2, refused.stdout
        assert "answers for the 3 cases of its test" in refused.stderr, refused.stderr


def _contest(root: Path, contestants: int, cases: int, seed: int = 1) -> tuple[Path, Path]:
    """Two strgame tests and `contestants` folders of outputs, some with wrong lines."""
    problem = get_problem("strgame")
    rng = random.Random(seed)
    tests, subs = root / "tests", root / "subs"
    tests.mkdir()
    for i, t in enumerate(("t1", "t2")):
        text = input_text(problem, random_cases(problem, "random", cases, 40, seed=seed + i))
        (tests / f"{t}.in").write_text(text)
        right = answers(problem, text).splitlines()
        for n in range(contestants):
            folder = subs / f"c{n:03d}"
            folder.mkdir(parents=True, exist_ok=True)
            lines = [w if rng.random() < 0.9 else rng.choice(problem.answers) for w in right]
            (folder / f"{t}.out").write_text("\n".join(lines) + "\n")
    return tests, subs


def _verdict_keys(url: str) -> set[bytes]:
    return set(redis.Redis.from_url(url).scan_iter("gb:verdicts:*", count=1000))


@pytest.mark.integration
def test_gradings_of_the_same_files_at_once_share_their_comparison(
    tmp_path: Path, redis_server: RedisServer, workers: Workers
) -> None:
    """Two gradings whose comparison job is the same one, run at the same time: the first
    to gather its verdicts leaves the job to the other, and both get every verdict."""
    tests, subs = _contest(tmp_path, contestants=20, cases=50)
    workers.start(concurrency=2)
    (tmp_path / "workers.yaml").write_text("chunk:\n  local_cases: 0\n  max_cases: 25\n")
    base = [
        sys.executable,
        "-m",
        "pipeline.cli",
        "grade",
        "-q",
        "-p",
        "strgame",
        "--tests",
        str(tests),
        "--submissions",
        str(subs),
        "--broker",
        redis_server.url,
        "--config",
        str(tmp_path / "workers.yaml"),
    ]
    for round_ in range(3):
        reports = [tmp_path / f"r{round_}-{i}.json" for i in range(2)]
        pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True}
        commands = [
            subprocess.Popen([*base, "--json", str(report)], env=command_env(), **pipes)
            for report in reports
        ]
        for command in commands:
            _, err = command.communicate(timeout=240)
            assert command.returncode == 1 and "error" not in err, err  # wrong answers only
        first, second = (report.read_text() for report in reports)
        assert json.loads(first)["submissions"] == json.loads(second)["submissions"]
        redis.Redis.from_url(redis_server.url).delete(*_verdict_keys(redis_server.url))


@pytest.mark.integration
def test_a_regrade_compares_only_the_changed_files(
    tmp_path: Path, redis_server: RedisServer, workers: Workers
) -> None:
    tests, subs = _contest(tmp_path, contestants=30, cases=50)
    worker = workers.start(concurrency=2)
    args = [
        "grade",
        "-q",
        "-p",
        "strgame",
        "--tests",
        str(tests),
        "--submissions",
        str(subs),
        "--broker",
        redis_server.url,
        "--config",
        str(tmp_path / "workers.yaml"),
    ]
    (tmp_path / "workers.yaml").write_text("chunk:\n  local_cases: 0\n")  # all on the workers
    first = gamebatch(*args, "--json", str(tmp_path / "r1.json"))
    assert first.returncode == 1, first.stderr

    def ran() -> int:  # chunks the worker ran so far, once its log has settled
        count, still = -1, 0.0
        while still < 0.5:
            now = (tmp_path / "worker-0.log").read_bytes().count(b"succeeded")
            still = still + 0.1 if now == count else 0.0
            count = now
            time.sleep(0.1)
        return count

    before = ran()
    stored = _verdict_keys(redis_server.url)
    contents = {(p.name, p.read_bytes()) for p in subs.glob("*/*.out")}
    assert len(stored) == len(contents) > 50  # one per file (equal files share theirs)
    client = redis.Redis.from_url(redis_server.url)
    kept = [client.ttl(k) for k in client.keys("gb:job:compare.*")]  # only for a while
    assert kept and all(0 < t <= COMPARE_KEPT_SECONDS for t in kept), kept
    changed = subs / "c007" / "t2.out"
    changed.write_text((tests / "t2.in").read_text().splitlines()[0] + "\n")  # a wrong answer
    second = gamebatch(*args, "--json", str(tmp_path / "r2.json"))
    assert second.returncode == 1, second.stderr
    new = _verdict_keys(redis_server.url) - stored
    assert len(new) == 1  # the other 59 files' verdicts came from Redis
    assert ran() - before == 1  # one comparison chunk: the answers were cached, so were the rest
    diff = gamebatch("diff", str(tmp_path / "r1.json"), str(tmp_path / "r2.json"))
    assert diff.returncode == 1 and diff.stdout
    assert {line.split(":")[0] for line in diff.stdout.splitlines()} == {"c007/t2.out"}
    before = ran()
    third = gamebatch(*args, "--json", str(tmp_path / "r3.json"))  # nothing changed
    assert third.returncode == 1 and _verdict_keys(redis_server.url) - stored == new
    assert ran() == before
    assert _same_but_sources(tmp_path / "r3.json", tmp_path / "r2.json")
    terminate(worker, 5)  # a small re-grade needs no worker: `grade` compares it itself
    changed.write_text((tests / "t2.in").read_text().splitlines()[0] * 2 + "\n")
    local = gamebatch(*args[:-2], "--json", str(tmp_path / "r4.json"))
    assert local.returncode == 1, local.stderr
    fourth = json.loads((tmp_path / "r4.json").read_text())
    (redone,) = [s for s in fourth["submissions"] if s["path"] == "c007/t2.out"]
    assert redone["verdicts"] == "W" + "M" * 49 and len(_verdict_keys(redis_server.url)) == 2 + len(
        stored
    )


@pytest.mark.integration
def test_kept_report_bodies_give_what_rendering_afresh_gives(
    tmp_path: Path, redis_server: RedisServer, workers: Workers
) -> None:
    problem = get_problem("strgame")
    tests, subs = _contest(tmp_path, contestants=8, cases=30)
    workers.start()
    client = redis.Redis.from_url(redis_server.url)
    scoring = tmp_path / "scoring.yaml"

    def grade(name: str, *extra: str) -> list[bytes]:
        """Every output of a grading: its text, its JSON (less where the answers came
        from), its JUnit and its scoreboard."""
        out = [str(tmp_path / f"{name}.{ext}") for ext in ("json", "xml", "csv")]
        done = gamebatch(
            "grade",
            "-p",
            "strgame",
            "--tests",
            str(tests),
            "--submissions",
            str(subs),
            "--broker",
            redis_server.url,
            "--json",
            out[0],
            "--junit",
            out[1],
            "--scoreboard",
            out[2],
            *extra,
        )
        assert done.returncode == 1, done.stderr
        report = json.loads(Path(out[0]).read_text())
        report.pop("answers")
        return [
            done.stdout.encode(),
            json.dumps(report).encode(),
            *(Path(p).read_bytes() for p in out[1:]),
        ]

    def afresh(name: str, *extra: str) -> list[bytes]:
        for key in client.scan_iter("gb:bodies:*"):
            client.delete(key)
        return grade(name, *extra)

    first = grade("first")
    kept = list(client.scan_iter("gb:bodies:*"))
    assert len(kept) == len(_verdict_keys(redis_server.url)) > 10  # one per distinct file
    assert grade("again") == first
    for key in kept:  # what the next grading shows of each file comes from its kept body
        client.set(key, client.get(key).replace(b" accepted, score ", b" accepted,  score "))
    marked = grade("marked")[0].decode().splitlines()
    assert sum(" accepted,  score " in line for line in marked) == len(list(subs.glob("*/*")))

    # new rules, a changed file, a test input whose answers stay but whose text changes:
    # bodies kept from before are not used where they would differ
    scoring.write_text(
        "groups:\n  - {name: t1, points: 40, tests: [t1]}\n"
        "  - {name: t2, points: 60, tests: [t2]}\n"
    )
    assert grade("rules", "--scoring", str(scoring)) == afresh("rules", "--scoring", str(scoring))
    assert grade("before") == first  # the bodies of the first rules, kept again
    (subs / "c003" / "t1.out").write_text("Pure\n" * 31)
    cases = [
        (k, " ".join(reversed(words.split())))
        for k, words in parse(problem, (tests / "t1.in").read_text())
    ]
    (tests / "t1.in").write_text(input_text(problem, cases))
    changed = grade("changed")
    assert changed == afresh("changed") != first


def _same_but_sources(a: Path, b: Path) -> bool:
    first, second = json.loads(a.read_text()), json.loads(b.read_text())
    first.pop("answers"), second.pop("answers")
    return bool(first == second)


@pytest.mark.integration
def test_keep_going_grades_the_valid_tests_and_marks_the_invalid_one(tmp_path: Path) -> None:
    tests, subs = _contest(tmp_path, contestants=2, cases=10)
    (tests / "t2.in").write_text("2\n1 1\na\n1 2\n")  # case 2 is cut short
    args = ["grade", "-p", "strgame", "--tests", str(tests), "--submissions", str(subs)]
    refused = gamebatch(*args)
    assert refused.returncode == 2 and "t2.in" in refused.stderr and "case 2" in refused.stderr
    assert len(refused.stderr.splitlines()) == 1 and not refused.stdout
    kept = gamebatch(
        *args,
        "--keep-going",
        "--json",
        str(tmp_path / "r.json"),
        "--junit",
        str(tmp_path / "r.xml"),
    )
    assert kept.returncode == 2, kept.stderr
    assert "c000/t1.out: " in kept.stdout and "accepted" in kept.stdout
    assert "c000/t2.out: not graded: " in kept.stdout and "case 2" in kept.stdout
    assert "error: test t2 not graded: " in kept.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert [t["test"] for t in report["invalid_tests"]] == ["t2"]
    marked = [s for s in report["submissions"] if s["test"] == "t2"]
    assert len(marked) == 2 and all(s["error"].startswith("not graded: ") for s in marked)
    assert all("verdicts" in s for s in report["submissions"] if s["test"] == "t1")
    failures = ET.parse(tmp_path / "r.xml").getroot().findall("testsuite/testcase/failure")
    assert sum("not graded" in f.get("message", "") for f in failures) == 2


@pytest.mark.integration
def test_a_worker_killed_mid_grading_gives_the_identical_report(
    tmp_path: Path, redis_server: RedisServer, workers: Workers
) -> None:
    tests, subs = _contest(tmp_path, contestants=40, cases=60)
    base = ["grade", "-q", "-p", "strgame", "--tests", str(tests), "--submissions", str(subs)]
    clean = gamebatch(*base, "--json", str(tmp_path / "clean.json"))  # embedded, no faults
    assert clean.returncode == 1, clean.stderr
    fast = {
        "GAMEBATCH_CHUNK__MAX_CASES": "1",
        "GAMEBATCH_LEASE_SECONDS": "2",
        "GAMEBATCH_STALL_SECONDS": "3",
    }
    first = workers.start(concurrency=2, **fast)
    grade = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pipeline.cli",
            *base,
            "--broker",
            redis_server.url,
            "--json",
            str(tmp_path / "faulted.json"),
        ],
        env=command_env(**fast),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    client = redis.Redis.from_url(redis_server.url, decode_responses=True)
    deadline = time.monotonic() + 120
    while True:  # until a fifth of the comparison chunks are done
        assert grade.poll() is None and time.monotonic() < deadline, "no comparison progress"
        jobs = [j for j in client.zrange("gb:jobs", 0, -1) if j.startswith("compare.")]
        if jobs and int(client.hget(f"gb:job:{jobs[0]}", "done_cases") or 0) >= 960:
            break
        time.sleep(0.02)
    os.killpg(first.pid, signal.SIGKILL)  # the worker and its pool, like a machine lost
    workers.start(concurrency=2, **fast)
    _, err = grade.communicate(timeout=240)
    assert grade.returncode == 1, err
    assert _same_but_sources(tmp_path / "clean.json", tmp_path / "faulted.json")


@pytest.mark.parametrize(
    ("doc", "words"),
    [
        ('{"version": 2, "submissions": [1]}', "submission 1 is not an object with a path"),
        (
            '{"version": 1, "submissions": [{"path": "a", "cases": [1]}]}',
            "submission 1 has cases of another",
        ),
        ('{"version": 2, "submissions": {"a": 1}}', "it has no list of submissions"),
        (
            '{"version": 2, "submissions": [{"path": "a", "verdicts": "AZ"}]}',
            "submission 1 has unknown",
        ),
    ],
)
def test_diff_of_a_malformed_report_is_one_line(tmp_path: Path, doc: str, words: str) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(doc)
    result = gamebatch("diff", str(bad), str(bad))
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert f"{bad} is not a grading report: {words}" in result.stderr
