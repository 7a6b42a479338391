"""Judging chunks on a worker: a program compiled once per (source, language, compiler) on
this host, in the sandbox, then run on the chunk's cases, each case judged
(pipeline.judging.cases)."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from pipeline.config import JudgeSettings, LanguageSetting
from pipeline.data.messages import ANSWER_CODES, BadPayload, JudgePayload
from pipeline.games.problem import Problem
from pipeline.grading.verdicts import KEPT, output_lines
from pipeline.judging.cases import (
    Attempt,
    CaseVerdict,
    case_key,
    compile_error,
    decode_verdict,
    encode_verdict,
    judge_known,
)
from pipeline.judging.programs import ENTRY, JUDGING, toolchain
from pipeline.judging.sandbox import Bind, Limits, Sandbox, Status, shared_folder
from pipeline.store.protocol import Store

COMPILER_SHOWN = 20  # lines of a compiler's messages kept for a CE


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
    made = f"{JUDGING}:{payload.language}:{lang!r}:{payload.toolchain}:{list(payload.limits)}"
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
        program = program_key(payload, lang)
        built = payload.refused or self.compile(payload.source, payload.language, lang)
        if isinstance(built, str):
            memory.store.note_judged(memory.job_id, program, failed=True, run=0, kept=0)
            return _letters(compile_error(len(words), built), payload.file, payload.first)
        keys = [case_key(case, word) for case, word in zip(payload.cases, words, strict=True)]
        known = memory.kept(program, keys)
        limits = Limits(*payload.limits)
        found, fresh = judge_known(
            words,
            known,
            lambda batch: run_batch(
                self.sandbox, built, list(lang.run), [payload.cases[i] for i in batch], limits
            ),
            batch=len(words),
            lazy=payload.lazy,
        )
        memory.store.keep_verdicts(
            program, {keys[i]: encode_verdict(v) for i, v in fresh.items()}, memory.ttl
        )
        kept = len(words) - len(fresh)
        memory.store.note_judged(memory.job_id, program, failed=False, run=len(fresh), kept=kept)
        return _letters(found, payload.file, payload.first)

    def compile(self, source: bytes, name: str, lang: LanguageSetting) -> Path | str:
        """The folder of the runnable program, or the compiler's messages (a CE); compiled
        once per (source, language, compiler) on this machine."""
        key = hashlib.sha256(source + f"{name}:{lang!r}:{toolchain(lang.version)}".encode())
        done = self.cache / key.hexdigest()
        with self._lock, (self.cache / f"{key.hexdigest()}.lock").open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # another process of this host building it: wait
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
