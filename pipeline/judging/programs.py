"""Judging contestants' programs (`grade --programs`), the grading's part: the programs of a
folder, what their verdicts are keyed by, and the chunks of (program, consecutive cases of a
test) it queues for the workers (workers/programs.py runs them)."""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from pipeline import escape
from pipeline.config import JudgeSettings, LanguageSetting
from pipeline.data.messages import JudgePayload
from pipeline.data.producer import Queuer
from pipeline.errors import UsageError
from pipeline.games.problem import Problem
from pipeline.games.reader import read_cases
from pipeline.games.tokens import TokenReader
from pipeline.grading import comparing
from pipeline.grading.rules import Submission, Test
from pipeline.judging import languages as languages_of
from pipeline.judging.languages import NotJudged
from pipeline.judging.sandbox import Limits

JUDGING = 6  # the version of how programs are judged: part of every verdict's key
ENTRY = "main"  # among several source files of a contestant, the entry is main.<extension>
CODE_FILE = "language"  # a contestant's file that names its language (`pypy3`, `python3`)
UNAVAILABLE = "unavailable: "  # how toolchain() begins for a toolchain that is not here
CHUNK_BYTES = 1 << 20  # of case texts in one judging chunk, about


@dataclass(frozen=True)
class Program:
    """A contestant's entry file and its language."""

    contestant: str
    source: Path
    language: str
    code_file: Path | None = None  # the `language` file that named its language, if one did
    alone: bool = False  # a source file of its own in the programs folder (no folder)
    entry: str = ""  # the name it is compiled under ("": its own)

    @property
    def entry_name(self) -> str:
        """The file name it is compiled under: its own, or its public class's (Java)."""
        return self.entry or self.source.name

    def files(self) -> list[tuple[Path, str]]:
        """Its files, each with its path under the programs folder."""
        if self.alone:
            return [(self.source, self.source.name)]
        found = [self.source, *([self.code_file] if self.code_file else [])]
        return [(path, f"{path.parent.name}/{path.name}") for path in found]


def find_programs(
    folder: Path, languages: dict[str, LanguageSetting]
) -> tuple[list[Program], list[str]]:
    """One program per contestant: a folder with one source file (main.<extension> among
    several), or a source file of its own in `folder` (named by its file name); notes on
    what is skipped or not judged (links and other files are never read)."""
    if not folder.is_dir():
        raise UsageError(f"programs folder {folder} does not exist")
    programs, notes = [], []
    for entry in sorted(folder.iterdir()):
        name = escape.file_name(entry.name)
        try:
            programs.append(_program(entry, languages))
        except NotJudged as why:
            notes.append(f"{name}: {escape.terminal(str(why))}")
    if not programs:
        raise UsageError(f"no contestant's program in {folder}")
    return programs, notes


def _program(entry: Path, languages: dict[str, LanguageSetting]) -> Program:
    """The program of one entry of a programs folder; NotJudged says why there is none."""
    if entry.is_symlink() or entry.name.startswith("."):
        raise NotJudged("not a contestant's folder or source file: skipped")
    if entry.is_file():
        if not languages_of.is_source(entry.name, languages):
            raise NotJudged("not a contestant's folder or source file: skipped")
        source, code_file = entry, None
    elif entry.is_dir():
        source, code_file = _entry_file(entry, languages)
    else:
        raise NotJudged("not a contestant's folder or source file: skipped")
    code = _read_code(code_file) if code_file is not None else ""
    with source.open("rb") as stream:
        first = stream.readline(256)
    language = languages_of.identify(source.name, first, languages, code)
    made = toolchain(languages[language].version)
    if made.startswith(UNAVAILABLE):
        lang = languages[language]
        install = f"; apt-get install {lang.package}" if lang.package else ""
        raise NotJudged(f"not judged: no {lang.name or language} here ({made}{install})")
    named = languages_of.entry_of(source.name, source.read_bytes(), languages[language])
    return Program(
        escape.file_name(entry.name), source, language, code_file, entry.is_file(), named
    )


def _entry_file(folder: Path, languages: dict[str, LanguageSetting]) -> tuple[Path, Path | None]:
    """A contestant folder's entry file (its one source file, or main.<extension> among
    several), and its `language` file if it has one."""
    files = [p for p in sorted(folder.iterdir()) if p.is_file() and not p.is_symlink()]
    code_file = next((p for p in files if p.name == CODE_FILE), None)
    sources = [p for p in files if languages_of.is_source(p.name, languages)]
    entries = [p for p in sources if p.stem.casefold() == ENTRY] if len(sources) > 1 else sources
    if len(entries) != 1:
        why = "no source file" if not sources else "more than one source file and no main.*"
        raise NotJudged(f"{why} of a language judged here: skipped")
    return entries[0], code_file


def _read_code(path: Path) -> str:
    """The language code a contestant's `language` file gives (its first line)."""
    with path.open("rb") as stream:
        return stream.read(64).decode("utf-8", errors="replace").strip().split("\n")[0]


def submissions(programs: list[Program], tests: list[Test]) -> list[Submission]:
    """A program's run on each test is one graded file of the grading."""
    return [
        Submission(p.contestant, t.name, p.source, f"{p.contestant}/{t.name}")
        for p in programs
        for t in tests
    ]


