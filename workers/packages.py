"""A problem package's chunk on a worker: a submission run on one test in the sandbox and its
output validated (the default validator here, or the package's own in the sandbox, by the
Kattis calling convention), an input validator run on a test, or a contestant's output file
validated as it is."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from pipeline.config import LanguageSetting
from pipeline.data.messages import BadPayload, ProgramFiles, RunPayload, RunTest
from pipeline.grading.verdicts import judge, output_lines
from pipeline.judging import languages
from pipeline.judging.programs import UNAVAILABLE, toolchain
from pipeline.judging.sandbox import Bind, Limits, Status, shared_folder
from pipeline.packages import default_validator
from workers.programs import Runner, system_binds

ACCEPTED, WRONG = 42, 43  # an output validator's exit statuses (and an input validator's 42)
TESTLIB_WRONG = (1, 2, 7)  # a testlib checker's WA, PE and partial points
JUDGE_ERROR = "J"  # a validator that failed: the judge's fault, never the contestant's
NOT_RUN = "N"  # a test after the first failing one, in a chunk that stops there
LETTERS = {Status.TLE: "T", Status.MLE: "L", Status.OLE: "O", Status.RE: "R"}
MESSAGE_BYTES = 2048  # of a validator's judge message kept
RUNS = "runs"  # under the sandbox's root: a folder per run, named by its worker's pid first


@dataclass(frozen=True)
class Verdict:
    """One run's verdict: its letter, what a report shows, CPU time and peak memory."""

    letter: str
    message: str
    cpu_seconds: float = 0.0
    peak_bytes: int = 0


