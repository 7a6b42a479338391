"""Verifying a problem package (`gamebatch verify`), as problemtools' verifyproblem does, with
every run a chunk on the workers: the input validators on every test (and against the invalid
inputs), the accepted submissions (whose slowest run gives the time limit), then every other
submission under the limit times its safety margin, each held to its folder's promise."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import msgspec

from pipeline import escape
from pipeline.app.cluster import Cluster, cluster
from pipeline.app.solve import Report
from pipeline.app.verdict_job import VerdictJob, verdicts
from pipeline.config import Settings
from pipeline.data.messages import ProgramFiles, RunPayload, RunTest
from pipeline.data.producer import Queuer
from pipeline.grading import comparing
from pipeline.grading.verdict_store import RedisVerdicts
from pipeline.grading.verdicts import FileVerdicts
from pipeline.judging.programs import toolchain
from pipeline.packages import package as packages
from pipeline.packages.outcomes import (
    PROMISED,
    Outcome,
    Run,
    full_score,
    keeps,
    outcome,
    score_note,
    tle_margin_kept,
)
from pipeline.packages.package import Group, Package, PackageProgram, PackageTest
from pipeline.progress import ProgressBar

VERIFYING = 1  # the version of how package runs are judged: part of every run's key
INPUT_BATCH = 32  # tests an input validator checks in one chunk
BATCH_BYTES, BATCH_TESTS = 256 << 10, 16  # a batch of a submission's tests, at most
_AS_TEST = {"P": "W", "M": "W"}  # a game's case's letter as its test's
NOT_RUN = "N"  # a test a chunk did not run: it stopped at an earlier failing one


@dataclass(frozen=True)
class VerifyRequest:
    """`gamebatch verify PACKAGE`: its checks, a JSON report where asked."""

    package: Path
    json: Path | None = None
    quiet: bool = False
    max_seconds: float = 10.0  # accepted runs' CPU cap where the package states no time limit


@dataclass(frozen=True)
class Checked:
    """A submission's runs, its verdict, and whether its folder's promise holds."""

    program: PackageProgram
    promise: str
    runs: list[Run]
    outcome: Outcome
    kept: bool
    note: str = ""


@dataclass
class Verified:
    """What verify found: the time limit and its margins, the input checks, the submissions,
    and every problem found (none: the package is as it promises)."""

    package: Package
    time_limit: float
    slowest: float
    inputs: list[tuple[str, Run]] = field(default_factory=list)  # (validator, its run)
    submissions: list[Checked] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether every check passed."""
        return not self.problems


def verify(settings: Settings, request: VerifyRequest, report: Report) -> Verified:
    """The `verify` workflow; `report` hears the notes on what is not judged."""
    if not settings.broker_url:  # local workers judge: their sandbox first
        from pipeline.judging.sandbox import Sandbox

        Sandbox(settings.judge.first_uid, settings.judge.slots).check()
    with packages.opened(request.package) as root:
        pkg = packages.read(root, settings.judge.languages)
        for note in pkg.notes:
            report(f"not judged: {escape.terminal(note)}")
        progress = ProgressBar("verify", enabled=not request.quiet)
        try:
            with cluster(settings) as c:
                found = _verify_on(PackageRuns(c, pkg, progress), pkg, request.max_seconds)
        finally:
            progress.close()
    if request.json is not None:
        request.json.write_text(json.dumps(as_json(found), indent=1) + "\n")
    return found


