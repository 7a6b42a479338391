"""Small helpers shared by the tests."""

from __future__ import annotations

import io
import random
from typing import Any

from pipeline.games.problem import Problem
from pipeline.games.reader import read_cases
from pipeline.games.tokens import TokenReader


def parse(problem: Problem, text: str | bytes, name: str = "in.txt") -> list[Any]:
    """Every case of an input text, validated."""
    data = text.encode() if isinstance(text, str) else text
    reader = TokenReader(io.BytesIO(data), name)
    return [numbered.case for numbered in read_cases(problem, reader)]


def answers(problem: Problem, text: str) -> str:
    """The result file our solver gives for an input text."""
    return "".join(problem.answers[problem.solve(c)] + "\n" for c in parse(problem, text))


def input_text(problem: Problem, cases: list[Any]) -> str:
    """An input file holding `cases`."""
    return f"{len(cases)}\n" + "".join(problem.format_case(c) for c in cases)


def random_cases(problem: Problem, shape: str, count: int, size: int, seed: int) -> list[Any]:
    """`count` generated cases."""
    rng = random.Random(seed)
    return [problem.generate(rng, shape, size) for _ in range(count)]


def judge_first_uid() -> int:
    """The first sandbox uid of this test process's runs: each pytest-xdist worker judges as
    uids of its own, so that a test that looks for a run's processes and cgroups after it
    ends never sees another worker's runs."""
    import os

    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    index = int(worker[2:]) + 1 if worker.startswith("gw") else 0
    return 61000 + 128 * index


def command_env(**extra: str) -> dict[str, str]:
    """The environment for a gamebatch subprocess: no settings from the caller's shell."""
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("GAMEBATCH_")}
    env["GAMEBATCH_STATE_DIR"] = os.environ["GAMEBATCH_STATE_DIR"]  # see conftest
    env["GAMEBATCH_JUDGE__FIRST_UID"] = os.environ["GAMEBATCH_JUDGE__FIRST_UID"]  # as well
    env["GAMEBATCH_WARM_SECONDS"] = "0"  # no warm service unless a test asks for one
    env.update(extra)
    return env


class FakeClock:
    """Seconds that pass only when a test says so."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


# What a command says while it waits for workers (pipeline.jobs.worker_watch): a test that
# queues before it starts any may see it on a busy machine, after 5 s
_WORKER_WAIT = ("gamebatch: warning: no worker has been seen", "gamebatch: warning: a worker is")


def said(stderr: str) -> list[str]:
    """A command's standard error as lines, less its notes on waiting for workers."""
    return [line for line in stderr.strip().splitlines() if not line.startswith(_WORKER_WAIT)]
