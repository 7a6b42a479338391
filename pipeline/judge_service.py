"""Judging contestants' programs (`grade --programs`) on the workers: the grading queues
chunks of (program, consecutive cases of a test); a worker compiles the program once per
(source, language, compiler) in the sandbox and judges each case (pipeline.judging)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from pipeline import comparing, escape
from pipeline.config import JudgeSettings, LanguageSetting
from pipeline.errors import UsageError
from pipeline.grading import Submission, Test
from pipeline.judging import Attempt, CaseVerdict, compile_error, judge_cases
from pipeline.messages import ANSWER_CODES, BadPayload, JudgePayload
from pipeline.problem import Problem
from pipeline.producer import Window
from pipeline.reader import read_cases
from pipeline.sandbox import Bind, Limits, Sandbox, Status, shared_folder
from pipeline.store import Store
from pipeline.tokens import TokenReader
from pipeline.verdicts import KEPT, output_lines

JUDGING = 4  # the version of how programs are judged: part of every verdict's key
COMPILER_SHOWN = 20  # lines of a compiler's messages kept for a CE
ENTRY = "main"  # a contestant's entry file is main.<extension>
CHUNK_BYTES = 1 << 20  # of case texts in one judging chunk, about


@dataclass(frozen=True)
class Program:
    """A contestant's entry file and its language."""

    contestant: str
    source: Path
    language: str


def find_programs(
    folder: Path, languages: dict[str, LanguageSetting]
) -> tuple[list[Program], list[str]]:
    """One program per contestant folder (its main.<extension>), and notes on folders
    skipped (none, or more than one, entry file; links and other files are never read)."""
    by_extension = {lang.extension: name for name, lang in languages.items()}
    if not folder.is_dir():
        raise UsageError(f"programs folder {folder} does not exist")
    programs, notes = [], []
    for entry in sorted(folder.iterdir()):
        name = escape.file_name(entry.name)
        if entry.is_symlink() or not entry.is_dir() or entry.name.startswith("."):
            notes.append(f"{name} is not a contestant's folder: skipped")
            continue
        found = [
            p
            for p in sorted(entry.iterdir())
            if p.stem == ENTRY and p.suffix in by_extension and p.is_file() and not p.is_symlink()
        ]
        if len(found) != 1:
            kinds = ", ".join(f"{ENTRY}{ext}" for ext in by_extension)
            why = "no entry file" if not found else "more than one entry file"
            notes.append(f"{name}: {why} (one of {kinds}): skipped")
            continue
        programs.append(Program(name, found[0], by_extension[found[0].suffix]))
    if not programs:
        raise UsageError(f"no contestant's program in {folder}")
    return programs, notes


def submissions(programs: list[Program], tests: list[Test]) -> list[Submission]:
    """A program's run on each test is one graded file of the grading."""
    return [
        Submission(p.contestant, t.name, p.source, f"{p.contestant}/{t.name}")
        for p in programs
        for t in tests
    ]


@cache
def toolchain(version: tuple[str, ...]) -> str:
    """A compiler's version: the first line its version command prints."""
    try:
        done = subprocess.run(list(version), capture_output=True, timeout=30, check=False)
        text = (done.stdout or done.stderr).decode(errors="replace").strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unavailable: {exc}"
    return text.splitlines()[0] if text else "unknown"


def limits_of(settings: JudgeSettings) -> Limits:
    """Each run's limits."""
    return Limits(
        settings.time_limit, settings.memory_limit_mb << 20, settings.output_limit_mb << 20
    )


def salt(settings: JudgeSettings, program: Program) -> str:
    """What a program's verdicts depend on besides its bytes and the answers."""
    lang = settings.languages[program.language]
    made = f"{program.language}:{lang!r}:{toolchain(lang.version)}"
    return f"{JUDGING}:{made}:{limits_of(settings)!r}"


# ---- the grading's part: chunks of (program, cases of a test)


