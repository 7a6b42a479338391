"""The hack search on the cluster: each round's cases written as one test and judged, for
every contestant still unhacked, by the workers in their sandboxes (`grade_service.judge_on`:
chunks leased, retried and spread like any other job's); a failing case then shrunk, on the
workers too, while it fails the same way."""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from pipeline import grade_service, service
from pipeline.config import Settings
from pipeline.data.messages import ANSWER_CODES
from pipeline.errors import GamebatchError
from pipeline.games.problem import Case, Problem
from pipeline.grading.rules import Scoring, Test, Verdict
from pipeline.grading.verdicts import CODES, VERDICT_OF, FileVerdicts
from pipeline.hacking import plan
from pipeline.judging.judge_service import Program
from pipeline.progress import ProgressBar

MOST_SHRINK_STEPS = 60  # a plugin's shrink might go on for long
SHRINK_CANDIDATES = 24  # judged at once in a shrinking step
SLOW_CANDIDATES = 3  # ... when each failing one costs a whole time or memory limit
SLOW = frozenset({Verdict.TLE, Verdict.MLE})
SHRINK_SHARE = 0.25  # shrinking may go on past the search's budget by this share of it
SAY_EVERY = 10.0  # seconds between rounds' lines, unless a round hacked someone


@dataclass(frozen=True)
class Budget:
    """How long the search goes on: seconds in all, cases per contestant, the largest size."""

    seconds: float
    cases: int
    largest: int


@dataclass
class Hack:
    """What the search found for one contestant."""

    contestant: str
    cases_tried: int = 0
    seconds: float = 0.0
    verdict: Verdict | None = None  # None: not hacked
    case: Case | None = None
    expected: str | None = None
    found: str | None = None  # what the program printed (WA, PE), or how its run ended
    size: int = 0  # the size of the round that found it
    checked: bool = False  # its answer also found by exhaustive search (and its shrinks')
    shrink_steps: int = 0
    skipped: str | None = None  # why it was not searched (a compile error, failed tests)

    @property
    def hacked(self) -> bool:
        """Whether a failing input was found."""
        return self.verdict is not None and self.case is not None


def hack(
    settings: Settings,
    problem: Problem,
    programs: list[Program],
    *,
    tests: list[Test] | None,
    seed: int,
    budget: Budget,
    quiet: bool = False,
) -> list[Hack]:
    """Search every program (with `tests`, only those the tests accept) for an input it
    fails, then shrink what was found; the hacks in the order of `programs`."""
    hacks = {p.contestant: Hack(p.contestant) for p in programs}
    progress = ProgressBar("hack", enabled=not quiet)
    start = time.monotonic()
    try:
        with (
            tempfile.TemporaryDirectory(prefix="gamebatch-hack-") as folder,
            service.cluster(settings) as c,
        ):
            search = _Search(c, problem, Path(folder), progress)
            searching = search.screen(programs, tests, hacks) if tests else list(programs)
            search.rounds(searching, hacks, seed, budget, start + budget.seconds)
            deadline = start + budget.seconds * (1 + SHRINK_SHARE)
            for program in programs:
                if hacks[program.contestant].hacked:
                    search.shrink(program, hacks[program.contestant], deadline)
    finally:
        progress.close()
    return [hacks[p.contestant] for p in programs]


