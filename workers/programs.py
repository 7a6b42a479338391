"""Judging chunks on a worker: a program compiled once per (source, language, compiler) on
this host, in the sandbox, then run on the chunk's cases, each case judged
(pipeline.judging.cases)."""

from __future__ import annotations

import dataclasses
import fcntl
import glob
import hashlib
import json
import os
import shutil
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from pipeline.config import JudgeSettings, LanguageSetting
from pipeline.data.messages import ANSWER_CODES, BadPayload, JudgePayload
from pipeline.games.problem import Problem
from pipeline.grading.verdicts import KEPT, output_lines
from pipeline.judging import languages
from pipeline.judging.cases import (
    Attempt,
    CaseVerdict,
    case_key,
    compile_error,
    decode_verdict,
    encode_verdict,
    judge_known,
)
from pipeline.judging.programs import ENTRY, JUDGING, UNAVAILABLE, toolchain
from pipeline.judging.sandbox import Bind, Limits, Sandbox, Status, shared_folder
from pipeline.store.protocol import Store

COMPILER_SHOWN = 20  # lines of a compiler's messages kept for a CE
STDERR_TAIL = 4096  # bytes at the end of a failed run's standard error read for its cause


@dataclass(frozen=True)
class Memory:
    """Where a judging chunk's verdicts are kept and counted: its job on the store, and how
    long kept verdicts last (result_ttl)."""

    store: Store
    job_id: str
    ttl: int

    def kept(self, program: str, keys: list[str]) -> list[CaseVerdict | None]:
        """Kept verdicts of these cases (one that does not parse counts as none)."""
        found: list[CaseVerdict | None] = []
        for value in self.store.kept_verdicts(program, keys):
            try:
                found.append(None if value is None else decode_verdict(value))
            except ValueError:
                found.append(None)
        return found


def program_key(payload: JudgePayload, lang: LanguageSetting) -> str:
    """What a program's verdicts depend on besides each case: its source, language, compiler,
    the limits and how programs are judged."""
    made = f"{JUDGING}:{payload.language}:{payload.entry}:{lang!r}:{payload.toolchain}"
    made += f":{list(payload.limits)}"
    return hashlib.sha256(payload.source + b"\0" + made.encode()).hexdigest()


class Runner:
    """A worker's judge: compiled programs kept per machine, runs in the sandbox."""

    def __init__(self, settings: JudgeSettings) -> None:
        self.settings = settings
        self.sandbox = Sandbox(settings.first_uid, settings.slots)
        self.sandbox.check()
        self.cache = shared_folder("programs")  # compiled once per machine (until a reboot)
        self._lock = threading.Lock()

    def judge(self, problem: Problem, payload: JudgePayload, memory: Memory) -> tuple[str, str]:
        """A chunk's letters, and its details as a comparison chunk's (with usage); only the
        cases whose verdicts `memory` does not keep yet are run."""
        lang = self._language(payload)
        words = [problem.answers[ANSWER_CODES.index(c)] for c in payload.expected]
        program = program_key(payload, lang)
        entry = _entry(payload, lang)
        built = payload.refused or self.compile([(entry, payload.source)], payload.language, lang)
        if isinstance(built, str):
            memory.store.note_judged(memory.job_id, program, failed=True, run=0, kept=0)
            return _letters(compile_error(len(words), built), payload.file, payload.first)
        keys = [case_key(case, word) for case, word in zip(payload.cases, words, strict=True)]
        known = memory.kept(program, keys)
        limits = Limits(*payload.limits, processes=languages.processes(lang))
        run = Running(self.sandbox, built, lang, entry, limits)
        found, fresh = judge_known(
            words,
            known,
            lambda batch: run_batch(run, [payload.cases[i] for i in batch]),
            batch=len(words),
            lazy=payload.lazy,
        )
        memory.store.keep_verdicts(
            program, {keys[i]: encode_verdict(v) for i, v in fresh.items()}, memory.ttl
        )
        kept = len(words) - len(fresh)
        memory.store.note_judged(memory.job_id, program, failed=False, run=len(fresh), kept=kept)
        return _letters(found, payload.file, payload.first)

    def _language(self, payload: JudgePayload) -> LanguageSetting:
        """The chunk's language on this worker: a worker without it, or with another version
        of its toolchain, judges none of its cases (the chunk fails with why, and nothing is
        charged to the contestant)."""
        lang = self.settings.languages.get(payload.language)
        if lang is None:
            raise BadPayload(f"this worker has no language {payload.language!r} (judge.languages)")
        here = toolchain(lang.version)
        if here.startswith(UNAVAILABLE):
            install = f" (apt-get install {lang.package})" if lang.package else ""
            raise BadPayload(
                f"this worker has no {lang.name or payload.language} toolchain{install}:"
                f" {here.removeprefix(UNAVAILABLE)}"
            )
        if here != payload.toolchain:
            raise BadPayload(
                f"this worker's {payload.language} compiler is {here!r}, the grading's"
                f" {payload.toolchain!r}: judge with the same compiler everywhere"
            )
        return lang

    def compile(
        self,
        files: list[tuple[str, bytes]],
        name: str,
        lang: LanguageSetting,
        *,
        limits: Limits | None = None,
    ) -> Path | str:
        """The folder of the runnable program, or the compiler's messages (a CE); compiled
        once per (files, language, compiler) on this machine. Its entry file is the first
        of `files` (plain names: checked by the caller)."""
        made = f"{name}:{lang!r}:{toolchain(lang.version)}:{limits!r}"
        key = hashlib.sha256(made.encode())
        for file, data in files:
            key.update(b"\0%d:%s\0" % (len(data), file.encode()) + data)
        done = self.cache / key.hexdigest()
        with self._lock, (self.cache / f"{key.hexdigest()}.lock").open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # another process of this host building it: wait
            if not done.exists():
                self._build(files, lang, done, limits)
        error = done / "compile-error.txt"
        return error.read_text(errors="replace") if error.exists() else done / "box"

    def _build(
        self,
        files: list[tuple[str, bytes]],
        lang: LanguageSetting,
        done: Path,
        limits: Limits | None,
    ) -> None:
        work = Path(tempfile.mkdtemp(prefix="build-", dir=self.cache))
        os.chmod(work, 0o711)
        box = work / "box"
        box.mkdir(mode=0o755)
        for file, data in files:
            (box / file).write_bytes(data)
        entry = files[0][0]
        if lang.compile:
            _compile(self.sandbox, self.settings, lang, entry, work, limits)
        for path in [box, *box.rglob("*")]:  # runs are other uids: readable, not writable
            os.chown(path, 0, 0, follow_symlinks=False)
            if not path.is_symlink():
                os.chmod(path, 0o755 if path.is_dir() or os.access(path, os.X_OK) else 0o644)
        try:
            work.rename(done)
        except OSError:  # another process of this machine compiled it meanwhile
            shutil.rmtree(work, ignore_errors=True)


