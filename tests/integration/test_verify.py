"""`gamebatch verify PACKAGE` on packages written here: a custom output validator that accepts
many right answers, with submissions in several languages; the default validator's float
tolerance; a planted wrong submission in accepted/; a validator that fails; invalid inputs;
and a second verify that runs nothing (every run kept by content)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from pipeline.local.redis_server import RedisServer
from tests.conftest import Workers
from tests.helpers import command_env
from tests.integration.server import Server, wait_until_ended
from tests.integration.test_judge import _tar_gz

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="the sandbox runs programs as other uids: it needs root"
)

# Any two non-negative integers that sum to n: many right answers, one in the .ans file.
CHECKER = """
import sys
n = int(open(sys.argv[1]).read())
words = sys.stdin.read().split()
ok = len(words) == 2 and all(w.isdigit() for w in words) and sum(map(int, words)) == n
if not ok:
    open(sys.argv[3] + "judgemessage.txt", "w").write(f"{words[:3]} do not sum to {n}")
sys.exit(42 if ok else 43)
"""
INPUT_VALIDATOR = """
import re, sys
text = sys.stdin.read()
sys.exit(42 if re.fullmatch(r"(0|[1-9][0-9]{0,9})\\n", text) else 1)
"""
SUM_SUBMISSIONS = {
    "accepted/half.py": "n = int(input())\nprint(n // 2, n - n // 2)\n",
    "accepted/zero.c": '#include <stdio.h>\nint main(void) { long n; scanf("%ld", &n);'
    ' printf("%ld 0\\n", n); return 0; }\n',
    "accepted/Ones.java": "import java.util.*;\npublic class Ones { public static void main("
    "String[] a) { long n = new Scanner(System.in).nextLong();"
    ' System.out.println(n > 0 ? "1 " + (n - 1) : "0 0"); } }\n',
    "wrong_answer/plus_one.py": "n = int(input())\nprint(n, 1)\n",
    "time_limit_exceeded/spin.py": "n = int(input())\nwhile n >= 0:\n    n += 1\n",
    "run_time_error/crash.cpp": "int main() { volatile int *p = nullptr; *p = 1; }\n",
}


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def _sum_package(root: Path, *, extra: dict[str, str] | None = None) -> Path:
    mark = f"# {root.name} {os.getpid()}\n"  # sources of this run's own (compiled and kept
    files = {  # by content on this machine)
        "problem.yaml": "name: Any Sum\nvalidation: custom\nlimits:\n  memory: 512\n",
        "data/sample/1.in": "4\n",
        "data/sample/1.ans": "0 4\n",
        "data/secret/big/1.in": "1000000000\n",
        "data/secret/big/1.ans": "0 1000000000\n",
        "data/secret/zero.in": "0\n",
        "data/secret/zero.ans": "0 0\n",
        "data/invalid_input/negative.in": "-5\n",
        "input_validators/check.py": INPUT_VALIDATOR + mark,
        "output_validators/sum/validate.py": CHECKER + mark,
    }
    for name, text in SUM_SUBMISSIONS.items():
        comment = mark if name.endswith(".py") else mark.replace("#", "//")
        files[f"submissions/{name}"] = text + comment
    return _write(root, {**files, **(extra or {})})


def _verify(package: Path, *more: str) -> tuple[subprocess.CompletedProcess[str], dict]:  # type: ignore[type-arg]
    report = package.parent / f"{package.name}.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pipeline.cli",
            "verify",
            "-q",
            str(package),
            "--json",
            str(report),
            "--max-time",
            "4",
            *more,
        ],
        capture_output=True,
        text=True,
        check=False,
        env=command_env(),
        timeout=600,
    )
    assert done.returncode in (0, 1), done.stdout + done.stderr
    return done, json.loads(report.read_text())


def test_a_package_with_its_own_validator_verifies_as_its_submissions_promise(
    tmp_path: Path,
) -> None:
    package = _sum_package(tmp_path / "sum")
    done, doc = _verify(package)
    assert done.returncode == 0, done.stdout + done.stderr
    verdicts = {s["name"].split("/", 1)[1]: s["verdict"] for s in doc["submissions"]}
    assert verdicts == {
        "accepted/Ones.java": "AC",  # three different right answers, one validator
        "accepted/half.py": "AC",
        "accepted/zero.c": "AC",
        "wrong_answer/plus_one.py": "WA",
        "time_limit_exceeded/spin.py": "TLE",
        "run_time_error/crash.cpp": "RTE",
    }, done.stdout
    assert all(s["as_promised"] for s in doc["submissions"])
    assert doc["time_limit"] >= 1 and doc["ok"] is True
    wrong = next(s for s in doc["submissions"] if s["verdict"] == "WA")
    assert wrong["first_failure"] == {"test": "sample/1", "message": "['4', '1'] do not sum to 4"}
    invalid = [c for c in doc["input_validation"] if c["test"] == "invalid_input/negative.in"]
    assert [c["verdict"] for c in invalid] == ["W"]  # rejected, as it must be
    assert "verified: every check passed" in done.stdout
    # again: every run is kept by content, so nothing runs and the verdicts are the same
    again, doc_again = _verify(package)
    assert again.returncode == 0
    assert doc_again["submissions"] == doc["submissions"]
    assert "verify:" not in again.stderr  # no progress: no job was queued


def test_a_wrong_accepted_submission_fails_verify_and_is_named_with_its_test(
    tmp_path: Path,
) -> None:
    planted = "n = int(input())\nprint(n + 1 if n > 100 else n, 0)\n"
    package = _sum_package(tmp_path / "sum", extra={"submissions/accepted/planted.py": planted})
    done, doc = _verify(package)
    assert done.returncode == 1, done.stdout + done.stderr
    assert doc["ok"] is False
    assert any(
        "submissions/accepted/planted.py is WA, not AC on secret/big/1" in p
        for p in doc["problems"]
    ), doc["problems"]
    assert "PROMISED AC" in done.stdout


def test_the_default_validator_takes_floats_within_the_tolerance(tmp_path: Path) -> None:
    """n / 3 within 1e-6, in any float notation, with the tolerance of problem.yaml."""
    mark = f"# {tmp_path.name} {os.getpid()}\n"
    package = _write(
        tmp_path / "third",
        {
            "problem.yaml": "name: A Third\nvalidator_flags: float_tolerance 1e-6\n",
            "data/secret/1.in": "1\n",
            "data/secret/1.ans": "0.333333333333\n",
            "data/secret/2.in": "200\n",
            "data/secret/2.ans": "66.6666666667\n",
            "submissions/accepted/nine.py": "print('%.9f' % (int(input()) / 3))\n" + mark,
            "submissions/accepted/science.c": "#include <stdio.h>\nint main(void) { double n;"
            ' scanf("%lf", &n); printf("%.8e\\n", n / 3); return 0; }\n' + mark.replace("#", "//"),
            "submissions/wrong_answer/three.py": "print('%.3f' % (int(input()) / 3))\n" + mark,
        },
    )
    done, doc = _verify(package)
    assert done.returncode == 0, done.stdout + done.stderr
    verdicts = {s["name"]: s["verdict"] for s in doc["submissions"]}
    assert verdicts == {
        "submissions/accepted/nine.py": "AC",
        "submissions/accepted/science.c": "AC",
        "submissions/wrong_answer/three.py": "WA",
    }


def test_a_failing_validator_is_a_judge_error_never_the_contestants(tmp_path: Path) -> None:
    """An output validator that crashes on one test, and an input validator that rejects a
    test: verify exits 1 naming each; the submission is not said to break its promise."""
    broken = CHECKER.replace("n = int(", "n = 1 // (int(open(sys.argv[1]).read()) - 4) or int(")
    package = _sum_package(
        tmp_path / "sum",
        extra={
            "output_validators/sum/validate.py": broken,
            "data/secret/bad.in": "007\n",
            "data/secret/bad.ans": "0 7\n",
        },
    )
    done, doc = _verify(package)
    assert done.returncode == 1
    problems = "\n".join(doc["problems"])
    assert "output_validators/sum: judge error on sample/1: the output validator" in problems
    assert "input_validators/check.py rejects secret/bad" in problems
    assert "is JE, not" not in problems, problems


@pytest.mark.parametrize("game", ["strgame", "pathgame"])
def test_an_exported_game_package_verifies_with_verdicts_per_case(
    tmp_path: Path, game: str
) -> None:
    """`gamebatch package` writes a package that verifies; a planted wrong submission is WA
    on its first wrong case, with a verdict for every case of the test."""
    package = tmp_path / game
    made = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "package", "-p", game, str(package)],
        capture_output=True, text=True, check=False, env=command_env(),
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    assert (package / "problem.yaml").is_file() and (package / "input_validators").is_dir()
    accepted = next((package / "submissions" / "accepted").iterdir())
    wrong = accepted.read_text().replace('"Pure"', '"Dirty"').replace('"Snuke"', '"Sothe"')
    _write(package, {f"submissions/wrong_answer/{game}.cpp": f"{wrong}// {tmp_path.name}\n"})
    done, doc = _verify(package)
    assert done.returncode == 0, done.stdout + done.stderr
    verdicts = {s["name"]: s for s in doc["submissions"]}
    good = verdicts[f"submissions/accepted/{game}.cpp"]
    assert good["verdict"] == "AC" and all(set(r["cases"]) == {"A"} for r in good["runs"])
    bad = verdicts[f"submissions/wrong_answer/{game}.cpp"]
    assert bad["verdict"] == "WA" and bad["as_promised"]
    (first,) = bad["runs"]  # it stopped at its first failing test, with a letter a case
    answers = (package / "data" / "sample" / "1.ans").read_text().split()
    assert first["test"] == "sample/1" and first["cases"].startswith("W")
    assert len(first["cases"]) == len(answers) and set(first["cases"]) <= {"A", "W"}
    expected = "".join("W" if word in ("Pure", "Snuke") else "A" for word in answers)
    assert first["cases"] == expected  # wrong exactly where the answer was changed
    assert any(t.startswith("secret/max") for t in doc["tests"])  # at the contest's limits
    # the same test's answers as an output file, graded case by case with no program run
    swapped = {"Pure": "Dirty", "Snuke": "Sothe"}
    changed = "\n".join(swapped.get(word, word) for word in answers) + "\n"
    _write(tmp_path, {"subs/eve/sample/1.out": changed})
    report = tmp_path / "outputs.json"
    where = ["-p", str(package), "--submissions", str(tmp_path / "subs"), "--json", str(report)]
    graded = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "grade", "-q", *where],
        capture_output=True, text=True, check=False, env=command_env(),
    )  # fmt: skip
    assert graded.returncode == 1, graded.stdout + graded.stderr
    (eve,) = json.loads(report.read_text())["contestants"]
    sample = eve["runs"][0]
    assert sample["test"] == "sample/1" and sample["cases"] == expected
    assert [r["verdict"] for r in eve["runs"][1:]] == ["W"] * (len(eve["runs"]) - 1)  # no files


TESTLIB_STUB = """#pragma once
// The few lines of testlib's interface the checker below uses (its calling convention:
// checker input output answer; exit 0 OK, 1 WA, 2 PE, 3 the checker's own failure).
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
enum TResult { _ok = 0, _wa = 1, _pe = 2, _fail = 3 };
inline void quitf(TResult result, const char *format, ...) {
  va_list args;
  va_start(args, format);
  std::vfprintf(stderr, format, args);
  va_end(args);
  std::exit(result);
}
struct InStream {
  FILE *file = nullptr;
  long long readLong() {
    long long x;
    if (std::fscanf(file, "%lld", &x) != 1) quitf(_pe, "not an integer");
    return x;
  }
};
inline InStream inf, ouf, ans;
inline void registerTestlibCmd(int argc, char *argv[]) {
  if (argc < 4) quitf(_fail, "usage: checker input output answer");
  inf.file = std::fopen(argv[1], "r");
  ouf.file = std::fopen(argv[2], "r");
  ans.file = std::fopen(argv[3], "r");
  if (!inf.file || !ouf.file || !ans.file) quitf(_fail, "cannot open its files");
}
"""
TESTLIB_CHECKER = """#include "testlib.h"
int main(int argc, char *argv[]) {
  registerTestlibCmd(argc, argv);
  long long n = inf.readLong(), a = ouf.readLong(), b = ouf.readLong();
  if (a < 0 || b < 0 || a + b != n) quitf(_wa, "%lld and %lld do not sum to %lld", a, b, n);
  quitf(_ok, "fine");
}
"""


def test_a_testlib_checker_judges_by_its_own_convention(tmp_path: Path) -> None:
    """A checker that includes testlib.h is called as Polygon calls it (input, output,
    answer; exit 0 OK, 1 WA), and what it says on standard error is the verdict's reason."""
    package = _sum_package(
        tmp_path / "sum",
        extra={
            "problem.yaml": "name: Testlib Sum\nvalidation: custom\n",
            "output_validators/sum/validate.py": "",
        },
    )
    (package / "output_validators" / "sum" / "validate.py").unlink()
    _write(package / "output_validators" / "sum", {
        "checker.cpp": TESTLIB_CHECKER + f"// {tmp_path.name}\n", "testlib.h": TESTLIB_STUB,
    })  # fmt: skip
    done, doc = _verify(package)
    assert done.returncode == 0, done.stdout + done.stderr
    wrong = next(s for s in doc["submissions"] if s["verdict"] == "WA")
    assert wrong["first_failure"] == {"test": "sample/1", "message": "4 and 1 do not sum to 4"}
    assert all(s["as_promised"] for s in doc["submissions"])