def sweep_runs() -> None:
    """Remove the run folders of workers that are gone (killed in the middle of a run)."""
    for folder in shared_folder(RUNS).iterdir():
        pid = folder.name.split("-", 1)[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(folder, ignore_errors=True)


def needs_sandbox(payload: RunPayload) -> bool:
    """Whether the chunk runs a program (a submission or a validator), not only the default
    validator or a game's per-case comparison."""
    return payload.mode != "output" or payload.validator is not None


def run_chunk(runner: Runner | None, payload: RunPayload) -> tuple[str, str]:
    """The chunk's letters (one a test, or one a case of a game's test; N: not run after a
    failure, with `stop`) and its details, as a judging chunk's; `runner` may be None for a
    chunk that needs no sandbox."""
    found: list[list[Verdict]] = []
    program: tuple[Path, LanguageSetting] | str | None = None
    if payload.mode != "output":
        if runner is None or payload.program is None:
            raise BadPayload(f"a run of mode {payload.mode!r} without a program or a sandbox")
        program = _built(runner, payload.program, payload.limits)
    for test in payload.tests:
        if payload.stop and found and any(v.letter != "A" for v in found[-1]):
            found.append(_spread(Verdict(NOT_RUN, ""), test))
        elif isinstance(program, str):
            found.append(_spread(Verdict("C", program if not found else ""), test))
        elif program is None or runner is None:
            found.append(_output_judged(runner, payload, test))
        else:
            found.append(_judged(runner, payload, program, test))
    flat = [v for test in found for v in test]
    letters = "".join(v.letter for v in flat)
    shown = [[i, v.message] for i, v in enumerate(flat, 1) if v.letter not in ("A", NOT_RUN)]
    usage = [[round(v.cpu_seconds * 1e6), v.peak_bytes >> 10] for v in flat]
    return letters, json.dumps([[payload.file, len(flat), shown, None, usage]])


def _judged(
    runner: Runner, payload: RunPayload, program: tuple[Path, LanguageSetting], test: RunTest
) -> list[Verdict]:
    """A test's verdict (a verdict a case, for a game's test)."""
    folder, lang = program
    runs = shared_folder(RUNS)
    with tempfile.TemporaryDirectory(prefix=f"{os.getpid()}-", dir=runs) as work:
        place = Path(work)
        os.chmod(place, 0o711)
        given = _file(place / "input", test.input)
        if payload.program is None or payload.mode not in ("solve", "input"):
            raise BadPayload(f"a run of mode {payload.mode!r}")
        if payload.mode == "input":
            return [_input_validation(runner, payload, program, given, test.flags)]
        output = place / "output"
        limits = Limits(*payload.limits, processes=languages.processes(lang))
        argv = languages.commands(lang, payload.program.entry, limits.memory_bytes).run
        with given.open("rb") as stdin, output.open("wb") as stdout:
            run = runner.sandbox.run(argv, limits, _binds(folder, lang), stdin=stdin, stdout=stdout)
        if run.status != Status.OK:
            failed = Verdict(LETTERS[run.status], run.detail, run.cpu_seconds, run.peak_bytes)
            return _spread(failed, test)
        if test.cases:
            return _per_case(output.read_bytes(), test, run.cpu_seconds, run.peak_bytes)
        found = _validated(runner, payload, test, place, given, output)
        return [Verdict(found.letter, found.message, run.cpu_seconds, run.peak_bytes)]


def _output_judged(runner: Runner | None, payload: RunPayload, test: RunTest) -> list[Verdict]:
    """A contestant's output file's verdict (a verdict a case, for a game's test): no file is
    a wrong answer."""
    if test.output is None:
        return _spread(Verdict("W", "no output file"), test)
    if test.cases:
        return _per_case(test.output, test, 0.0, 0)
    if payload.validator is None:  # the default validator: nothing to run
        return [_by_default_validator(test.output, test)]
    if runner is None:
        raise BadPayload("an output validator to run, and no sandbox")
    with tempfile.TemporaryDirectory(prefix=f"{os.getpid()}-", dir=shared_folder(RUNS)) as work:
        place = Path(work)
        os.chmod(place, 0o711)
        given = _file(place / "input", test.input)
        output = _file(place / "output", test.output)
        return [_validated(runner, payload, test, place, given, output)]


def _spread(verdict: Verdict, test: RunTest) -> list[Verdict]:
    """A run's verdict for each case of a game's test (its time shared out among them),
    or for the test."""
    if not test.cases:
        return [verdict]
    share = dataclasses.replace(verdict, cpu_seconds=verdict.cpu_seconds / test.cases)
    return [share] + [dataclasses.replace(share, message="")] * (test.cases - 1)


def _per_case(data: bytes, test: RunTest, cpu: float, peak: int) -> list[Verdict]:
    """A game's test, judged case by case: each line by its answer's line (more lines than
    cases make the last case wrong)."""
    wanted = output_lines(test.answer.split(b"\n"))[: test.cases]
    wanted += [""] * (test.cases - len(wanted))
    lines = output_lines(data.split(b"\n"))
    found = []
    for number, want in enumerate(wanted):
        line = lines[number] if number < len(lines) else None
        letter = judge(want, line, ignore_case=False)
        said = "" if letter == "A" else f"case {number + 1}: expected {want}, found {line!r}"
        found.append(Verdict(letter, said, cpu / test.cases, peak))
    if len(lines) > test.cases:
        said = f"more lines than cases: {lines[test.cases][:60]!r}"
        found[-1] = dataclasses.replace(found[-1], letter="W", message=said)
    return found


def _validated(
    runner: Runner, payload: RunPayload, test: RunTest, place: Path, given: Path, output: Path
) -> Verdict:
    """The output's verdict from the default validator, or the package's own."""
    if payload.validator is None:
        return _by_default_validator(output.read_bytes(), test)
    checker = _built(runner, payload.validator, payload.validation)
    if isinstance(checker, str):
        return Verdict(JUDGE_ERROR, f"the output validator did not compile: {checker[:500]}")
    folder, lang = checker
    answer = _file(place / "answer", test.answer)
    limits = Limits(*payload.validation, processes=languages.processes(lang))
    argv = languages.commands(lang, payload.validator.entry, limits.memory_bytes).run
    binds = [*_binds(folder, lang), Bind(given, "/judge/input"), Bind(answer, "/judge/answer")]
    if payload.checker == "testlib":
        return _testlib(runner, limits, argv, binds, output)
    feedback = place / "feedback"
    feedback.mkdir(mode=0o755)
    argv += ["/judge/input", "/judge/answer", "/judge/feedback/", *test.flags]
    binds.append(Bind(feedback, "/judge/feedback", writable=True))
    with output.open("rb") as stdin:
        run = runner.sandbox.run(argv, limits, binds, stdin=stdin)
    said = _message(feedback / "judgemessage.txt")
    if run.status == Status.OK or (
        run.status == Status.RE and run.exit_code not in (ACCEPTED, WRONG)
    ):
        return Verdict(JUDGE_ERROR, f"the output validator {run.detail or 'exited with 0'}: {said}")
    if run.status != Status.RE:
        return Verdict(JUDGE_ERROR, f"the output validator ran out of its limits ({run.detail})")
    return Verdict("A" if run.exit_code == ACCEPTED else "W", said)


def _by_default_validator(output: bytes, test: RunTest) -> Verdict:
    try:
        flags = default_validator.Flags.parse(test.flags)
    except ValueError as exc:
        return Verdict(JUDGE_ERROR, f"the default validator's flags: {exc}")
    why = default_validator.validate(output, test.answer, flags)
    return Verdict("A" if why is None else "W", why or "")


def _testlib(
    runner: Runner, limits: Limits, argv: list[str], binds: list[Bind], output: Path
) -> Verdict:
    """A testlib checker (Polygon, Codeforces): `checker input output answer`, exit 0 OK, 1
    WA, 2 PE (a wrong answer here), 7 partial points (wrong too, for pass-fail), 3 its own
    failure (a judge error); what it says is on standard error."""
    binds = [*binds, Bind(output, "/judge/output")]
    with tempfile.TemporaryFile() as said:
        run = runner.sandbox.run(
            [*argv, "/judge/input", "/judge/output", "/judge/answer"], limits, binds, stderr=said
        )
        said.seek(0)
        message = said.read(MESSAGE_BYTES).decode(errors="replace").strip()
    if run.status == Status.OK:
        return Verdict("A", "")
    if run.status == Status.RE and run.exit_code in TESTLIB_WRONG:
        return Verdict("W", message)
    return Verdict(JUDGE_ERROR, f"the testlib checker {run.detail}: {message}")


def _input_validation(
    runner: Runner,
    payload: RunPayload,
    program: tuple[Path, LanguageSetting],
    given: Path,
    flags: list[str],
) -> Verdict:
    """A: the input validator accepts the test (exit 42), W: it rejects it, J: it failed."""
    folder, lang = program
    limits = Limits(*payload.limits, processes=languages.processes(lang))
    entry = payload.program.entry if payload.program else ""
    argv = languages.commands(lang, entry, limits.memory_bytes).run
    with tempfile.TemporaryFile() as said, given.open("rb") as stdin:
        run = runner.sandbox.run(
            [*argv, *flags], limits, _binds(folder, lang), stdin=stdin, stderr=said
        )
        said.seek(0)
        message = said.read(MESSAGE_BYTES).decode(errors="replace").strip()
    if run.status == Status.RE and run.exit_code == ACCEPTED:
        return Verdict("A", "", run.cpu_seconds, run.peak_bytes)
    if run.status in (Status.OK, Status.RE):
        said_last = message.splitlines()[-1] if message else run.detail or "exit code 0"
        return Verdict("W", said_last, run.cpu_seconds, run.peak_bytes)
    return Verdict(JUDGE_ERROR, f"the input validator ran out of its limits ({run.detail})")


def _built(
    runner: Runner, program: ProgramFiles, limits: tuple[float, int, int]
) -> tuple[Path, LanguageSetting] | str:
    """The compiled program's folder and language, or its compile error."""
    lang = runner.settings.languages.get(program.language)
    if lang is None:
        raise BadPayload(f"this worker has no language {program.language!r} (judge.languages)")
    here = toolchain(lang.version)
    if here.startswith(UNAVAILABLE) or here != program.toolchain:
        raise BadPayload(
            f"this worker's {program.language} toolchain is {here!r},"
            f" the run's {program.toolchain!r}"
        )
    try:
        names = [languages.entry_name(name) for name, _ in program.files]
    except ValueError as exc:
        raise BadPayload(f"a package program's file: {exc}") from None
    if program.entry not in names:
        raise BadPayload(f"a package program without its entry file {program.entry!r}")
    files = sorted(program.files, key=lambda f: f[0] != program.entry)  # the entry first
    built = runner.compile(files, program.language, lang)
    return built if isinstance(built, str) else (built, lang)


def _binds(folder: Path, lang: LanguageSetting) -> list[Bind]:
    return [Bind(folder, "/box"), *system_binds(lang)]


def _file(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    os.chmod(path, 0o644)
    return path


def _message(path: Path) -> str:
    try:
        with path.open("rb") as stream:
            return stream.read(MESSAGE_BYTES).decode(errors="replace").strip()
    except OSError:
        return ""
