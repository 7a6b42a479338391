"""Solvers from outside the game plugin: a Python function or an external program."""

from __future__ import annotations

import importlib
import io
import shlex
import signal
import subprocess

from pipeline.children import before_exec
from pipeline.errors import UsageError
from pipeline.games.problem import Case, Problem
from pipeline.games.toolkit import Solver, in_process_solver, write_input

PROGRAM_TIMEOUT = 120.0


def function_solver(problem: Problem, spec: str) -> Solver:
    """`module:function`, a function from a case to an answer index."""
    module_name, _, attr = spec.partition(":")
    try:
        fn = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError, ValueError) as exc:
        raise UsageError(f"cannot load solver {spec!r}: {exc}") from None
    return in_process_solver(problem, fn)


def program_solver(problem: Problem, command: str) -> Solver:
    """A program that reads an input file on stdin and prints one answer per line."""
    argv = shlex.split(command)

    def solve(cases: list[Case]) -> list[str]:
        text = io.StringIO()
        write_input(problem, cases, text)
        try:
            done = subprocess.run(
                argv,
                input=text.getvalue().encode(),
                capture_output=True,
                timeout=PROGRAM_TIMEOUT,
                check=False,
                preexec_fn=before_exec(signal.SIGKILL),  # the program dies with `stress`
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise UsageError(f"cannot run {command!r}: {exc}") from None
        lines = [line.strip() for line in done.stdout.decode(errors="replace").splitlines()]
        words = [line for line in lines if line]
        if done.returncode != 0:
            words = [f"(exit status {done.returncode})"] * len(cases)
        return (words + ["(no answer)"] * len(cases))[: len(cases)]

    return solve