def _verify_on(runs: PackageRuns, pkg: Package, max_seconds: float) -> Verified:
    """Every run at once: the input checks, the accepted submissions (under the stated limit,
    or `max_seconds`), and the others under the lowest limit the accepted ones can give
    (the stated one, or a second: a derived limit is whole seconds) times the safety margin.
    Once the accepted runs give a higher limit, only the runs stopped at that lower cap run
    again: a run that ended under a cap ends the same under a higher one."""
    margin, stop = pkg.limits.time_safety_margin, stops(pkg.groups)
    slow = pkg.submissions["time_limit_exceeded"]
    apart = ("accepted", "time_limit_exceeded")
    others = [
        *slow,
        *(p for promise in PROMISED if promise not in apart for p in pkg.submissions[promise]),
    ]
    lowest = (pkg.limits.time_limit or 1.0) * margin
    # the longest runs first (the TLE ones, then the input checks beside them): the others
    # fill the other workers, and nothing long is left to start last
    found_slow, inputs, found_rest, accepted = runs.run(
        runs.submissions(slow, lowest, stop=stop),
        runs.input_checks(),
        runs.submissions(others[len(slow) :], lowest, stop=stop),
        runs.submissions(pkg.submissions["accepted"], pkg.limits.time_limit or max_seconds),
    )
    found_others = {**found_slow, **found_rest}
    slowest = max((r.seconds for rs in accepted.values() for r in rs if r.letter == "A"), default=0)
    time_limit = packages.derived_time_limit(pkg.limits, slowest)
    if time_limit * margin > lowest:
        capped = [p for p in others if any(r.letter == "T" for r in found_others.get(p.name, []))]
        (again,) = runs.run(runs.submissions(capped, time_limit * margin, stop=stop))
        found_others.update(again)
    return _concluded(pkg, time_limit, slowest, inputs, {**accepted, **found_others})


def _concluded(
    pkg: Package,
    time_limit: float,
    slowest: float,
    inputs: dict[str, list[Run]],
    everyone: dict[str, list[Run]],
) -> Verified:
    """Every check's conclusion, from the runs."""
    found = Verified(pkg, time_limit, slowest, [(v, r) for v, rs in inputs.items() for r in rs])
    found.problems += _input_problems(pkg, found.inputs)
    for promise in PROMISED:
        for program in pkg.submissions[promise]:
            if program.not_judged:
                continue
            found.submissions.append(_checked(program, promise, everyone[program.name], found))
    found.problems += [
        f"{c.program.name} is {c.outcome.verdict}, not {PROMISED[c.promise]}{_where(c.outcome)}"
        for c in found.submissions
        if not c.kept and c.outcome.verdict != "JE"  # the validator's fault, named above
    ]
    return found


def _checked(program: PackageProgram, promise: str, runs: list[Run], found: Verified) -> Checked:
    pkg = found.package
    low = outcome(runs, pkg.groups, found.time_limit)
    high = outcome(runs, pkg.groups, None)
    notes = [score_note(promise, low, full_score(pkg.groups) if pkg.scoring else None)]
    if promise == "time_limit_exceeded" and low.verdict == "TLE":
        margin = pkg.limits.time_safety_margin
        if not tle_margin_kept(runs, found.time_limit, margin):
            notes.append(f"runs past the limit but within {margin:g} times it (the safety margin)")
    if low.verdict != high.verdict:
        notes.append(f"{high.verdict} with {pkg.limits.time_safety_margin:g} times the time limit")
    if low.verdict == "JE" and low.failed is not None:
        checker = pkg.output_validator
        who = checker.name if checker is not None else "the default validator"
        failed = low.failed
        found.problems.append(f"{who}: judge error on {failed.test}: {failed.message}")
    kept = keeps(promise, low, high)
    return Checked(program, promise, runs, low, kept, "; ".join(n for n in notes if n))


def _where(result: Outcome) -> str:
    failed = result.failed
    if failed is None:
        return ""
    said = f": {failed.message}" if failed.message else ""
    return f" on {failed.test}{said}"


def _input_problems(pkg: Package, inputs: list[tuple[str, Run]]) -> list[str]:
    problems = []
    invalid = {path.relative_to(pkg.root / "data").as_posix() for path in pkg.invalid_inputs}
    for validator, run in inputs:
        if run.letter == "J":
            problems.append(f"{validator} failed on {run.test}: {run.message}")
        elif run.test in invalid and run.letter == "A":
            problems.append(f"{validator} accepts {run.test}, an invalid input")
        elif run.test not in invalid and run.letter != "A":
            problems.append(f"{validator} rejects {run.test}: {run.message or 'no reason given'}")
    return problems


@dataclass(frozen=True)
class _Plan:
    """Chunks to run, and for each the program (or validator) and the tests it covers (with
    their cases, for a game's: 0 otherwise)."""

    payloads: list[RunPayload]
    places: list[tuple[str, list[tuple[str, int]]]]


