"""A problem package (the Kattis / ICPC format, legacy and 2023-07) read from its folder:
problem.yaml, the tests of data/ in the spec's order with their groups' flags, the input and
output validators, and the submissions with the verdicts their folders promise."""

from __future__ import annotations

import math
import shlex
import stat
import tempfile
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from pipeline import escape
from pipeline.config import LanguageSetting
from pipeline.errors import UsageError
from pipeline.games.registry import find_problem
from pipeline.judging import languages as languages_of
from pipeline.judging.languages import NotJudged
from pipeline.judging.programs import UNAVAILABLE, toolchain

# submissions/FOLDER: the verdicts its programs promise (docs/packages.md)
PROMISES = (
    "accepted",
    "partially_accepted",
    "wrong_answer",
    "time_limit_exceeded",
    "run_time_error",
)
MAX_FILE_BYTES = 1 << 20  # of one source file of a program
GAME_FILE = "gamebatch.yaml"  # names the game of a package gamebatch wrote
ZIP_BYTES = 4 << 30  # a zipped package, unpacked, at most


@dataclass(frozen=True)
class Limits:
    """problem.yaml's limits (the spec's defaults where it gives none)."""

    time_multiplier: float = 5.0  # the time limit over the slowest accepted run
    time_safety_margin: float = 2.0  # a TLE submission runs past the limit times this
    time_limit: float | None = None  # stated outright (2023-07), else derived
    memory_mb: int = 2048
    output_mb: int = 8
    compilation_seconds: float = 60.0
    validation_seconds: float = 60.0
    validation_memory_mb: int = 2048


@dataclass(frozen=True)
class PackageTest:
    """One test: its input, its answer, and the flags its groups give the validators."""

    name: str  # its path under data/ without the extension: sample/1, secret/group1/05
    input: Path
    answer: Path
    input_flags: tuple[str, ...] = ()
    output_flags: tuple[str, ...] = ()

    @property
    def sample(self) -> bool:
        """Whether it is a sample test."""
        return self.name.startswith("sample/")


@dataclass(frozen=True)
class PackageProgram:
    """A program of the package: its files (one source, or a folder's), its entry file, its
    language; or why it is not judged here."""

    name: str  # its path in the package: submissions/accepted/hello.py
    files: tuple[tuple[str, Path], ...] = ()  # (name in its folder, path)
    entry: str = ""
    language: str = ""
    not_judged: str = ""  # why not (a language not supported here, or not on this machine)


@dataclass(frozen=True)
class Package:
    """Everything verify and a grading read of a package."""

    root: Path
    name: str
    scoring: bool  # type: scoring (else pass-fail)
    limits: Limits
    validator_flags: tuple[str, ...]
    tests: list[PackageTest]
    groups: Group  # data/, and in it every group and test
    invalid_inputs: list[Path]
    input_validators: list[PackageProgram]
    output_validator: PackageProgram | None  # None: the default validator
    submissions: dict[str, list[PackageProgram]] = field(default_factory=dict)  # by promise
    notes: list[str] = field(default_factory=list)
    game: str | None = None  # one of gamebatch's games (gamebatch.yaml): judged case by case

    @property
    def checker(self) -> str:
        """How the output validator is called: "kattis" (`validator input answer feedback_dir
        < output`, exit 42 or 43), or "testlib" for a testlib checker (it includes
        testlib.h: `checker input output answer`, exit 0, 1 or 2)."""
        found = self.output_validator
        if found is None or not found.files:
            return "kattis"
        for name, path in found.files:
            if name == "testlib.h" or (name == found.entry and b"testlib.h" in path.read_bytes()):
                return "testlib"
        return "kattis"


@contextmanager
def opened(path: Path) -> Iterator[Path]:
    """A package's folder: `path` itself, or a .zip of one unpacked into a temporary folder
    for as long as it is used (every entry checked first: no absolute paths, no `..`, no
    links, at most ZIP_BYTES unpacked)."""
    if path.is_dir():
        yield path
        return
    if not zipfile.is_zipfile(path):
        raise UsageError(f"{path} is neither a package's folder nor a .zip of one")
    with zipfile.ZipFile(path) as archive, tempfile.TemporaryDirectory() as temporary:
        members = archive.infolist()
        if sum(m.file_size for m in members) > ZIP_BYTES:
            raise UsageError(f"{path} unpacks to more than {ZIP_BYTES >> 20} MiB")
        for member in members:
            parts = PurePosixPath(member.filename).parts
            link = stat.S_ISLNK(member.external_attr >> 16)
            if member.filename.startswith("/") or ".." in parts or "\\" in member.filename or link:
                raise UsageError(f"{path}: entry {member.filename[:80]!r} is not a plain path")
        archive.extractall(temporary)
        root = Path(temporary)
        inner = [p for p in root.iterdir() if p.is_dir()]
        if not (root / "problem.yaml").is_file() and len(inner) == 1:
            root = inner[0]  # a zip of the package's folder
        yield root