class Chunks:
    """Queues the judging chunks of a grading's (program, test) pairs."""

    def __init__(self, problem: Problem, settings: JudgeSettings, programs: list[Program]) -> None:
        self.problem, self.settings = problem, settings
        self.programs = {p.source: p for p in programs}
        self._cases: dict[Path, list[bytes]] = {}

    def produce(
        self,
        store: Store,
        send: Callable[[str, int], None],
        job_id: str,
        todo: Sequence[comparing.Output],
        window: Window | None,
    ) -> tuple[int, int]:
        """Queue every chunk that has no verdicts yet; (chunks, cases)."""
        answered, chunks, cases = store.answered(job_id), 0, 0
        limits = limits_of(self.settings)
        for number, output in enumerate(todo):
            assert output.path is not None and output.test is not None
            program = self.programs[output.path]
            lang = self.settings.languages[program.language]
            source = output.path.read_bytes()
            if hashlib.sha256(source).hexdigest() != output.digest:
                raise UsageError(f"cannot read {output.path}: the file changed while it was read")
            texts = self.case_texts(output.test)
            for first, last in _pieces(texts, self.settings.batch_cases):
                if chunks not in answered:
                    payload = JudgePayload(
                        self.problem.name,
                        program.language,
                        toolchain(lang.version),
                        source,
                        (limits.cpu_seconds, limits.memory_bytes, limits.output_bytes),
                        number,
                        first + 1,
                        output.expected[first:last],
                        texts[first:last],
                    ).encode()
                    store.put_chunk(job_id, chunks, payload)
                    send(job_id, chunks)
                    if window is not None:
                        window.add(chunks, len(payload))
                chunks += 1
            cases += len(texts)
        return chunks, cases

    def case_texts(self, test: Path) -> list[bytes]:
        """A test's cases, each as the game formats it (read once per grading)."""
        if test not in self._cases:
            with test.open("rb") as stream:
                self._cases[test] = [
                    self.problem.format_case(n.case).encode()
                    for n in read_cases(self.problem, TokenReader(stream, str(test)))
                ]
        return self._cases[test]


def _pieces(texts: list[bytes], most: int) -> list[tuple[int, int]]:
    """Consecutive ranges of cases: at most `most` cases and about CHUNK_BYTES each."""
    pieces, start, size = [], 0, 0
    for i, text in enumerate(texts):
        if i > start and (i - start >= most or size + len(text) > CHUNK_BYTES):
            pieces.append((start, i))
            start, size = i, 0
        size += len(text)
    if start < len(texts) or not texts:
        pieces.append((start, len(texts)))
    return pieces


# ---- the worker's part