class PackageRuns:
    """A package's runs on the cluster, planned, then run in one verdict job, each chunk kept
    by content."""

    def __init__(self, c: Cluster, pkg: Package, progress: ProgressBar) -> None:
        self.c, self.pkg, self.progress = c, pkg, progress
        self.store = RedisVerdicts(c.store.client, c.settings.result_ttl)
        self.settings = c.settings.judge
        self.game = pkg.game is not None  # its tests are judged case by case

    def run(self, *plans: _Plan) -> list[dict[str, list[Run]]]:
        """The runs of each plan, by program (or validator), in one job (not-run tests left
        out)."""
        found = iter(self._run([p for plan in plans for p in plan.payloads]))
        results = []
        for plan in plans:
            runs: dict[str, list[Run]] = {}
            for name, tests in plan.places:
                made = _runs(tests, next(found))
                runs.setdefault(name, []).extend(r for r in made if r.letter != NOT_RUN)
            results.append(runs)
        return results

    def input_checks(self) -> _Plan:
        """Every input validator on every test and every invalid input."""
        limits = self._validation
        named = [(t.name, t.input, list(t.input_flags)) for t in self.pkg.tests]
        data = self.pkg.root / "data"
        named += [(p.relative_to(data).as_posix(), p, []) for p in self.pkg.invalid_inputs]
        plan = _Plan([], [])
        for validator in (v for v in self.pkg.input_validators if not v.not_judged):
            program = self._files(validator)
            for start in range(0, len(named), INPUT_BATCH):
                batch = named[start : start + INPUT_BATCH]
                tests = [RunTest(path.read_bytes(), b"", flags) for _, path, flags in batch]
                plan.payloads.append(
                    RunPayload(
                        problem=self.pkg.name,
                        file=0,
                        mode="input",
                        program=program,
                        limits=limits,
                        tests=tests,
                    )
                )
                plan.places.append((validator.name, [(name, 0) for name, _, _ in batch]))
        return plan

    def submissions(
        self, programs: list[PackageProgram], seconds: float, *, stop: bool = False
    ) -> _Plan:
        """Every judged program of `programs` on the tests, under `seconds` of CPU: a chunk
        per (program, batch of tests), or with `stop` one per program that stops at its first
        failing test (the tests after it are not run, as the format's on_reject: break
        says)."""
        tests = self._tests
        names = [t.name for t in self.pkg.tests]
        groups = [names] if stop else _batches([(n, len(tests[n].input)) for n in names])
        plan = _Plan([], [])
        judged = [(p, self._files(p)) for p in programs if not p.not_judged]
        for group in groups:  # a test for every program first: workers build several at once
            for program, files in judged:
                run = [tests[n] for n in group]
                plan.payloads.append(
                    self._validated("solve", files, self._limits(seconds), run, stop)
                )
                plan.places.append((program.name, [(n, tests[n].cases) for n in group]))
        return plan

    def outputs(self, contestants: list[tuple[str, list[bytes | None]]]) -> _Plan:
        """Each contestant's output files (one a test, None: no file) judged as they are, by
        the package's validator or the default one: a chunk per contestant."""
        tests = list(self._tests.values())
        names = [(t.name, run.cases) for t, run in zip(self.pkg.tests, tests, strict=True)]
        plan = _Plan([], [])
        for name, outputs in contestants:
            given = [
                msgspec.structs.replace(test, output=output)
                for test, output in zip(tests, outputs, strict=True)
            ]
            plan.payloads.append(self._validated("output", None, self._validation, given))
            plan.places.append((name, names))
        return plan

    def _validated(
        self,
        mode: str,
        program: ProgramFiles | None,
        limits: tuple[float, int, int],
        tests: list[RunTest],
        stop: bool = False,
    ) -> RunPayload:
        """A chunk whose outputs the package's output validator (or the default one) judges."""
        return RunPayload(
            problem=self.pkg.name,
            file=0,
            mode=mode,
            program=program,
            limits=limits,
            tests=tests,
            validator=self._checker,
            checker=self.pkg.checker,
            stop=stop,
            validation=self._validation,
        )

    @cached_property
    def _checker(self) -> ProgramFiles | None:
        """The package's output validator's files (None: the default validator)."""
        checker = self.pkg.output_validator
        return self._files(checker) if checker is not None else None

    @cached_property
    def _validation(self) -> tuple[float, int, int]:
        return self._limits(self.pkg.limits.validation_seconds, validation=True)

    @cached_property
    def _tests(self) -> dict[str, RunTest]:
        """Every test as a chunk carries it, read once for all the plans of a verification."""
        return {t.name: self._test(t) for t in self.pkg.tests}

    def _test(self, test: PackageTest) -> RunTest:
        """A test as a run chunk carries it: a game's judged case by case (a line each of
        its answer), any other's by the output validator."""
        answer = test.answer.read_bytes()
        flags = [*self.pkg.validator_flags, *test.output_flags]
        cases = len([line for line in answer.split(b"\n") if line.strip()]) if self.game else 0
        return RunTest(test.input.read_bytes(), answer, flags, cases)

    def _run(self, payloads: list[RunPayload]) -> list[FileVerdicts]:
        """Each chunk's verdicts: kept ones from the store, the rest from one job."""
        keys = [_key(p) for p in payloads]
        kept = self.store.get_many(keys)
        todo = [i for i, v in enumerate(kept) if v is None]
        if todo:
            outputs = [
                comparing.Output(keys[i], None, "x" * _width(payloads[i]), keys[i]) for i in todo
            ]
            fresh = self._job(outputs, [payloads[i] for i in todo])
            self.store.put_many((keys[i], v) for i, v in zip(todo, fresh, strict=True))
            for i, got in zip(todo, fresh, strict=True):
                kept[i] = got
        return [v for v in kept if v is not None]

    def _job(
        self, outputs: Sequence[comparing.Output], payloads: list[RunPayload]
    ) -> list[FileVerdicts]:
        def produce(queue: Queuer) -> tuple[int, int]:
            answered = queue.store.answered(queue.job_id)
            for n, payload in enumerate(payloads):
                if n not in answered:
                    queue.put(n, _numbered(payload, n).encode())
            runs = sum(len(p.tests) for p in payloads)
            self.progress.add_total(runs)
            return len(payloads), runs

        programs = {p.program.entry for p in payloads if p.program is not None}
        job = VerdictJob("verify", "package", 1, len(programs))
        return list(verdicts(self.c, job, outputs, produce, self.progress))

    def _files(self, program: PackageProgram) -> ProgramFiles:
        lang = self.settings.languages[program.language]
        files = [(name, path.read_bytes()) for name, path in program.files]
        return ProgramFiles(program.language, toolchain(lang.version), program.entry, files)

    def _limits(self, seconds: float, *, validation: bool = False) -> tuple[float, int, int]:
        limits = self.pkg.limits
        memory = limits.validation_memory_mb if validation else limits.memory_mb
        return (seconds, memory << 20, limits.output_mb << 20)


