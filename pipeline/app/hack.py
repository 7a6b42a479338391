"""Hacking: each round's cases written as one test and judged, for every contestant still
unhacked, by the workers in their sandboxes (`judge_on`: chunks leased, retried and spread
like any other job's); a failing case then shrunk, on the workers too, while it fails the
same way. The `hack` workflow."""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO

from pipeline.app.cluster import Cluster, cluster
from pipeline.app.judge import JudgeLimits, Judgment, Prepared, judge_ahead, judge_on, prepare
from pipeline.app.solve import Report
from pipeline.config import Settings
from pipeline.data.files import check_output
from pipeline.data.messages import ANSWER_CODES
from pipeline.errors import GamebatchError, UsageError
from pipeline.games.problem import Case, KnowsLimits, Problem, limits_of
from pipeline.games.reader import read_cases
from pipeline.games.tokens import TokenReader
from pipeline.grading.rules import Test, Verdict
from pipeline.grading.verdicts import CODES, VERDICT_OF, FileVerdicts
from pipeline.hacking import plan
from pipeline.hacking import report as hack_report
from pipeline.hacking.hacks import Budget, Hack
from pipeline.judging import programs as judged
from pipeline.judging.programs import Program
from pipeline.progress import ProgressBar

MOST_SHRINK_STEPS = 60  # a plugin's shrink might go on for long
SHRINK_CANDIDATES = 24  # judged at once in a shrinking step
SLOW_CANDIDATES = 3  # ... when each failing one costs a whole time or memory limit
SLOW = frozenset({Verdict.TLE, Verdict.MLE})
SHRINK_SHARE = 0.25  # shrinking may go on past the search's budget by this share of it
SAY_EVERY = 10.0  # seconds between rounds' lines, unless a round hacked someone


@dataclass(frozen=True)
class HackRequest:
    """`hack`: every program of `programs` searched (with `tests`, only those they accept)
    within `budget`; the counterexamples written to `out`, the JSON report to `json`, the
    summary to `summary`."""

    problem: Problem
    programs: Path
    tests: Path | None = None
    seed: int = 1
    budget: Budget = field(default_factory=lambda: Budget(120, 10_000))
    limits: JudgeLimits = field(default_factory=JudgeLimits)
    out: Path = Path("hacks")
    json: Path | None = None
    summary: TextIO | None = None
    quiet: bool = False

    def __post_init__(self) -> None:
        for flag, value in (("--budget", self.budget.seconds), ("--cases", self.budget.cases)):
            if value <= 0:
                raise UsageError(f"{flag} must be positive")
        if self.budget.largest is not None and self.budget.largest < 1:
            raise UsageError("--largest must be at least 1")
        largest = plan.largest_size(self.problem, self.budget.largest)  # the game's limit
        object.__setattr__(self, "budget", replace(self.budget, largest=largest))

    def prepare(self, settings: Settings, report: Report, *, sandbox: bool = True) -> Prepared:
        """The set-up, before any work: contestants' names fit for file names, the JSON
        report writable."""
        prepared = prepare(
            settings, self.limits, self.tests, self.programs, report, sandbox=sandbox
        )
        hack_report.check_names(p.contestant for p in prepared.programs)
        if self.json is not None:
            check_output(self.json)
        return prepared

    def write(self, hacks: list[Hack], doc: dict[str, Any]) -> None:
        """The counterexamples, the JSON report and the summary, where asked."""
        hack_report.write_files(self.out, self.problem, hacks)
        if self.json is not None:
            hack_report.write_json(self.json, doc)
        if self.summary is not None:
            hack_report.summary(self.summary, self.problem, hacks)


@dataclass(frozen=True)
class Hacked:
    """What a search found: its JSON report, and each contestant's hack."""

    doc: dict[str, Any]
    hacks: list[Hack]

    @property
    def status(self) -> int:
        """1 when some program was hacked, else 0."""
        return 1 if any(h.hacked for h in self.hacks) else 0


