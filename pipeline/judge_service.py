"""Judging contestants' programs (`grade --programs`): each is compiled once per (source,
language, compiler) in the sandbox, then run there on every test's cases, batched and split
until each failing case stands alone (pipeline.judging), into the grading's verdicts."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from pipeline import comparing, escape
from pipeline.config import JudgeSettings, LanguageSetting
from pipeline.errors import UsageError
from pipeline.grading import Submission, Test
from pipeline.judging import Attempt, CaseVerdict, compile_error, judge_cases
from pipeline.messages import ANSWER_CODES
from pipeline.problem import Problem
from pipeline.reader import read_cases
from pipeline.sandbox import Bind, Limits, Sandbox, Status, shared_folder
from pipeline.tokens import TokenReader
from pipeline.verdicts import KEPT, FileVerdicts, output_lines

JUDGING = 4  # the version of how programs are judged: part of every verdict's key
COMPILER_SHOWN = 20  # lines of a compiler's messages kept for a CE
ENTRY = "main"  # a contestant's entry file is main.<extension>


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


class Judge:
    """Compiles and runs the programs of one grading in the sandbox."""

    def __init__(self, settings: JudgeSettings, problem: Problem) -> None:
        self.settings, self.problem = settings, problem
        self.sandbox = Sandbox(settings.first_uid, settings.slots)
        self.sandbox.check()
        self.cache = shared_folder("programs")  # compiled once per machine (until a reboot)
        self._cases: dict[Path, list[bytes]] = {}
        self._lock = threading.Lock()
        self.runs = 0  # runs of programs, over every test
        self.compiled = 0  # programs compiled (not found compiled)

    @property
    def limits(self) -> Limits:
        """Each run's limits."""
        s = self.settings
        return Limits(s.time_limit, s.memory_limit_mb << 20, s.output_limit_mb << 20)

    @cached_property
    def toolchains(self) -> dict[str, str]:
        """Each language's compiler version (its first line), asked once."""
        found = {}
        for name, lang in self.settings.languages.items():
            try:
                done = subprocess.run(
                    list(lang.version), capture_output=True, timeout=30, check=False
                )
                text = (done.stdout or done.stderr).decode(errors="replace").strip()
            except OSError as exc:
                text = f"unavailable: {exc}"
            found[name] = text.splitlines()[0] if text else "unknown"
        return found

    def salt(self, program: Program) -> str:
        """What a program's verdicts depend on besides its bytes and the answers."""
        lang = self.settings.languages[program.language]
        toolchain = self.toolchains[program.language]
        return f"{JUDGING}:{program.language}:{lang!r}:{toolchain}:{self.limits!r}"

    def verdicts(
        self, todo: Sequence[comparing.Output], programs: dict[Path, Program]
    ) -> Iterator[FileVerdicts]:
        """The verdicts of each (program, test) of `todo`, in order."""
        workers = max(1, min(os.cpu_count() or 1, self.settings.slots))
        with ThreadPoolExecutor(workers) as pool:
            yield from pool.map(lambda o: self._judge(o, programs[o.path]), todo)

    def _judge(self, output: comparing.Output, program: Program) -> FileVerdicts:
        assert output.test is not None
        words = [self.problem.answers[ANSWER_CODES.index(c)] for c in output.expected]
        built = self.compile(program)
        if isinstance(built, str):
            return _file_verdicts(compile_error(len(words), built))
        cases = self._case_texts(output.test)
        lang = self.settings.languages[program.language]
        found, runs = judge_cases(
            words,
            lambda batch: self._run(built, list(lang.run), cases, batch),
            batch=self.settings.batch_cases,
        )
        with self._lock:
            self.runs += runs
        return _file_verdicts(found)

    def _run(self, folder: Path, argv: list[str], cases: list[bytes], batch: list[int]) -> Attempt:
        with tempfile.TemporaryDirectory(prefix="gamebatch-run-") as private:
            given, taken = Path(private) / "in", Path(private) / "out"
            given.write_bytes(b"%d\n" % len(batch) + b"".join(cases[i] for i in batch))
            with given.open("rb") as stdin, taken.open("wb") as stdout:
                run = self.sandbox.run(
                    argv, self.limits, [Bind(folder, "/box")], stdin=stdin, stdout=stdout
                )
            lines = output_lines(taken.read_bytes().split(b"\n")) if run.status == Status.OK else []
        return Attempt(run.status, lines, run.cpu_seconds, run.peak_bytes, run.detail)

    def compile(self, program: Program) -> Path | str:
        """The folder of the runnable program, or the compiler's messages (a CE); compiled
        once per (source, language, compiler), kept in the cache folder."""
        lang = self.settings.languages[program.language]
        source = program.source.read_bytes()
        key = hashlib.sha256(source + self.salt(program).encode()).hexdigest()
        done = self.cache / key
        with self._lock:  # one compiler at a time per grading: their runs are the work
            if not done.exists():
                self._build(source, lang, done)
                self.compiled += 1
        error = done / "compile-error.txt"
        return error.read_text(errors="replace") if error.exists() else done / "box"

    def _build(self, source: bytes, lang: LanguageSetting, done: Path) -> None:
        work = Path(tempfile.mkdtemp(prefix="build-", dir=self.cache))
        os.chmod(work, 0o711)
        box = work / "box"
        box.mkdir(mode=0o755)
        (box / f"{ENTRY}{lang.extension}").write_bytes(source)
        limits = Limits(
            self.settings.compile_seconds, 1 << 30, 64 << 20, processes=64, tmp_bytes=256 << 20
        )
        ok = True
        if lang.compile:
            with (work / "messages").open("wb") as messages:
                run = self.sandbox.run(
                    list(lang.compile),
                    limits,
                    [Bind(box, "/box", writable=True)],
                    stdout=messages,
                    stderr=messages,
                )
            ok = run.status == Status.OK
            if not ok:
                text = (work / "messages").read_text(errors="replace").splitlines()
                why = "the compiler ran out of time or memory" if run.status != Status.RE else ""
                shown = [why] if why else text[:COMPILER_SHOWN]
                (work / "compile-error.txt").write_text("\n".join(shown).strip() or run.detail)
        os.chown(box, 0, 0)
        for path in [box, *box.rglob("*")]:  # runs are other uids: readable, not writable
            os.chown(path, 0, 0, follow_symlinks=False)
            if not path.is_symlink():
                os.chmod(path, 0o755 if path.is_dir() or os.access(path, os.X_OK) else 0o644)
        try:
            work.rename(done)
        except OSError:  # another grading compiled it meanwhile
            shutil.rmtree(work, ignore_errors=True)

    def _case_texts(self, test: Path) -> list[bytes]:
        with self._lock:
            if test not in self._cases:
                with test.open("rb") as stream:
                    self._cases[test] = [
                        self.problem.format_case(n.case).encode()
                        for n in read_cases(self.problem, TokenReader(stream, str(test)))
                    ]
            return self._cases[test]


def _file_verdicts(found: list[CaseVerdict]) -> FileVerdicts:
    result = FileVerdicts()
    result.codes = "".join(v.code for v in found)
    result.shown = [(i + 1, v.shown) for i, v in enumerate(found) if v.code != "A"][:KEPT]
    # a case accepted in a batch shows the batch's mean time (its own is at most the batch's)
    result.usage = [
        (round(v.cpu_seconds * 1e6 / max(v.batch, 1)), v.peak_bytes >> 10) for v in found
    ]
    return result