def _batches(sizes: list[tuple[str, int]]) -> list[list[str]]:
    """Tests (name, input bytes) in order, in batches of small ones: a chunk's start costs
    more than a small test's run, and a large test is a chunk of its own (spread over the
    workers)."""
    batches: list[list[str]] = []
    held = BATCH_BYTES + 1  # the bytes of the last batch: none open yet
    for name, size in sizes:
        if held + size > BATCH_BYTES or len(batches[-1]) >= BATCH_TESTS:
            batches.append([])
            held = 0
        batches[-1].append(name)
        held += size
    return batches


def _numbered(payload: RunPayload, n: int) -> RunPayload:
    return msgspec.structs.replace(payload, file=n)


def _key(payload: RunPayload) -> str:
    """What a run's verdict depends on: the program, the test, the validator, the limits."""
    digest = hashlib.sha256(f"verify:{VERIFYING}:".encode())
    digest.update(payload.encode())
    return "run-" + digest.hexdigest()


def _runs(tests: list[tuple[str, int]], found: FileVerdicts) -> list[Run]:
    """A chunk's verdicts as runs of its tests (a game's test has a letter a case: its
    verdict is its first failing case's, its time the sum of theirs)."""
    shown, runs, at = dict(found.shown), [], 0
    for test, cases in tests:
        width = max(cases, 1)
        letters = found.codes[at : at + width] or "J"
        failing = next((i for i, code in enumerate(letters) if code != "A"), None)
        letter = "A" if failing is None else _AS_TEST.get(letters[failing], letters[failing])
        message = "" if failing is None else shown.get(at + failing + 1) or ""
        seconds = sum(us for us, _ in found.usage[at : at + width]) / 1e6
        runs.append(Run(test, letter, seconds, message, letters if cases else ""))
        at += width
    return runs


