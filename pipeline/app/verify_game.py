"""A package of one of gamebatch's games (its gamebatch.yaml names the game): its submissions
judged as `grade --programs` judges them, a verdict for every case of every multi-case test,
each test's verdict its first failing case's."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import yaml

from pipeline.app.cluster import Cluster
from pipeline.app.judge import Judgment, judge_on
from pipeline.games.problem import Problem
from pipeline.games.registry import find_problem
from pipeline.grading.rules import Test
from pipeline.grading.verdicts import FileVerdicts
from pipeline.judging.programs import Program
from pipeline.packages.outcomes import Run
from pipeline.packages.package import Package, PackageProgram
from pipeline.progress import ProgressBar

MARKER = "gamebatch.yaml"
# a case's letter as a test's: a wrong, missing or extra answer is a wrong answer
_AS_TEST = {"P": "W", "M": "W"}


def game_of(pkg: Package) -> Problem | None:
    """The game a package names in its gamebatch.yaml (None: none, or not one of ours)."""
    path = pkg.root / MARKER
    if not path.is_file():
        return None
    try:
        doc = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError):
        return None
    return find_problem(str(doc.get("game", ""))) if isinstance(doc, dict) else None


def single_file(program: PackageProgram) -> bool:
    """Whether a program is one source file (what judging by case takes)."""
    return not program.not_judged and len(program.files) == 1


def judged(
    c: Cluster,
    pkg: Package,
    game: Problem,
    programs: list[PackageProgram],
    seconds: float,
    progress: ProgressBar,
    *,
    stop: bool,
) -> dict[str, list[Run]]:
    """Each program's runs, test by test; with `stop`, a program's tests stop at its first
    failing one, and each test at its first failing case (the rest are not run)."""
    judge = c.settings.judge.replaced(
        time_limit=seconds,
        memory_limit_mb=pkg.limits.memory_mb,
        output_limit_mb=pkg.limits.output_mb,
    )
    on = dataclasses.replace(c, settings=c.settings.replaced(judge=judge))
    found: dict[str, list[Run]] = {p.name: [] for p in programs}
    left = {p.name: _program(p) for p in programs}
    tests = [Test(t.name, t.input, t.answer) for t in pkg.tests]
    how = Judgment(game, lazy=stop)
    for batch in [[t] for t in tests] if stop else [tests]:
        if not left:
            break
        run = judge_on(on, how, batch, list(left.values()), progress)
        for sub, verdicts in run.graded():
            if verdicts is None:
                continue
            made = _run(sub.test, verdicts)
            found[sub.contestant].append(made)
            if stop and made.letter != "A":
                left.pop(sub.contestant, None)
    return found


def _program(program: PackageProgram) -> Program:
    ((_, path),) = program.files
    return Program(program.name, Path(path), program.language)


def _run(test: str, verdicts: FileVerdicts) -> Run:
    """A test's run from its cases' verdicts: its first failing case's letter and what was
    found there, the CPU time of its cases, and every case's letter."""
    codes = verdicts.codes
    failing = next((i for i, code in enumerate(codes) if code not in ("A", "N")), None)
    seconds = sum(us for us, _ in verdicts.usage) / 1e6
    if failing is None:
        if verdicts.extra is None:
            return Run(test, "A", seconds, "", codes)
        return Run(test, "W", seconds, f"more lines than cases: {verdicts.extra[0]!r}", codes)
    shown = dict(verdicts.shown).get(failing + 1)
    letter = _AS_TEST.get(codes[failing], codes[failing])
    said = f"case {failing + 1}" + (f": {shown}" if shown else "")
    return Run(test, letter, seconds, said, codes)