@dataclass(frozen=True)
class Running:
    """How a compiled program runs: in which sandbox, from which folder (seen at /box), in
    which language, under which limits."""

    sandbox: Sandbox
    folder: Path
    lang: LanguageSetting
    entry: str
    limits: Limits

    def binds(self, writable: bool = False) -> list[Bind]:
        """The program's folder at /box, and the host paths its toolchain reads."""
        return [Bind(self.folder, "/box", writable), *system_binds(self.lang)]


def run_batch(run: Running, cases: list[bytes]) -> Attempt:
    """One run of the program on these cases: T, then each."""
    argv = languages.commands(run.lang, run.entry, run.limits.memory_bytes).run
    with tempfile.TemporaryDirectory(prefix="gamebatch-run-") as private:
        given, taken, said = (Path(private) / n for n in ("in", "out", "err"))
        given.write_bytes(b"%d\n" % len(cases) + b"".join(cases))
        with given.open("rb") as stdin, taken.open("wb") as stdout, said.open("w+b") as stderr:
            ended = run.sandbox.run(
                argv, run.limits, run.binds(), stdin=stdin, stdout=stdout, stderr=stderr
            )
            if ended.status == Status.RE and _tail_says_out_of_memory(run.lang, stderr):
                ended = dataclasses.replace(ended, status=Status.MLE)
        lines = output_lines(taken.read_bytes().split(b"\n")) if ended.status == Status.OK else []
    return Attempt(ended.status, lines, ended.cpu_seconds, ended.peak_bytes, ended.detail)


def _tail_says_out_of_memory(lang: LanguageSetting, stderr: IO[bytes]) -> bool:
    """Whether the end of a run's standard error says its runtime's heap ran out."""
    if not lang.memory_errors:
        return False
    size = stderr.seek(0, os.SEEK_END)
    stderr.seek(max(0, size - STDERR_TAIL))
    return languages.out_of_memory(lang, stderr.read())


def system_binds(lang: LanguageSetting) -> list[Bind]:
    """The host paths a language's toolchain reads, read-only at the same place (those that
    exist here)."""
    found = sorted({path for pattern in lang.system for path in glob.glob(pattern)})
    return [Bind(Path(path), path) for path in found if os.path.isabs(path)]


def _entry(payload: JudgePayload, lang: LanguageSetting) -> str:
    """The file name the source is compiled under (a chunk from before names none)."""
    try:
        entry = languages.entry_name(payload.entry or f"{ENTRY}{lang.extensions[0]}")
    except ValueError as exc:
        raise BadPayload(f"a judging chunk's entry file: {exc}") from None
    if not any(entry.endswith(e) for e in lang.extensions):
        raise BadPayload(f"entry file {entry!r} is not a {payload.language} file")
    return entry


def compile_limits(settings: JudgeSettings, lang: LanguageSetting) -> Limits:
    """A compiler's limits: its language's, else the judge's."""
    seconds = lang.compile_seconds or settings.compile_seconds
    memory = (lang.compile_memory_mb or languages.COMPILE_MEMORY_MB) << 20
    return Limits(seconds, memory, 64 << 20, processes=64, open_files=256, tmp_bytes=256 << 20)


def _compile(
    sandbox: Sandbox,
    settings: JudgeSettings,
    lang: LanguageSetting,
    entry: str,
    work: Path,
    given: Limits | None = None,
) -> None:
    limits = given or compile_limits(settings, lang)
    argv = languages.commands(lang, entry, limits.memory_bytes).compile
    building = Running(sandbox, work / "box", lang, entry, limits)
    with (work / "messages").open("wb") as messages:
        run = sandbox.run(
            argv, limits, building.binds(writable=True), stdout=messages, stderr=messages
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