def hack(settings: Settings, request: HackRequest, report: Report) -> Hacked:
    """The `hack` workflow: the search on the cluster, then its files and summary."""
    prepared = request.prepare(settings, report)
    hacks = search(prepared, request.problem, request.seed, request.budget, request.quiet)
    doc = hack_report.document(request.problem, request.seed, request.budget, hacks)
    request.write(hacks, doc)
    return Hacked(doc, hacks)


def search(
    prepared: Prepared, problem: Problem, seed: int, budget: Budget, quiet: bool
) -> list[Hack]:
    """Search every program (with tests, only those the tests accept) for an input it
    fails, then shrink what was found; the hacks in the order of the programs."""
    programs, tests = prepared.programs, prepared.tests
    hacks = {p.contestant: Hack(p.contestant) for p in programs}
    progress = ProgressBar("hack", enabled=not quiet)
    start = time.monotonic()
    try:
        with (
            tempfile.TemporaryDirectory(prefix="gamebatch-hack-") as folder,
            cluster(prepared.settings) as c,
        ):
            found = _Search(c, problem, Path(folder), progress, _seeds(problem, tests or []))
            searching = found.screen(programs, tests, hacks) if tests else list(programs)
            found.rounds(searching, hacks, seed, budget, start + budget.seconds)
            deadline = start + budget.seconds * (1 + SHRINK_SHARE)
            for program in programs:
                if hacks[program.contestant].hacked:
                    found.shrink(program, hacks[program.contestant], deadline)
    finally:
        progress.close()
    return [hacks[p.contestant] for p in programs]