def _width(payload: RunPayload) -> int:
    """A chunk's letters: one a test, or one a case of a game's test."""
    return sum(max(test.cases, 1) for test in payload.tests)


def stops(group: Group) -> bool:
    """Whether every group stops at its first rejected test (the pass-fail default): then
    a submission's runs stop there too."""
    return group.config.get("on_reject", "break") == "break" and all(
        stops(item) for item in group.items if isinstance(item, Group)
    )


def as_json(found: Verified) -> dict[str, Any]:
    """The JSON report (`"format": "gamebatch-verify"`)."""
    pkg = found.package
    return {
        "format": "gamebatch-verify",
        "version": 1,
        "package": pkg.name,
        "type": "scoring" if pkg.scoring else "pass-fail",
        "time_limit": found.time_limit,
        "slowest_accepted": found.slowest,
        "time_multiplier": pkg.limits.time_multiplier,
        "time_safety_margin": pkg.limits.time_safety_margin,
        "tests": [t.name for t in pkg.tests],
        "input_validation": [
            {"validator": v, "test": r.test, "verdict": r.letter, "message": r.message}
            for v, r in found.inputs
        ],
        "submissions": [
            {
                "name": c.program.name,
                "language": c.program.language,
                "promise": c.promise,
                "verdict": c.outcome.verdict,
                "score": c.outcome.score if pkg.scoring else None,
                "as_promised": c.kept,
                "first_failure": c.outcome.failure_json(),
                "slowest": c.outcome.slowest,
                "note": c.note,
                "runs": [r.as_json() for r in c.runs],
            }
            for c in found.submissions
        ],
        "not_judged": [
            {"name": p.name, "why": p.not_judged}
            for programs in (pkg.submissions.values(), [pkg.input_validators])
            for group in programs
            for p in group
            if p.not_judged
        ],
        "problems": found.problems,
        "ok": found.ok,
    }


def summary(found: Verified) -> list[str]:
    """The text summary, a line each."""
    pkg = found.package
    multiplier = pkg.limits.time_multiplier
    how = "stated" if pkg.limits.time_limit is not None else "derived"
    if how == "derived":
        how = f"the slowest accepted run {found.slowest:.2f} s x {multiplier:g}, rounded up"
    lines = [
        f"{pkg.name}: {len(pkg.tests)} tests, time limit {found.time_limit:g} s ({how});"
        f" TLE submissions must run past {found.time_limit * pkg.limits.time_safety_margin:g} s",
    ]
    checked = len(found.inputs)
    rejected = sum(1 for _, r in found.inputs if r.letter != "A")
    if checked:
        lines.append(
            f"input validators: {checked} checks, {rejected} rejections (of invalid inputs too)"
        )
    for c in found.submissions:
        mark = "as promised" if c.kept else f"PROMISED {PROMISED[c.promise]}"
        where = _where(c.outcome)
        points = f" {c.outcome.score:g} points" if pkg.scoring else ""
        lines.append(
            f"{escape.terminal(c.program.name)}: {c.outcome.verdict}{points}{where}"
            f" (slowest {c.outcome.slowest:.2f} s) {mark}" + (f"; {c.note}" if c.note else "")
        )
    lines += [f"problem: {escape.terminal(p)}" for p in found.problems]
    lines.append(
        "verified: every check passed" if found.ok else f"{len(found.problems)} problems found"
    )
    return lines
