"""A built-in game written out as a problem package (the legacy Kattis format, which DOMjudge
and Kattis import): problem.yaml with the contest's limits, the statement's examples as
data/sample, generated tests up to the limits (max tests too) as data/secret, an input
validator, the reference solution in submissions/accepted, and hacks where asked."""

from __future__ import annotations

import random
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path

from pipeline.errors import UsageError
from pipeline.games.problem import Case, Problem, limits_of
from pipeline.games.reader import read_cases
from pipeline.games.tokens import TokenReader
from pipeline.packages.package import GAME_FILE

# per game: problem.en.tex, validate.py, solution.cpp
TEMPLATES = Path(__file__).with_name("templates")
# the statement's examples (docs/games.md), as tests
SAMPLES = {
    "strgame": ["2\n2 3\na\nb\n1 2\nab\n", "1\n3 1\na\nb\nc\n"],
    "pathgame": [
        "5\n#.. ...\n# .\n..... ..#..\n.#... .....\n"
        ".....#..#........##....... ..........#..........#....\n"
    ],
}
CASES_PER_TEST = 10  # strgame's contest allows T <= 10; pathgame's files are as many
SIZES = (1, 2, 3, 5, 8, 16, 100, 1000)  # generated tests at each size, every shape


@dataclass(frozen=True)
class Export:
    """What `gamebatch package` writes."""

    game: Problem
    out: Path
    seed: int = 1
    hacks: Path | None = None  # a hack search's output folder: its hacks.in joins the tests


def export(request: Export) -> list[str]:
    """Write the package (into a new or empty folder); the files written, relative."""
    game, out = request.game, request.out
    templates = TEMPLATES / game.name
    if not templates.is_dir() or game.name not in SAMPLES:
        raise UsageError(f"{game.name} has no package template (only strgame and pathgame)")
    if out.exists() and any(out.iterdir()):
        raise UsageError(f"{out} is not empty: a package is written into a new folder")
    written: list[str] = []

    def write(name: str, text: str) -> None:
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(text)
        written.append(name)

    write("problem.yaml", _problem_yaml(game))
    write(GAME_FILE, f"# the game gamebatch judges this package's tests as\ngame: {game.name}\n")
    for n, text in enumerate(SAMPLES[game.name], 1):
        cases = _cases(game, text)
        write(f"data/sample/{n}.in", text)
        write(f"data/sample/{n}.ans", _answers(game, cases))
    for name, cases in _secret(game, request.seed):
        write(f"data/secret/{name}.in", _input(game, cases))
        write(f"data/secret/{name}.ans", _answers(game, cases))
    if request.hacks is not None:
        found = request.hacks / "hacks.in"
        if not found.is_file():
            raise UsageError(f"{found} does not exist: run `gamebatch hack --out` first")
        cases = _cases(game, found.read_text())
        for start in range(0, len(cases), CASES_PER_TEST):
            part = cases[start : start + CASES_PER_TEST]
            write(f"data/secret/hacks/{start // CASES_PER_TEST + 1:03}.in", _input(game, part))
            write(f"data/secret/hacks/{start // CASES_PER_TEST + 1:03}.ans", _answers(game, part))
    for source, target in (
        ("problem.en.tex", "problem_statement/problem.en.tex"),
        ("validate.py", "input_validators/validate.py"),
        ("solution.cpp", f"submissions/accepted/{game.name}.cpp"),
    ):
        (out / target).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(templates / source, out / target)
        written.append(target)
    return written


def _problem_yaml(game: Problem) -> str:
    return (
        f"name: {game.name}\n"
        f"uuid: {uuid.uuid5(uuid.NAMESPACE_URL, f'gamebatch:{game.name}')}\n"
        "source: gamebatch\n"
        "license: unknown\n"
        "# the default validator compares the answers word by word\n"
        "validation: default\n"
        "limits:\n"
        "  memory: 256  # MiB\n"
        "  output: 8  # MiB\n"
        "  # the time limit is the slowest accepted run times time_multiplier (5)\n"
    )


def _secret(game: Problem, seed: int) -> list[tuple[str, list[Case]]]:
    """Tests of every shape at growing sizes, then the max tests at the contest's limits."""
    rng = random.Random(f"package/{game.name}/{seed}")
    limits = limits_of(game)
    largest = limits.limit_size if limits is not None else SIZES[-1]
    tests = []
    for size in (s for s in SIZES if s <= largest):
        cases = [game.generate(rng, shape, size) for shape in game.shapes]
        cases = [c for c in cases if not game.contest_limits(c)]
        for part in range(0, len(cases), CASES_PER_TEST):
            tests.append(
                (f"{size:06}-{part // CASES_PER_TEST + 1}", cases[part : part + CASES_PER_TEST])
            )
    if limits is not None:
        biggest = limits.max_tests(rng)
        for part in range(0, len(biggest), CASES_PER_TEST):
            tests.append(
                (f"max-{part // CASES_PER_TEST + 1}", biggest[part : part + CASES_PER_TEST])
            )
    return tests


def _cases(game: Problem, text: str) -> list[Case]:
    import io

    return [n.case for n in read_cases(game, TokenReader(io.BytesIO(text.encode()), "sample"))]


def _input(game: Problem, cases: list[Case]) -> str:
    return f"{len(cases)}\n" + "".join(game.format_case(c) for c in cases)


def _answers(game: Problem, cases: list[Case]) -> str:
    return "".join(game.answers[game.solve(c)] + "\n" for c in cases)
