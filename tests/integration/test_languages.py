"""Every contest language judged in the sandbox: a correct strgame program in each is AC on
every case and a wrong one WA; the JVM's heap fits its limit and past it is MLE; hostile
programs in Java, Go, Rust and Node are held; a toolchain that is missing is never charged
to the contestant."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.config import JudgeSettings
from pipeline.judging.programs import UNAVAILABLE, toolchain
from tests.helpers import command_env
from tests.integration.test_judge import nothing_left

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="the sandbox runs programs as other uids: it needs root"
)
PROGRAMS = Path(__file__).resolve().parents[1] / "programs"
LANGUAGES = JudgeSettings().languages
# each language's correct strgame program (pypy3 is told by a shebang, CPython is the default)
SOURCES = {
    "java": "Strgame.java",
    "kotlin": "strgame.kt",
    "rust": "strgame.rs",
    "go": "strgame.go",
    "javascript": "strgame.js",
    "csharp": "strgame.cs",
    "python": "strgame.py",
    "pypy3": "strgame.py",
}
# wrong twins (the answers swapped) of one program of each kind of runtime: a JVM, a native
# binary, an interpreter (every language's output is read alike; compiling costs the suite)
WRONG_TOO = ("java", "rust", "javascript", "pypy3")


def _missing(*names: str) -> list[str]:
    return [n for n in names if toolchain(LANGUAGES[n].version).startswith(UNAVAILABLE)]


def _needs(*names: str) -> pytest.MarkDecorator:
    missing = _missing(*names)
    packages = " ".join(LANGUAGES[n].package for n in missing)
    return pytest.mark.skipif(bool(missing), reason=f"apt-get install {packages} (.ci/run does)")


def _grade(root: Path, *more: str) -> tuple[subprocess.CompletedProcess[str], dict]:  # type: ignore[type-arg]
    report = root / "report.json"
    where = ["--tests", str(root / "tests"), "--programs", str(root / "progs")]
    command = ["grade", "-q", "-p", "strgame", *where, "--json", str(report), "--time-limit", "2"]
    done = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", *command, *more],
        capture_output=True,
        text=True,
        check=False,
        env=command_env(),
        timeout=600,
    )
    assert done.returncode in (0, 1), done.stderr
    return done, json.loads(report.read_text())


def _verdicts(doc: dict) -> dict[str, str]:  # type: ignore[type-arg]
    return {s["contestant"]: s["verdicts"] for s in doc["submissions"]}


def _swapped(source: str) -> str:
    """The program with its two answers swapped: wrong on every case."""
    return source.replace("Pure", "\0").replace("Dirty", "Pure").replace("\0", "Dirty")


@_needs(*SOURCES)
def test_every_language_is_judged_case_by_case(tmp_path: Path) -> None:
    """A correct program in each language is AC on every case, a wrong twin WA on every
    case; the report names each program's language and toolchain."""
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "mixed.in").write_text(
        "5\n2 3\na\nb\n1 2\nab\n3 1\na\nb\nc\n2 1000000000\nab\nb\n1 999999999\nabc\n"
    )
    mark = f"{tmp_path.name} {os.getpid()}"  # sources of this run's own (the machine keeps
    for language, name in SOURCES.items():  # what it compiled, and verdicts, by content)
        source = (PROGRAMS / "strgame" / name).read_text()
        if language == "pypy3":
            source = "#!/usr/bin/env pypy3\n" + source
        comment = "#" if name.endswith(".py") else "//"
        kinds = [("good", source)] + [("bad", _swapped(source))] * (language in WRONG_TOO)
        for kind, text in kinds:
            folder = tmp_path / "progs" / f"{language}-{kind}"
            folder.mkdir(parents=True)
            target = "main.java" if language == "java" else name  # holds `public class Strgame`
            (folder / target).write_text(f"{text}\n{comment} {mark}\n")
    done, doc = _grade(tmp_path)
    assert done.returncode == 1, done.stderr  # the bad ones
    verdicts = _verdicts(doc)
    for language in SOURCES:
        assert verdicts[f"{language}-good"] == "AAAAA", (language, done.stderr)
    for language in WRONG_TOO:
        assert verdicts[f"{language}-bad"] == "WWWWW", (language, done.stderr)
    made = {p["contestant"]: p for p in doc["programs"]}
    assert made["pypy3-good"]["language"] == "Python 3 (PyPy)"
    assert made["python-good"]["language"] == "Python 3"
    assert "PyPy" in made["pypy3-good"]["toolchain"]
    assert made["java-good"]["toolchain"].startswith("javac ")


