"""What verify concludes from a package's runs: each submission's verdict (its first failing
test's, as pass-fail problems are judged), whether its folder's promise holds, and the time
limit with its margins (no I/O here)."""

from __future__ import annotations

from dataclasses import dataclass

NAMES = {
    "A": "AC", "W": "WA", "T": "TLE", "L": "RTE", "O": "OLE", "R": "RTE", "C": "CE",
    "J": "JE",
}  # fmt: skip  # the format counts a memory-limit overrun as a run-time error
PROMISED = {
    "accepted": "AC",
    "wrong_answer": "WA",
    "time_limit_exceeded": "TLE",
    "run_time_error": "RTE",
}


@dataclass(frozen=True)
class Run:
    """One submission's run on one test."""

    test: str
    letter: str
    seconds: float
    message: str = ""


@dataclass(frozen=True)
class Outcome:
    """A submission's verdict, and its first failing run (None: it passed every test)."""

    verdict: str
    failed: Run | None
    slowest: float  # the longest of its runs, in seconds

    def keeps(self, promise: str) -> bool:
        """Whether the verdict is the one its folder promises."""
        return self.verdict == PROMISED[promise]


def outcome(runs: list[Run], time_limit: float | None) -> Outcome:
    """The submission's verdict: its first failing run's, in test order, where an accepted run
    over `time_limit` is a TLE (None: no limit to hold it to yet)."""
    slowest = max((r.seconds for r in runs), default=0.0)
    for run in runs:
        letter = run.letter
        if letter == "A" and time_limit is not None and run.seconds > time_limit:
            letter = "T"
        if letter != "A":
            return Outcome(
                NAMES.get(letter, letter), Run(run.test, letter, run.seconds, run.message), slowest
            )
    return Outcome("AC", None, slowest)


def tle_margin_kept(runs: list[Run], time_limit: float, margin: float) -> bool:
    """Whether a TLE submission runs past the time limit times the safety margin (it was
    stopped at that cap, or ran past it), not merely past the limit."""
    return any(r.letter == "T" or r.seconds > time_limit * margin for r in runs)