def test_contestants_programs_are_graded_by_a_packages_tests_and_validator(
    tmp_path: Path,
) -> None:
    """`grade -p PACKAGE --programs DIR`: the package's time limit (derived from its accepted
    submissions), its own validator, a verdict and a scoreboard row per contestant."""
    package = _sum_package(tmp_path / "sum")
    mark = f"# {tmp_path.name} {os.getpid()}\n"
    progs = _write(tmp_path / "progs", {
        "alice/sol.py": "n = int(input())\nprint(n, 0)\n" + mark,
        "bob/main.py": "n = int(input())\nprint(n + 1, 0)\n" + mark,
        "carol.cpp": "#include <cstdio>\nint main() { long n; scanf(\"%ld\", &n);"
        " printf(\"%ld %ld\\n\", n - n / 3, n / 3); }\n" + mark.replace("#", "//"),
    })  # fmt: skip
    report, board = tmp_path / "report.json", tmp_path / "board.csv"
    where = ["-p", str(package), "--programs", str(progs)]
    junit = tmp_path / "junit.xml"
    reports = ["--json", str(report), "--scoreboard", str(board), "--junit", str(junit)]
    command = [sys.executable, "-m", "pipeline.cli", "grade", "-q", *where, *reports]
    done = subprocess.run(command, capture_output=True, text=True, check=False, env=command_env())
    assert done.returncode == 1, done.stdout + done.stderr  # bob is wrong
    doc = json.loads(report.read_text())
    assert doc["time_limit_from"] == "derived" and doc["time_limit"] >= 1
    verdicts = {c["contestant"]: c["verdict"] for c in doc["contestants"]}
    assert verdicts == {"alice": "AC", "carol.cpp": "AC", "bob": "WA"}
    bob = next(c for c in doc["contestants"] if c["contestant"] == "bob")
    assert bob["first_failure"] == {"test": "sample/1", "message": "['5', '0'] do not sum to 4"}
    rows = board.read_text().splitlines()
    assert rows[0].startswith("rank,contestant") and rows[-1].startswith("3,bob,python,WA")
    assert "2 of 3 programs accepted" in done.stdout
    import xml.etree.ElementTree as ET

    suites = {suite.get("name"): suite for suite in ET.parse(junit).getroot()}
    assert suites["bob"].get("failures") == "1" and suites["alice"].get("failures") == "0"
    failure = suites["bob"].find("testcase/failure")
    assert failure is not None and "do not sum to 4" in (failure.get("message") or "")