@_needs("java")
def test_a_java_heap_fits_its_limit_and_past_it_is_mle(tmp_path: Path) -> None:
    """60 MB of live heap under a 256 MB limit is AC; a gigabyte is MLE (the JVM's own
    OutOfMemoryError, not an RE)."""
    tests, progs = tmp_path / "tests", tmp_path / "progs"
    tests.mkdir()
    progs.mkdir()
    (tests / "one.in").write_text("2\n1 1\na\n1 3\nb\n")
    heap = (PROGRAMS / "hostile" / "Heap.java").read_text() + f"// {tmp_path.name}\n"
    (progs / "Heap.java").write_text(heap)
    (progs / "Huge.java").write_text(
        heap.replace("class Heap", "class Huge").replace("MEGABYTES = 60", "MEGABYTES = 1024")
    )
    done, doc = _grade(tmp_path, "--memory-limit", "256")
    assert _verdicts(doc) == {"Heap.java": "AA", "Huge.java": "LL"}, done.stderr
    nothing_left()


@_needs("java", "go", "rust", "javascript")
def test_hostile_programs_in_every_runtime_are_held(tmp_path: Path) -> None:
    """Each program answers Pure only when every escape it tries fails: files outside the
    box, writes into it, the machine's network, io_uring through Go's syscall package,
    processes started from the JVM, Node and Rust, and a thread bomb. Nothing they start
    outlives the run."""
    tests, progs = tmp_path / "tests", tmp_path / "progs"
    tests.mkdir()
    progs.mkdir()
    (tests / "pure.in").write_text("3\n1 1\na\n1 1\nb\n1 3\nc\n")
    names = ["Escape.java", "ThreadBomb.java", "uring.go", "sockets.js", "outside.rs"]
    for name in names:
        comment = f"// {tmp_path.name} {os.getpid()}\n"
        (progs / name).write_text((PROGRAMS / "hostile" / name).read_text() + comment)
    done, doc = _grade(tmp_path)
    assert _verdicts(doc) == dict.fromkeys(names, "AAA"), done.stderr
    nothing_left()


def test_a_missing_toolchain_is_not_charged_to_the_contestant(tmp_path: Path) -> None:
    """A language whose toolchain is not on this machine: its programs are listed as not
    judged (no CE), a Python 2 program likewise, and the others are judged as usual."""
    tests, progs = tmp_path / "tests", tmp_path / "progs"
    tests.mkdir()
    (tests / "one.in").write_text("1\n1 1\na\n")
    for name, text in {
        "absent/main.zz": "whatever",
        "old/main.py": "#!/usr/bin/env python2\nprint 'Pure'\n",
        "fine/main.py": f"print('Pure')  # {tmp_path.name}\n",
    }.items():
        (progs / name).parent.mkdir(parents=True)
        (progs / name).write_text(text)
    config = tmp_path / "config.yaml"
    config.write_text(
        "judge:\n  languages:\n"
        "    zz: {extensions: [.zz], compile: [], run: [/nonexistent/zz, '{file}'],"
        " version: [/nonexistent/zz, --version], name: Zed, package: zed-lang}\n"
        "    python: {extensions: [.py], compile: [], run: [/usr/bin/python3, '{file}'],"
        " version: [/usr/bin/python3, --version]}\n"
    )
    done, doc = _grade(tmp_path, "--config", str(config))
    assert done.returncode == 0, done.stderr
    assert _verdicts(doc) == {"fine": "A"}
    assert "absent: not judged: no Zed here (" in done.stderr, done.stderr
    assert "apt-get install zed-lang" in done.stderr
    assert "old: Python 2 (its first line says so) is not judged here" in done.stderr