def read(root: Path, languages: dict[str, LanguageSetting]) -> Package:
    """The package in folder `root`; a UsageError names what is wrong with it."""
    if not (root / "problem.yaml").is_file():
        raise UsageError(f"{root} is not a problem package: it has no problem.yaml")
    doc = _yaml(root / "problem.yaml")
    notes: list[str] = []
    kind = str(doc.get("type", "pass-fail"))
    validation = str(doc.get("validation", "default"))
    if "interactive" in validation.split() or "interactive" in kind.split():
        raise UsageError(f"{root}: interactive problems are not judged here (docs/packages.md)")
    if kind not in ("pass-fail", "scoring"):
        raise UsageError(f"{root}/problem.yaml: type {kind!r} is not pass-fail or scoring")
    checker = _output_validator(root, languages, notes)
    tests, groups = tests_of(root / "data")
    if validation.startswith("custom") and checker is None:
        raise UsageError(f"{root}: validation is custom, but it has no output validator")
    return Package(
        root=root,
        name=_name(doc, root),
        scoring=kind == "scoring" or "score" in validation.split(),
        limits=_limits(doc.get("limits") or {}, root),
        validator_flags=_flags(doc.get("validator_flags")),
        tests=tests,
        groups=groups,
        invalid_inputs=sorted((root / "data" / "invalid_input").rglob("*.in")),
        input_validators=_programs_in(root / "input_validators", root, languages, notes),
        output_validator=checker,
        submissions={
            promise: _programs_in(root / "submissions" / promise, root, languages, notes)
            for promise in PROMISES
        },
        notes=notes,
        game=_game(root),
    )


@dataclass(frozen=True)
class Group:
    """A test group: its folder's name under data/, its settings (its testdata.yaml over its
    parent's, over the format's defaults), and its tests and subgroups in the spec's order."""

    name: str
    config: dict[str, Any]
    items: list[Group | str]  # a test by its name, or a subgroup


GROUP_DEFAULTS: dict[str, Any] = {
    "on_reject": "break",
    "grader_flags": "",
    "accept_score": 1.0,
    "reject_score": 0.0,
    "range": "-inf +inf",
}


def tests_of(data: Path) -> tuple[list[PackageTest], Group]:
    """data/sample then data/secret, each folder's tests and groups in lexicographic order,
    every group's testdata.yaml (test_group.yaml) settings inherited by its tests and
    subgroups; the tests in that order, and the group of data/ itself."""
    found: list[PackageTest] = []
    root = Group("data", _group_flags(data, GROUP_DEFAULTS), [])
    for part in ("sample", "secret"):
        if (data / part).is_dir():
            root.items.append(_walk(data, data / part, root.config, found))
    if not found:
        raise UsageError(f"{data} holds no tests (data/sample/*.in, data/secret/*.in)")
    return found, root


def _walk(data: Path, folder: Path, inherited: dict[str, Any], found: list[PackageTest]) -> Group:
    flags = _group_flags(folder, inherited)
    group = Group(folder.relative_to(data).as_posix(), flags, [])
    for path in sorted(folder.iterdir()):
        if path.is_dir():
            group.items.append(_walk(data, path, flags, found))
        elif path.suffix == ".in" and path.is_file():
            answer = path.with_suffix(".ans")
            if not answer.is_file():
                raise UsageError(f"{path} has no answer file {answer.name}")
            name = path.relative_to(data).with_suffix("").as_posix()
            inputs, outputs = (
                flags.get("input_validator_flags"),
                flags.get("output_validator_flags"),
            )
            found.append(PackageTest(name, path, answer, _flags(inputs), _flags(outputs)))
            group.items.append(name)
    return group


def _group_flags(folder: Path, inherited: dict[str, Any]) -> dict[str, Any]:
    for name in ("testdata.yaml", "test_group.yaml"):
        if (folder / name).is_file():
            return {**inherited, **_yaml(folder / name)}
    return inherited


def _programs_in(
    folder: Path, root: Path, languages: dict[str, LanguageSetting], notes: list[str]
) -> list[PackageProgram]:
    """The programs of a folder: each file a program, each subfolder one."""
    if not folder.is_dir():
        return []
    found = []
    for path in sorted(folder.iterdir()):
        if path.name.startswith(".") or path.is_symlink():
            continue
        program = program_of(path, root, languages)
        if program.not_judged:
            notes.append(f"{program.name}: {program.not_judged}")
        found.append(program)
    return found