def test_contestants_output_files_are_graded_by_a_packages_own_validator(
    tmp_path: Path,
) -> None:
    """`grade -p PACKAGE --submissions DIR`: output files by test path (or by a unique test
    name), judged by the package's validator on the workers; a missing file, a link and a
    file past the output limit are wrong, never followed or read."""
    package = _sum_package(tmp_path / "sum")
    subs = _write(tmp_path / "subs", {
        "alice/sample/1.out": "1 3\n",  # right, by another right answer than the .ans file's
        "alice/secret/big/1.out": "999999999 1\n",
        "alice/zero.out": "0 0\n",  # by its unique name
        "bob/sample/1.out": "2 2\n",
        "bob/secret/big/1.out": "1 1\n",
        "bob/secret/zero.out": "0 0\n",
        "carol/sample/1.out": "4 0\n",
    })  # fmt: skip
    (subs / "carol" / "secret").mkdir()
    (subs / "carol" / "secret" / "zero.out").symlink_to("/etc/passwd")
    (subs / "dave").mkdir()
    (subs / "dave" / "sample").symlink_to(subs / "alice" / "sample")  # a linked folder
    report = tmp_path / "report.json"
    command = [
        sys.executable, "-m", "pipeline.cli", "grade", "-q", "-p", str(package),
        "--submissions", str(subs), "--json", str(report),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False, env=command_env())
    assert done.returncode == 1, done.stdout + done.stderr
    doc = json.loads(report.read_text())
    assert doc["time_limit"] is None and doc["tests"] == ["sample/1", "secret/big/1", "secret/zero"]
    found = {c["contestant"]: c for c in doc["contestants"]}
    assert {name: c["verdict"] for name, c in found.items()} == {
        "alice": "AC", "bob": "WA", "carol": "WA", "dave": "WA",
    }  # fmt: skip
    assert found["bob"]["first_failure"] == {
        "test": "secret/big/1", "message": "['1', '1'] do not sum to 1000000000",
    }  # fmt: skip
    carol = [r["verdict"] for r in found["carol"]["runs"]]
    assert carol == ["A", "W", "W"]  # the linked file is no output, not /etc/passwd
    assert found["dave"]["first_failure"] == {"test": "sample/1", "message": "no output file"}
    assert "1 of 4 contestants accepted" in done.stdout
    again = subprocess.run(command, capture_output=True, text=True, check=False, env=command_env())
    assert (
        again.returncode == 1
        and json.loads(report.read_text())["contestants"] == doc["contestants"]
    )