class _Search:
    """One search's cluster, work folder and judged tests."""

    def __init__(
        self,
        c: service.Cluster,
        problem: Problem,
        work: Path,
        progress: ProgressBar,
    ) -> None:
        self.c, self.problem, self.work, self.progress = c, problem, work, progress
        self.tests = 0
        self.said = time.monotonic()

    def screen(
        self, programs: list[Program], tests: list[Test], hacks: dict[str, Hack]
    ) -> list[Program]:
        """The programs that the contest's tests accept; the others are marked skipped."""
        run = grade_service.judge_on(
            self.c, self.problem, tests, programs, scoring=Scoring(), progress=self.progress
        )
        failed: dict[str, str] = {}
        for sub, verdicts in run.graded():
            if verdicts is None:
                raise GamebatchError(f"test {sub.test} is not valid: {run.found.broken[sub.test]}")
            index = plan.first_failure(verdicts.codes)
            if index is not None and sub.contestant not in failed:
                verdict = VERDICT_OF[verdicts.codes[index]].value
                failed[sub.contestant] = f"fails test {sub.test} ({verdict} on case {index + 1})"
            elif verdicts.extra is not None and sub.contestant not in failed:
                failed[sub.contestant] = f"fails test {sub.test} (output after the last case)"
        for contestant, why in failed.items():
            hacks[contestant].skipped = why
        return [p for p in programs if p.contestant not in failed]

    def rounds(
        self,
        searching: list[Program],
        hacks: dict[str, Hack],
        seed: int,
        budget: Budget,
        deadline: float,
    ) -> None:
        """Judge the rounds' cases until every program failed one, or the budget is spent."""
        total = len(searching)
        for found in plan.rounds(self.problem, seed, budget.largest):
            room = budget.cases - (hacks[searching[0].contestant].cases_tried if searching else 0)
            if not searching or room <= 0 or time.monotonic() >= deadline:
                return
            cases, checked = found.cases[:room], found.checked[:room]
            began = time.monotonic()
            expected, verdicts = self.judge(cases, checked, searching, lazy=True)
            spent, still = time.monotonic() - began, []
            for program in searching:
                hack = hacks[program.contestant]
                hack.seconds += spent
                got = verdicts[program.contestant]
                index = plan.first_failure(got.codes)
                hack.cases_tried += len(cases) if index is None else index + 1
                if index is None:
                    still.append(program)
                elif got.codes[index] == CODES[Verdict.CE]:
                    hack.skipped = "does not compile"
                else:
                    hack.case, hack.size, hack.checked = cases[index], found.size, checked[index]
                    hack.verdict, hack.expected, hack.found = self.failure(expected, got, index)
                    self.progress.say(
                        f"{program.contestant}: hacked ({hack.verdict.value}) after"
                        f" {hack.cases_tried} cases, at size {found.size}"
                    )
            hacked = sum(h.hacked for h in hacks.values())
            if len(still) < len(searching) or time.monotonic() >= self.said + SAY_EVERY:
                self.said = time.monotonic()
                self.progress.say(
                    f"round {found.number + 1}: {len(cases)} cases of size {found.size};"
                    f" {hacked} hacked, {len(still)} of {total} still searched"
                )
            searching[:] = still

    def shrink(self, program: Program, hack: Hack, deadline: float) -> None:
        """Replace the hack's case by the first smaller one that fails the same way, while
        there is one (and steps and time are left)."""
        assert hack.case is not None and hack.verdict is not None
        began = time.monotonic()
        most = SLOW_CANDIDATES if hack.verdict in SLOW else SHRINK_CANDIDATES
        while hack.shrink_steps < MOST_SHRINK_STEPS and time.monotonic() < deadline:
            options = plan.candidates(self.problem, hack.case, most)
            if not options:
                break
            expected, verdicts = self.judge(options, [hack.checked] * len(options), [program])
            got = verdicts[program.contestant]
            same = [i for i, code in enumerate(got.codes) if VERDICT_OF[code] == hack.verdict]
            if not same:
                break
            hack.case = options[same[0]]
            hack.verdict, hack.expected, hack.found = self.failure(expected, got, same[0])
            hack.shrink_steps += 1
        hack.seconds += time.monotonic() - began

    def judge(
        self, cases: list[Case], checked: list[bool], programs: list[Program], *, lazy: bool = False
    ) -> tuple[str, dict[str, FileVerdicts]]:
        """The answer codes of a test of `cases`, and each program's verdicts on it (`lazy`:
        none after its first failing case)."""
        self.tests += 1
        test = _write_test(self.work / f"t{self.tests}", self.problem, cases, checked)
        run = grade_service.judge_on(
            self.c,
            self.problem,
            [test],
            programs,
            scoring=Scoring(),
            progress=self.progress,
            lazy=lazy,
        )
        verdicts = {}
        for sub, got in run.graded():
            if got is None:
                raise GamebatchError(f"a generated test was refused: {run.found.broken}")
            verdicts[sub.contestant] = got
        return run.found.expected[test.name], verdicts

    def failure(
        self, expected: str, verdicts: FileVerdicts, index: int
    ) -> tuple[Verdict, str, str | None]:
        """A failing case's verdict, its expected answer, and what the run gave."""
        kept = {r.index: r for r in verdicts.first_mismatches(expected, self.problem.answers)}
        shown = kept.get(index + 1)
        want = self.problem.answers[ANSWER_CODES.index(expected[index])]
        return VERDICT_OF[verdicts.codes[index]], want, shown.found if shown else None


def _write_test(stem: Path, problem: Problem, cases: list[Case], checked: list[bool]) -> Test:
    """A test of `cases` with its answers (the game's solver; exhaustive search on small)."""
    words = [
        problem.answers[plan.truth(problem, case, check)]
        for case, check in zip(cases, checked, strict=True)
    ]
    source = stem.with_suffix(".in")
    with source.open("w") as out:
        out.write(f"{len(cases)}\n")
        out.writelines(problem.format_case(case) for case in cases)
    answers = stem.with_suffix(".ans")
    answers.write_text("".join(f"{word}\n" for word in words))
    return Test(stem.name, source, answers)