def _output_validator(
    root: Path, languages: dict[str, LanguageSetting], notes: list[str]
) -> PackageProgram | None:
    """The custom output validator (legacy output_validators/NAME, or 2023-07's
    output_validator/), or None."""
    if (root / "output_validator").is_dir():  # 2023-07: the folder is the program
        program = program_of(root / "output_validator", root, languages)
        if program.not_judged:
            notes.append(f"{program.name}: {program.not_judged}")
        return program
    programs = _programs_in(root / "output_validators", root, languages, notes)
    if len(programs) > 1:
        raise UsageError(f"{root / 'output_validators'} holds more than one output validator")
    return programs[0] if programs else None


def program_of(path: Path, root: Path, languages: dict[str, LanguageSetting]) -> PackageProgram:
    """A program: one source file, or a folder of them (its entry the one source of a
    language, or main.*, or the first); not judged when no language here takes it."""
    name = path.relative_to(root).as_posix()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    files = [p for p in files if not p.is_symlink() and not p.name.startswith(".")]
    if path.is_dir() and {"build", "run"} & {p.name for p in files}:
        return PackageProgram(name, not_judged="programs with build or run scripts are not judged")
    sources = [p for p in files if languages_of.is_source(p.name, languages)]
    if not sources:
        return PackageProgram(name, not_judged="no source file of a language judged here")
    entries = [p for p in sources if p.stem.casefold() == "main"] or sources
    entry = entries[0]
    try:
        with entry.open("rb") as stream:
            language = languages_of.identify(entry.name, stream.readline(256), languages)
    except NotJudged as why:
        return PackageProgram(name, not_judged=str(why))
    lang = languages[language]
    made = toolchain(lang.version)
    if made.startswith(UNAVAILABLE):
        install = f"; apt-get install {lang.package}" if lang.package else ""
        return PackageProgram(name, not_judged=f"no {lang.name or language} here{install}")
    base = path if path.is_dir() else path.parent
    named = tuple((p.relative_to(base).as_posix(), p) for p in files)
    for inner, file in named:
        if file.stat().st_size > MAX_FILE_BYTES or "/" in inner:
            return PackageProgram(name, not_judged=f"{inner}: in a subfolder, or over 1 MiB")
    return PackageProgram(name, named, entry.name, language)


def _game(root: Path) -> str | None:
    """The game a package's gamebatch.yaml names, if it is one of ours (registered here)."""
    if not (root / GAME_FILE).is_file():
        return None
    game = _yaml(root / GAME_FILE).get("game")
    return str(game) if game is not None and find_problem(str(game)) is not None else None


def _name(doc: dict[str, Any], root: Path) -> str:
    name = doc.get("name")
    if isinstance(name, dict):  # 2023-07: by language
        name = name.get("en") or next(iter(name.values()), None)
    return escape.file_name(str(name)) if name else root.name


def _limits(doc: dict[str, Any], root: Path) -> Limits:
    if not isinstance(doc, dict):
        raise UsageError(f"{root}/problem.yaml: limits is not a mapping")
    try:
        base = Limits()
        stated = doc.get("time_limit")
        return Limits(
            time_multiplier=float(doc.get("time_multiplier", base.time_multiplier)),
            time_safety_margin=float(doc.get("time_safety_margin", base.time_safety_margin)),
            time_limit=float(stated) if stated is not None else None,
            memory_mb=int(doc.get("memory", base.memory_mb)),
            output_mb=int(doc.get("output", base.output_mb)),
            compilation_seconds=float(doc.get("compilation_time", base.compilation_seconds)),
            validation_seconds=float(doc.get("validation_time", base.validation_seconds)),
            validation_memory_mb=int(doc.get("validation_memory", base.validation_memory_mb)),
        )
    except (TypeError, ValueError) as exc:
        raise UsageError(f"{root}/problem.yaml: a limit that is not a number: {exc}") from None


def derived_time_limit(limits: Limits, slowest: float) -> float:
    """The time limit: as stated, else the slowest accepted run times the multiplier,
    rounded up to whole seconds (as the spec derives it)."""
    if limits.time_limit is not None:
        return limits.time_limit
    return float(max(1, math.ceil(slowest * limits.time_multiplier)))


def _flags(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, list):
        return tuple(str(v) for v in value)
    return tuple(shlex.split(str(value)))


def _yaml(path: Path) -> dict[str, Any]:
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise UsageError(f"cannot read {path}: {exc}") from None
    if not isinstance(doc, dict):
        raise UsageError(f"{path} is not a mapping")
    return doc
