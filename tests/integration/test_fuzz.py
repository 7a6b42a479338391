"""Seeded mutations of valid files of every game, through validate, solve, --keep-going and grade.

Each run ends with exit status 0 and the reference's answers, or exit status 2 with one
`gamebatch: error:` line and no result file. FUZZ_MUTANTS sets the mutants per
game (default 40; a long run: 1000) and FUZZ_SEED the seed.
"""

from __future__ import annotations

import io
import os
import random
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline.cli import main
from pipeline.games import toolkit
from pipeline.games.problem import Problem
from pipeline.games.registry import get_problem, registry
from pipeline.local.redis_server import RedisServer
from tests.conftest import Workers, run_reference
from tests.helpers import parse

pytestmark = pytest.mark.integration

PLUGIN_DIR = Path(__file__).resolve().parents[1] / "plugin_nim"
MUTANTS = int(os.environ.get("FUZZ_MUTANTS", "40"))
SEED = int(os.environ.get("FUZZ_SEED", "1"))
INTERESTING = b"0123456789abz#.|- \n\r\t\x00\xffA+"


def _mutate(data: bytes, rng: random.Random) -> bytes:
    """One random change of a kind that careless or hostile files have."""
    lines = data.split(b"\n")
    at = rng.randrange(len(data) + 1)
    kind = rng.randrange(13)
    if kind >= 10:  # changes that often keep the file valid: they test the answers
        return _alike(data, rng, kind)
    if kind == 0:
        return data[:at] + bytes([rng.choice(INTERESTING)]) + data[at + 1 :]
    if kind == 1:
        return data[:at] + data[at + 1 :]
    if kind == 2:
        return data[:at] + bytes([rng.choice(INTERESTING)]) + data[at:]
    if kind == 3 and len(lines) > 1:
        del lines[rng.randrange(len(lines))]
    elif kind == 4:
        i = rng.randrange(len(lines))
        lines.insert(i, lines[i])
    elif kind == 5 and len(lines) > 2:
        i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
    elif kind == 6:
        return data[:at]
    elif kind == 7:
        lines[0] = rng.choice([b"0", b"-1", b"007", b"1" * 25, b"9" * 5000, b"+3", b"3.0", b""])
    elif kind == 8:
        number = rng.choice([b"99999999999999999999999", b"-5", b"0", b"1e9", b"0x10"])
        return data[:at] + b" " + number + b" " + data[at:]
    else:
        return data + rng.choice([b"junk\n", b"\x00", b"1 1\na\n", b"\xff\xfe", b" \n \n"])
    return b"\n".join(lines)


_CLASSES = (b"abcdefghijklmnopqrstuvwxyz", b"0123456789", b".#", b" \n\t\r")


def _alike(data: bytes, rng: random.Random, kind: int) -> bytes:
    """A byte swapped for one of its kind (a letter, a digit, a cell, a space), or a number
    given leading zeros, or the last cases dropped with T lowered."""
    if kind == 10 and data:
        at = rng.randrange(len(data))
        group = next((g for g in _CLASSES if data[at] in g), None)
        if group is not None:
            return data[:at] + bytes([rng.choice(group)]) + data[at + 1 :]
    if kind == 11:
        tokens = data.split(b" ")
        i = rng.randrange(len(tokens))
        if tokens[i][:1].isdigit():
            tokens[i] = b"00" + tokens[i]
        return b" ".join(tokens)
    head, _, rest = data.partition(b"\n")
    if head.isdigit() and len(head) < 10 and int(head) > 1:
        return b"%d\n" % (int(head) - 1) + rest  # now the last case is extra data
    return data


def _base_files(problem: Problem) -> list[bytes]:
    """Valid files: a few cases, and enough small ones to be read in batches."""
    files = []
    for count, size in ((5, 6), (70, 3)):
        cases = list(toolkit.generate(problem, count, SEED, "small", size))
        text = io.StringIO()
        toolkit.write_input(problem, cases, text)
        files.append(text.getvalue().encode())
    return files


def _mutants(problem: Problem) -> Iterator[bytes]:
    rng = random.Random(f"{SEED}-{problem.name}")
    bases = _base_files(problem)
    for _ in range(MUTANTS):
        data = rng.choice(bases)
        for _ in range(rng.randint(1, 3)):
            data = _mutate(data, rng)
        yield data