class _Search:
    """One search's cluster, work folder and judged tests."""

    def __init__(
        self, c: Cluster, problem: Problem, work: Path, progress: ProgressBar, seeds: list[Case]
    ) -> None:
        self.c, self.problem, self.work, self.progress = c, problem, work, progress
        self.seeds = seeds  # the contest's cases, mutated between the later rounds
        self._written: dict[tuple[int, int], _RoundTest] = {}  # rounds' tests, by round and room
        self.tests = 0
        self.said = time.monotonic()

    def screen(
        self, programs: list[Program], tests: list[Test], hacks: dict[str, Hack]
    ) -> list[Program]:
        """The programs that the contest's tests accept; the others are marked skipped."""
        run = judge_on(self.c, Judgment(self.problem), tests, programs, self.progress)
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
        """Judge the rounds' cases until every program failed one, or the budget is spent;
        each round's successor is queued while the workers judge it."""
        total = len(searching)
        largest = plan.largest_size(self.problem, budget.largest)
        upcoming = plan.rounds(self.problem, seed, largest, self.seeds)  # never ends
        found, how = next(upcoming), Judgment(self.problem, lazy=True)
        while True:
            following = next(upcoming)
            room = budget.cases - (hacks[searching[0].contestant].cases_tried if searching else 0)
            if not searching or room <= 0 or time.monotonic() >= deadline:
                return
            if found.cases[:room]:  # else no valid mutant
                began = time.monotonic()
                test = self._round_test(found, room)
                judge_ahead(self.c, how, [test.test], searching, self.progress)
                left = room - len(test.cases)
                if left > 0 and following.cases and time.monotonic() < deadline:
                    after = self._round_test(following, left)
                    judge_ahead(self.c, how, [after.test], searching, self.progress)
                expected, verdicts = self.judged(test, searching, lazy=True)
                still = self._take(found, test, expected, verdicts, searching, hacks, began)
                if len(still) < len(searching) or time.monotonic() >= self.said + SAY_EVERY:
                    self.said = time.monotonic()
                    hacked = sum(h.hacked for h in hacks.values())
                    self.progress.say(
                        f"round {found.number + 1}: {len(test.cases)} cases {found.label};"
                        f" {hacked} hacked, {len(still)} of {total} still searched"
                    )
                searching[:] = still
            found = following

    def _take(
        self,
        found: plan.Round,
        test: _RoundTest,
        expected: str,
        verdicts: dict[str, FileVerdicts],
        searching: list[Program],
        hacks: dict[str, Hack],
        began: float,
    ) -> list[Program]:
        """Each program's outcome of a round: hacked, not compiling, or still searched."""
        spent, still = time.monotonic() - began, []
        for program in searching:
            hack = hacks[program.contestant]
            hack.seconds += spent
            got = verdicts[program.contestant]
            index = plan.first_failure(got.codes)
            hack.cases_tried += len(test.cases) if index is None else index + 1
            if index is None:
                still.append(program)
            elif got.codes[index] == CODES[Verdict.CE]:
                hack.skipped = "does not compile"
            else:
                hack.case, hack.size = test.cases[index], found.size
                hack.checked = test.checked[index]
                hack.verdict, hack.expected, hack.found = self.failure(expected, got, index)
                self.progress.say(
                    f"{program.contestant}: hacked ({hack.verdict.value}) after"
                    f" {hack.cases_tried} cases, {found.label}"
                )
        return still

    def _round_test(self, found: plan.Round, room: int) -> _RoundTest:
        """A round's first `room` cases written as one test with its answers (once; the
        last two rounds' tests are kept)."""
        key = (found.number, room)
        if key not in self._written:
            cases, checked = found.cases[:room], found.checked[:room]
            self.tests += 1
            test = _write_test(self.work / f"t{self.tests}", self.problem, cases, checked)
            self._written[key] = _RoundTest(test, cases, checked)
            while len(self._written) > 2:
                del self._written[next(iter(self._written))]
        return self._written[key]

    def shrink(self, program: Program, hack: Hack, deadline: float) -> None:
        """Bisect the hack's size while it fails the same way (a game that knows its
        limits), then replace its case by the first smaller one that fails the same way,
        while there is one (and steps and time are left). A TLE or MLE stops where the
        bisection stops: each try costs a whole limit."""
        assert hack.case is not None and hack.verdict is not None
        began = time.monotonic()
        most = SLOW_CANDIDATES if hack.verdict in SLOW else SHRINK_CANDIDATES
        limits = limits_of(self.problem)
        if limits is not None:
            self._bisect(program, hack, limits, most, deadline)
        while (
            (limits is None or hack.verdict not in SLOW)
            and hack.shrink_steps < MOST_SHRINK_STEPS
            and time.monotonic() < deadline
        ):
            options = plan.candidates(self.problem, hack.case, most)
            if not options or hack.verdict not in self._smaller(program, hack, options):
                break
        if limits is not None and hack.fails_from > limits.size_of(hack.case):
            hack.fails_from = limits.size_of(hack.case)  # shrunk on past the bisection
            hack.passes_at = hack.passes_at if hack.passes_at < hack.fails_from else 0
        hack.seconds += time.monotonic() - began

    def _bisect(
        self, program: Program, hack: Hack, limits: KnowsLimits, most: int, deadline: float
    ) -> None:
        """Cut the case down by its size: halvings until one is accepted, then sizes between
        the smallest failing one and the largest accepted one below it."""
        assert hack.case is not None
        hack.fails_from = limits.size_of(hack.case)
        while hack.shrink_steps < MOST_SHRINK_STEPS and time.monotonic() < deadline:
            sizes = plan.bisection(hack.fails_from, hack.passes_at, most)
            options = plan.resized(self.problem, limits, hack.case, sizes)
            if not options:
                return
            got = self._smaller(program, hack, options, smallest=True)
            hack.fails_from = limits.size_of(hack.case)
            accepted = [
                limits.size_of(o) for o, v in zip(options, got, strict=True) if v == Verdict.AC
            ]
            below = [n for n in (hack.passes_at, *accepted) if n < hack.fails_from]
            hack.passes_at = max(below, default=0)
            if hack.verdict not in got and not accepted:
                return  # neither: the sizes between fail otherwise

    def _smaller(
        self, program: Program, hack: Hack, options: list[Case], *, smallest: bool = False
    ) -> list[Verdict]:
        """Judge `options` and take the first (or the `smallest`) that fails as the hack
        does (none: the hack is unchanged); each option's verdict."""
        expected, verdicts = self.judge(options, [hack.checked] * len(options), [program])
        got = verdicts[program.contestant]
        found = [VERDICT_OF[code] for code in got.codes]
        same = [i for i, verdict in enumerate(found) if verdict == hack.verdict]
        if same:
            limits = limits_of(self.problem)
            pick = same[0]
            if smallest and limits is not None:
                pick = min(same, key=lambda i: limits.size_of(options[i]))
            hack.case = options[pick]
            hack.verdict, hack.expected, hack.found = self.failure(expected, got, pick)
            hack.shrink_steps += 1
        return found

    def judge(
        self, cases: list[Case], checked: list[bool], programs: list[Program]
    ) -> tuple[str, dict[str, FileVerdicts]]:
        """The answer codes of a test of `cases`, and each program's verdicts on it."""
        self.tests += 1
        test = _write_test(self.work / f"t{self.tests}", self.problem, cases, checked)
        return self.judged(_RoundTest(test, cases, checked), programs)

    def judged(
        self, test: _RoundTest, programs: list[Program], *, lazy: bool = False
    ) -> tuple[str, dict[str, FileVerdicts]]:
        """The answer codes of a written test, and each program's verdicts on it (`lazy`:
        none after its first failing case)."""
        how = Judgment(self.problem, lazy=lazy)
        run = judge_on(self.c, how, [test.test], programs, self.progress)
        verdicts = {}
        for sub, got in run.graded():
            if got is None:
                raise GamebatchError(f"a generated test was refused: {run.found.broken}")
            verdicts[sub.contestant] = got
        return run.found.expected[test.test.name], verdicts

    def failure(
        self, expected: str, verdicts: FileVerdicts, index: int
    ) -> tuple[Verdict, str, str | None]:
        """A failing case's verdict, its expected answer, and what the run gave."""
        kept = {r.index: r for r in verdicts.first_mismatches(expected, self.problem.answers)}
        shown = kept.get(index + 1)
        want = self.problem.answers[ANSWER_CODES.index(expected[index])]
        return VERDICT_OF[verdicts.codes[index]], want, shown.found if shown else None