class Runner:
    """A worker's judge: compiled programs kept per machine, runs in the sandbox."""

    def __init__(self, settings: JudgeSettings) -> None:
        self.settings = settings
        self.sandbox = Sandbox(settings.first_uid, settings.slots)
        self.sandbox.check()
        self.cache = shared_folder("programs")  # compiled once per machine (until a reboot)
        self._lock = threading.Lock()

    def judge(self, problem: Problem, payload: JudgePayload) -> tuple[str, str]:
        """A chunk's letters, and its details as a comparison chunk's (with usage)."""
        lang = self.settings.languages.get(payload.language)
        if lang is None:
            raise BadPayload(f"this worker has no language {payload.language!r} (judge.languages)")
        here = toolchain(lang.version)
        if here != payload.toolchain:
            raise BadPayload(
                f"this worker's {payload.language} compiler is {here!r}, the grading's"
                f" {payload.toolchain!r}: judge with the same compiler everywhere"
            )
        words = [problem.answers[ANSWER_CODES.index(c)] for c in payload.expected]
        built = self.compile(payload.source, payload.language, lang)
        if isinstance(built, str):
            found = compile_error(len(words), built)
        else:
            cpu, memory, output = payload.limits
            limits = Limits(cpu, memory, output)
            found, _ = judge_cases(
                words,
                lambda batch: run_batch(
                    self.sandbox, built, list(lang.run), [payload.cases[i] for i in batch], limits
                ),
                batch=len(words),
            )
        return _letters(found, payload.file, payload.first)

    def compile(self, source: bytes, name: str, lang: LanguageSetting) -> Path | str:
        """The folder of the runnable program, or the compiler's messages (a CE); compiled
        once per (source, language, compiler) on this machine."""
        key = hashlib.sha256(source + f"{name}:{lang!r}:{toolchain(lang.version)}".encode())
        done = self.cache / key.hexdigest()
        with self._lock:
            if not done.exists():
                self._build(source, lang, done)
        error = done / "compile-error.txt"
        return error.read_text(errors="replace") if error.exists() else done / "box"

    def _build(self, source: bytes, lang: LanguageSetting, done: Path) -> None:
        work = Path(tempfile.mkdtemp(prefix="build-", dir=self.cache))
        os.chmod(work, 0o711)
        box = work / "box"
        box.mkdir(mode=0o755)
        (box / f"{ENTRY}{lang.extension}").write_bytes(source)
        if lang.compile:
            _compile(self.sandbox, self.settings, lang, work)
        for path in [box, *box.rglob("*")]:  # runs are other uids: readable, not writable
            os.chown(path, 0, 0, follow_symlinks=False)
            if not path.is_symlink():
                os.chmod(path, 0o755 if path.is_dir() or os.access(path, os.X_OK) else 0o644)
        try:
            work.rename(done)
        except OSError:  # another process of this machine compiled it meanwhile
            shutil.rmtree(work, ignore_errors=True)


def run_batch(
    sandbox: Sandbox, folder: Path, argv: list[str], cases: list[bytes], limits: Limits
) -> Attempt:
    """One run of the program in `folder` (seen at /box) on these cases: T, then each."""
    with tempfile.TemporaryDirectory(prefix="gamebatch-run-") as private:
        given, taken = Path(private) / "in", Path(private) / "out"
        given.write_bytes(b"%d\n" % len(cases) + b"".join(cases))
        with given.open("rb") as stdin, taken.open("wb") as stdout:
            run = sandbox.run(argv, limits, [Bind(folder, "/box")], stdin=stdin, stdout=stdout)
        lines = output_lines(taken.read_bytes().split(b"\n")) if run.status == Status.OK else []
    return Attempt(run.status, lines, run.cpu_seconds, run.peak_bytes, run.detail)


def _compile(sandbox: Sandbox, settings: JudgeSettings, lang: LanguageSetting, work: Path) -> None:
    limits = Limits(settings.compile_seconds, 1 << 30, 64 << 20, processes=64, tmp_bytes=256 << 20)
    with (work / "messages").open("wb") as messages:
        run = sandbox.run(
            list(lang.compile),
            limits,
            [Bind(work / "box", "/box", writable=True)],
            stdout=messages,
            stderr=messages,
        )
    if run.status != Status.OK:
        text = (work / "messages").read_text(errors="replace").splitlines()[:COMPILER_SHOWN]
        if run.status != Status.RE:
            text = [f"the compiler ran out of its limits ({run.detail})"]
        (work / "compile-error.txt").write_text("\n".join(text).strip() or run.detail)


def _letters(found: list[CaseVerdict], file: int, first: int) -> tuple[str, str]:
    codes = "".join(v.code for v in found)
    shown = [(first + i, v.shown) for i, v in enumerate(found) if v.code != "A"][:KEPT]
    # a case accepted in a batch shows the batch's mean time (its own is at most the batch's)
    usage = [(round(v.cpu_seconds * 1e6 / max(v.batch, 1)), v.peak_bytes >> 10) for v in found]
    return codes, json.dumps([[file, len(codes), shown, None, usage]], separators=(",", ":"))