class Cli:
    """`gamebatch ...` run in this process (hundreds of runs cost no interpreter start)."""

    def __init__(self, capfd: pytest.CaptureFixture[str], broker: str) -> None:
        self.capfd, self.broker = capfd, broker

    def __call__(self, *args: str) -> tuple[int, str, str]:
        handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGHUP)}
        self.capfd.readouterr()
        broker = ["--broker", self.broker] if args[0] in ("solve", "grade") else []
        try:
            with pytest.MonkeyPatch.context() as patch:
                # a command of its own gives an unbuffered stdout a buffer; here that would
                # drop (and later close) the capture's own file: an unclosed-file warning
                patch.setattr("pipeline.cli._whole_writes_to_stdout", lambda: None)
                status = main([*args, *broker])
        finally:
            for sig, handler in handlers.items():
                signal.signal(sig, handler)
        out, err = self.capfd.readouterr()
        return status, out, err


def _expected(problem: Problem, text: str, reference: dict[str, Path]) -> str:
    """The answers of an independent solver: the reference program, or exhaustive search."""
    if problem.name in reference:
        return run_reference(reference[problem.name], text)
    cases = parse(problem, text)
    return "".join(problem.answers[problem.exhaustive(c)] + "\n" for c in cases)


def _one_error(status: int, err: str, what: str) -> None:
    assert status == 2, f"{what}: exit {status}\n{err}"
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("gamebatch: error: "), f"{what}:\n{err}"


@pytest.fixture
def nim_registered() -> Iterator[None]:
    sys.path.insert(0, str(PLUGIN_DIR))
    registry.cache_clear()
    yield
    sys.path.remove(str(PLUGIN_DIR))
    registry.cache_clear()


@pytest.mark.usefixtures("nim_registered")
def test_mutated_files_get_right_answers_or_one_error_line(
    tmp_path: Path,
    redis_server: RedisServer,
    workers: Workers,
    reference: dict[str, Path],
    capfd: pytest.CaptureFixture[str],
) -> None:
    pythonpath = os.pathsep.join([str(PLUGIN_DIR), os.environ.get("PYTHONPATH", "")])
    workers.start(concurrency=2, PYTHONPATH=pythonpath)
    cli = Cli(capfd, redis_server.url)
    counts = {"valid": 0, "invalid": 0}
    for game in ("strgame", "pathgame", "nim"):
        problem = get_problem(game)
        for number, data in enumerate(_mutants(problem)):
            path = tmp_path / f"{game}-{number}.in"
            path.write_bytes(data)
            what = f"{game} mutant {number}: {data[:200]!r}"
            valid = _check_mutant(cli, problem, path, what, reference)
            counts["valid" if valid else "invalid"] += 1
    print(f"fuzz: {counts['valid']} valid and {counts['invalid']} invalid mutants")
    assert counts["valid"] and counts["invalid"], counts  # both kinds were tried


def _check_mutant(
    cli: Cli, problem: Problem, path: Path, what: str, reference: dict[str, Path]
) -> bool:
    """Every command on one mutant; whether it was valid."""
    game = problem.name
    status, _, err = cli("validate", "-p", game, str(path))
    out = path.with_suffix(".out")
    submission = path.with_suffix(".sub")
    submission.write_text(f"{problem.answers[0]}\n")
    solved = cli("solve", "-q", "-p", game, str(path), "-o", str(out))
    kept = path.with_suffix(".kept")
    keep_going = cli("solve", "-q", "-p", game, str(path), "-o", str(kept), "--keep-going")
    if status != 0:
        _one_error(status, err, f"validate {what}")
        _one_error(solved[0], solved[2], f"solve {what}")
        assert not out.exists(), f"solve {what} left a result file"
        assert keep_going[0] == 2, f"solve --keep-going {what}: {keep_going}"
        assert "Traceback" not in keep_going[2]
        if kept.exists():
            words = {*problem.answers, "INVALID"}
            assert set(kept.read_text().split()) <= words, f"--keep-going {what}"
        graded = cli("grade", "-q", "-p", game, str(path), str(submission))
        _one_error(graded[0], graded[2], f"grade {what}")
        return False
    expected = _expected(problem, path.read_text(), reference)
    assert solved[0] == 0, f"solve {what}: {solved[2]}"
    assert out.read_text() == expected, f"solve {what}: wrong answers"
    assert keep_going[0] == 0 and kept.read_text() == expected, f"--keep-going {what}"
    graded = cli("grade", "-q", "-p", game, str(path), str(out))
    assert graded[0] == 0, f"grade {what}: {graded}"
    return True
