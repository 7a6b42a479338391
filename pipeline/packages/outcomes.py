"""What verify concludes from a package's runs: each submission's verdict and score, its test
groups aggregated as the format's default grader aggregates them (on_reject, grader_flags,
accept_score and reject_score), and whether its folder's promise holds (no I/O here)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from pipeline.packages.package import Group

NAMES = {
    "A": "AC",
    "W": "WA",
    "T": "TLE",
    "L": "RTE",
    "O": "OLE",
    "R": "RTE",
    "C": "CE",
    "J": "JE",
}  # the format counts a memory-limit overrun as a run-time error
PROMISED = {
    "accepted": "AC",
    "partially_accepted": "AC",  # with less than the full score
    "wrong_answer": "WA",
    "time_limit_exceeded": "TLE",
    "run_time_error": "RTE",
}
_WORST_FIRST = ["JE", "CE", "RTE", "TLE", "OLE", "WA", "AC"]  # the default grader's order
_SCORES: dict[str, Callable[[list[float]], float]] = {
    "sum": sum,
    "min": min,
    "max": max,
    "avg": lambda scores: sum(scores) / len(scores),
}


@dataclass(frozen=True)
class Run:
    """One submission's run on one test."""

    test: str
    letter: str
    seconds: float
    message: str = ""
    cases: str = ""  # a game's test: every case's letter

    def as_json(self) -> dict[str, object]:
        """The run as reports give it."""
        shown: dict[str, object] = {"test": self.test, "verdict": self.letter}
        return shown | {"seconds": self.seconds} | ({"cases": self.cases} if self.cases else {})


@dataclass(frozen=True)
class Outcome:
    """A submission's verdict and score, its first failing run (None: none failed), and its
    longest run."""

    verdict: str
    score: float
    failed: Run | None
    slowest: float

    def failure_json(self) -> dict[str, str] | None:
        """The first failing run as reports give it."""
        failed = self.failed
        return None if failed is None else {"test": failed.test, "message": failed.message}


def outcome(runs: list[Run], root: Group, time_limit: float | None) -> Outcome:
    """The submission's verdict and score over the package's groups, where an accepted run
    past `time_limit` is a TLE (None: held to no limit, every finished run as it is)."""
    by_test = {r.test: _limited(r, time_limit) for r in runs}
    verdict, score, failed = _graded(root, by_test)
    slowest = max((r.seconds for r in runs), default=0.0)
    return Outcome(verdict, score, failed, slowest)


def full_score(root: Group) -> float | None:
    """The highest score the root's range allows (None: no finite one)."""
    try:
        high = float(str(root.config.get("range", "-inf +inf")).split()[1])
    except (IndexError, ValueError):
        return None
    return high if math.isfinite(high) else None


def keeps(promise: str, low: Outcome, high: Outcome) -> bool:
    """Whether a submission keeps its folder's promise, held to the time limit (`low`) or,
    as problemtools allows, to the limit times the safety margin (`high`)."""
    return PROMISED[promise] in (low.verdict, high.verdict)


def score_note(promise: str, result: Outcome, best: float | None) -> str:
    """What problemtools warns of a scoring problem's submission: an accepted one short of
    the full score, a partially accepted one with all of it."""
    if best is None or result.verdict != "AC":
        return ""
    if promise == "accepted" and result.score < best:
        return f"score {result.score:g} of {best:g}: not the full score"
    if promise == "partially_accepted" and result.score >= best:
        return f"the full score {best:g}: not partially accepted"
    return ""


def _limited(run: Run, time_limit: float | None) -> Run:
    if run.letter == "A" and time_limit is not None and run.seconds > time_limit:
        return Run(run.test, "T", run.seconds, f"CPU {run.seconds:.2f} s, over {time_limit:g} s")
    return run


def _graded(group: Group, runs: dict[str, Run]) -> tuple[str, float, Run | None]:
    """A group's verdict, score and first failing run, from its items in order."""
    verdicts: list[str] = []
    scores: list[float] = []
    failed: Run | None = None
    for item in group.items:
        if isinstance(item, Group):
            verdict, score, first = _graded(item, runs)
        else:
            run = runs.get(item)
            if run is None:  # not run (a group that stopped earlier)
                continue
            verdict = NAMES.get(run.letter, run.letter)
            score = _number(group.config, "accept_score" if verdict == "AC" else "reject_score")
            first = None if verdict == "AC" else run
        verdicts.append(verdict)
        scores.append(score)
        failed = failed or first
        if verdict != "AC" and group.config.get("on_reject", "break") == "break":
            break
    return _aggregated(group, verdicts, scores), _score(group, scores), failed


def _aggregated(group: Group, verdicts: list[str], scores: list[float]) -> str:
    flags = str(group.config.get("grader_flags") or "").split()
    if "ignore_sample" in flags and len(verdicts) == 2:
        verdicts = verdicts[1:]
    if "accept_if_any_accepted" in flags and "AC" in verdicts:
        return "AC"
    if "always_accept" in flags:
        return "AC"
    if "first_error" in flags:
        return next((v for v in verdicts if v != "AC"), "AC")
    return min([*verdicts, "AC"], key=lambda v: _WORST_FIRST.index(v) if v in _WORST_FIRST else 0)


def _score(group: Group, scores: list[float]) -> float:
    flags = str(group.config.get("grader_flags") or "").split()
    if "ignore_sample" in flags and len(scores) == 2:
        scores = scores[1:]
    how = next((_SCORES[f] for f in flags if f in _SCORES), sum)
    return float(how(scores)) if scores else 0.0


def _number(config: dict[str, object], key: str) -> float:
    try:
        return float(str(config.get(key)))
    except ValueError:
        return 1.0 if key == "accept_score" else 0.0


def tle_margin_kept(runs: list[Run], time_limit: float, margin: float) -> bool:
    """Whether a TLE submission runs past the time limit times the safety margin (it was
    stopped at that cap, or ran past it), not merely past the limit."""
    return any(r.letter == "T" or r.seconds > time_limit * margin for r in runs)