@dataclass(frozen=True)
class _RoundTest:
    """A test written for the search: its file, cases and which were checked exhaustively."""

    test: Test
    cases: list[Case]
    checked: list[bool]


SEEDS = 2_000  # the contest's cases a search mutates, at most (the first ones of its tests)


def _seeds(problem: Problem, tests: list[Test]) -> list[Case]:
    """The contest's cases the search mutates (none without `--tests`)."""
    found: list[Case] = []
    for test in tests:
        with test.input.open("rb") as stream:
            for numbered in read_cases(problem, TokenReader(stream, str(test.input))):
                found.append(numbered.case)
                if len(found) == SEEDS:
                    return found
    return found


def _write_test(stem: Path, problem: Problem, cases: list[Case], checked: list[bool]) -> Test:
    """A test of `cases` with its answers (the game's solver; exhaustive search on small)."""
    words = [
        problem.answers[plan.truth(problem, case, check)]
        for case, check in zip(cases, checked, strict=True)
    ]
    source = stem.with_suffix(".in")
    texts = [problem.format_case(case).encode() for case in cases]
    with source.open("wb") as out:
        out.write(b"%d\n" % len(cases))
        out.writelines(texts)
    judged.written(source, texts)  # its chunks need not read it back
    answers = stem.with_suffix(".ans")
    answers.write_text("".join(f"{word}\n" for word in words))
    return Test(stem.name, source, answers)