@cache
def toolchain(version: tuple[str, ...]) -> str:
    """A toolchain's version: the first line its version command prints ("unavailable: ..."
    when that command is missing or fails)."""
    try:
        done = subprocess.run(list(version), capture_output=True, timeout=60, check=False)
        text = (done.stdout or done.stderr).decode(errors="replace").strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{UNAVAILABLE}{exc.strerror if isinstance(exc, OSError) else exc}: {version[0]}"
    if done.returncode != 0:
        return f"{UNAVAILABLE}{' '.join(version)[:80]} exited with {done.returncode}"
    return text.splitlines()[0] if text else "unknown"


def made_by(settings: JudgeSettings, program: Program) -> tuple[str, str]:
    """A program's language (as reports name it) and its toolchain's version."""
    lang = settings.languages[program.language]
    return lang.name or program.language, toolchain(lang.version)


def limits_of(settings: JudgeSettings) -> Limits:
    """Each run's limits."""
    return Limits(
        settings.time_limit, settings.memory_limit_mb << 20, settings.output_limit_mb << 20
    )


def salt(settings: JudgeSettings, program: Program, *, lazy: bool = False) -> str:
    """What a program's verdicts depend on besides its bytes and the answers (and whether
    its tests stop at their first failing case)."""
    lang = settings.languages[program.language]
    made = f"{program.language}:{program.entry_name}:{lang!r}:{toolchain(lang.version)}"
    return f"{JUDGING}:{made}:{limits_of(settings)!r}" + (":lazy" if lazy else "")


# ---- the grading's part: chunks of (program, cases of a test)


class Chunks:
    """Queues the judging chunks of a grading's (program, test) pairs."""

    def __init__(
        self,
        problem: Problem,
        settings: JudgeSettings,
        programs: list[Program],
        *,
        lazy: bool = False,
    ) -> None:
        self.problem, self.settings, self.lazy = problem, settings, lazy
        self.programs = {p.source: p for p in programs}
        self._cases: dict[Path, list[bytes]] = {}

    def produce(self, queue: Queuer, todo: Sequence[comparing.Output]) -> tuple[int, int]:
        """Queue every chunk that has no verdicts yet; (chunks, cases). Chunks are numbered
        in file order but queued a piece of every file at a time (each program's first chunk
        first), so that the workers compile different programs at once."""
        plan, count = [], 0  # (piece of its file, chunk, file, first case, end)
        for number, output in enumerate(todo):
            assert output.test is not None
            texts = self.case_texts(output.test)
            for piece, (first, end) in enumerate(_pieces(texts, self.settings.batch_cases)):
                plan.append((piece, count, number, first, end))
                count += 1
        answered, sources = queue.store.answered(queue.job_id), _Sources(self.settings)
        for _, index, number, first, end in sorted(plan):
            if index not in answered:
                queue.put(index, self._payload(todo[number], number, first, end, sources))
        return count, sum(len(self.case_texts(o.test)) for o in todo if o.test is not None)

    def _payload(
        self, output: comparing.Output, number: int, first: int, end: int, sources: _Sources
    ) -> bytes:
        assert output.path is not None and output.test is not None
        program = self.programs[output.path]
        lang = self.settings.languages[program.language]
        source, refused = sources.of(output)
        limits = limits_of(self.settings)
        return JudgePayload(
            self.problem.name,
            program.language,
            toolchain(lang.version),
            source,
            (limits.cpu_seconds, limits.memory_bytes, limits.output_bytes),
            number,
            first + 1,
            output.expected[first:end],
            self.case_texts(output.test)[first:end],
            refused,
            self.lazy,
            program.entry_name,
        ).encode()

    def case_texts(self, test: Path) -> list[bytes]:
        """A test's cases, each as the game formats it (read once per grading, or not at all
        when this process wrote the test: see `written`)."""
        if test not in self._cases and (known := _written_texts(test)) is not None:
            self._cases[test] = known
        if test not in self._cases:
            with test.open("rb") as stream:
                self._cases[test] = [
                    self.problem.format_case(n.case).encode()
                    for n in read_cases(self.problem, TokenReader(stream, str(test)))
                ]
        return self._cases[test]


_WRITTEN: dict[Path, tuple[tuple[int, int], list[bytes]]] = {}  # see `written`
WRITTEN_KEPT = 4  # tests whose texts are kept


def written(test: Path, texts: list[bytes]) -> None:
    """The cases' texts of a test this process has just written (a hack search's round): its
    judging chunks take them from here while the file is as written, instead of reading and
    validating the file again."""
    info = test.stat()
    _WRITTEN[test] = ((info.st_size, info.st_mtime_ns), texts)
    while len(_WRITTEN) > WRITTEN_KEPT:
        del _WRITTEN[next(iter(_WRITTEN))]


def _written_texts(test: Path) -> list[bytes] | None:
    kept = _WRITTEN.get(test)
    if kept is None:
        return None
    info = test.stat()
    return kept[1] if kept[0] == (info.st_size, info.st_mtime_ns) else None


class _Sources:
    """The programs' sources, each read once and checked against the digest it was listed
    by; one over judge.max_source_kb is a refusal (no source in its chunks)."""

    def __init__(self, settings: JudgeSettings) -> None:
        self.most = settings.max_source_kb
        self.read: dict[Path, tuple[bytes, str]] = {}

    def of(self, output: comparing.Output) -> tuple[bytes, str]:
        """The source and, if refused, why."""
        assert output.path is not None
        if output.path not in self.read:
            source = output.path.read_bytes()
            if hashlib.sha256(source).hexdigest() != output.digest:
                raise UsageError(f"cannot read {output.path}: the file changed while it was read")
            refused = ""
            if len(source) > self.most << 10:
                refused, source = f"the source is over judge.max_source_kb ({self.most})", b""
            self.read[output.path] = (source, refused)
        return self.read[output.path]


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