def _through_the_api(http: httpx.Client, files: dict[str, bytes], subs: dict[str, bytes]) -> Any:
    """The package verified, then the outputs graded, by the API; the verify report."""
    bare = http.post("/v1/verifications", content=_tar_gz(subs))
    assert bare.status_code == 422 and "package/" in bare.json()["error"]
    slow = http.post("/v1/verifications", params={"max_time": "999"}, content=b"")
    assert slow.status_code == 400 and "max_time" in slow.json()["error"]
    created = http.post("/v1/verifications", content=_tar_gz(files))
    assert created.status_code == 201, created.text
    verification = created.json()["id"]
    assert created.json()["kind"] == "verification" and created.json()["problem"] == "Any Sum"
    ended = wait_until_ended(http, verification, 300, kind="verifications")
    assert ended["state"] == "done" and ended["summary"]["ok"], ended
    assert ended["summary"]["lines"][-1] == "verified: every check passed"
    doc = http.get(f"/v1/verifications/{verification}/report.json").json()
    assert doc["format"] == "gamebatch-verify" and doc["ok"]
    again = http.post("/v1/verifications", content=_tar_gz(files))
    assert again.status_code == 200 and again.json()["id"] == verification
    graded = http.post("/v1/package-gradings", content=_tar_gz({**files, **subs}))
    assert graded.status_code == 201, graded.text
    grading = graded.json()["id"]
    ended = wait_until_ended(http, grading, 120, kind="package-gradings")
    assert ended["state"] == "done" and not ended["summary"]["ok"], ended
    board = http.get(f"/v1/package-gradings/{grading}/scoreboard.csv").text
    assert board.splitlines()[1].startswith("1,alice,")
    paths = http.get("/v1/openapi.json").json()["paths"]
    assert {"/v1/verifications", "/v1/package-gradings/{grading}/{report}"} <= set(paths)
    listed = {g["id"]: g["kind"] for g in http.get("/v1/gradings").json()["gradings"]}
    assert listed[verification] == "verification"
    assert listed[grading] == "package-grading"
    return doc


def test_a_package_is_verified_and_graded_over_http(
    tmp_path: Path, redis_server: RedisServer, workers: Workers
) -> None:
    """POST /v1/verifications with the package, POST /v1/package-gradings with it and the
    contestants' output files: both run on the server's workers as records with their
    reports, the same archive is the same run, and `verify --server` and `grade -p PACKAGE
    --server` print what they print on a cluster."""
    package = _sum_package(tmp_path / "sum", extra={"problem.yaml": "name: Any Sum\n"
        "validation: custom\nlimits:\n  memory: 512\n  time_multiplier: 2\n"})  # fmt: skip
    files = {
        f"package/{p.relative_to(package).as_posix()}": p.read_bytes()
        for p in sorted(package.rglob("*"))
        if p.is_file()
    }
    subs = {"subs/alice/sample/1.out": b"2 2\n", "subs/bob/sample/1.out": b"5 0\n"}
    workers.start(concurrency=2)
    running = Server(tmp_path, redis_server.url).start()
    token = ["--server", running.url, "--token-file", str(running.dir / "token")]
    try:
        with running.client() as http:
            doc = _through_the_api(http, files, subs)
        report = tmp_path / "client.json"
        client = subprocess.run(
            [sys.executable, "-m", "pipeline.cli", "verify", "-q", str(package),
             "--json", str(report), *token],
            capture_output=True, text=True, env=command_env(), check=False, timeout=300,
        )  # fmt: skip
        assert client.returncode == 0, client.stdout + client.stderr
        assert "verified: every check passed" in client.stdout
        assert json.loads(report.read_text())["submissions"] == doc["submissions"]
        _write(tmp_path, {name: data.decode() for name, data in subs.items()})
        client = subprocess.run(
            [sys.executable, "-m", "pipeline.cli", "grade", "-q", "-p", str(package),
             "--submissions", str(tmp_path / "subs"), "--json", str(report), *token],
            capture_output=True, text=True, env=command_env(), check=False, timeout=300,
        )  # fmt: skip
    finally:
        running.stop()
    assert client.returncode == 1, client.stdout + client.stderr
    assert "0 of 2 contestants accepted" in client.stdout  # alice has the sample's only
    found = {c["contestant"]: c for c in json.loads(report.read_text())["contestants"]}
    assert [r["verdict"] for r in found["alice"]["runs"]] == ["A", "W", "W"]
    assert found["bob"]["first_failure"]["test"] == "sample/1"
