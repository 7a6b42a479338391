"""Which language a contestant's source is in (its extension, a language code it was given,
its shebang), and a language's commands and limits for one program (no I/O here)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from pipeline.config import LanguageSetting
from pipeline.language_table import NOT_SUPPORTED, NOT_SUPPORTED_EXTENSIONS

DEFAULT_PROCESSES = 16  # a run's processes and threads where its language says nothing
COMPILE_MEMORY_MB = 1024  # a compiler's memory where its language says nothing
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+-]{0,127}$")  # an entry file's name


class NotJudged(Exception):
    """A source that is not judged here (no language of it, or one not supported): never a
    compile error of its contestant."""


def by_extension(name: str, languages: dict[str, LanguageSetting]) -> list[str]:
    """The languages whose extensions `name` ends with, in the settings' order."""
    return [k for k, lang in languages.items() if any(name.endswith(e) for e in lang.extensions)]


def is_source(name: str, languages: dict[str, LanguageSetting]) -> bool:
    """Whether a file of this name is a program's source (of a language judged or not)."""
    unsupported = any(name.endswith(e) for e in NOT_SUPPORTED_EXTENSIONS)
    return not name.startswith(".") and (unsupported or bool(by_extension(name, languages)))


def identify(
    name: str, first_line: bytes, languages: dict[str, LanguageSetting], code: str = ""
) -> str:
    """The language of the entry file `name` whose first line is `first_line`: the one `code`
    names (a key or one of its codes, in any letter case), else the one of its extension
    whose shebang the first line matches, else the first of its extension. NotJudged when
    none fits, or the shebang names a language not supported here (`#!...python2`)."""
    line = first_line.decode("utf-8", errors="replace").rstrip("\r\n")
    for extension, language in NOT_SUPPORTED_EXTENSIONS.items():
        if name.endswith(extension):
            raise NotJudged(f"{language} ({extension}) is not judged here")
    for pattern, language in NOT_SUPPORTED.items():
        if re.search(pattern, line):
            raise NotJudged(f"{language} (its first line says so) is not judged here")
    fitting = by_extension(name, languages)
    if code:
        named = find_code(code, languages)
        if named not in fitting:
            raise NotJudged(f"language {code!r} does not take a file named {name!r}")
        return named
    if not fitting:
        raise NotJudged(f"no language takes a file named {name!r}")
    for key in fitting:
        shebang = languages[key].shebang
        if shebang and re.search(shebang, line):
            return key
    return next((k for k in fitting if not languages[k].shebang), fitting[0])


def find_code(code: str, languages: dict[str, LanguageSetting]) -> str:
    """The language a code names (its key, or one of its codes; letter case aside)."""
    wanted = code.strip().casefold()
    for key, lang in languages.items():
        if wanted == key.casefold() or wanted in (c.casefold() for c in lang.codes):
            return key
    known = ", ".join(sorted(languages))
    raise NotJudged(f"no language is called {code.strip()[:40]!r} here (known: {known})")


def entry_of(name: str, source: bytes, lang: LanguageSetting) -> str:
    """The file name a source is compiled under: its own, or, for a language whose entry is
    named by what it declares (Java: the public class), that name with the extension."""
    if not lang.entry_pattern:
        return name
    found = re.search(lang.entry_pattern.encode(), source)
    if found is None:
        return name
    named = found.group(1).decode("ascii", errors="replace") + "." + name.rsplit(".", 1)[-1]
    return named if _NAME.match(named) else name


def entry_name(name: str) -> str:
    """An entry file's name as the sandbox may be given it; ValueError if it is not one
    (a path, a hidden file, odd characters)."""
    if not _NAME.match(name):
        raise ValueError(f"{name[:80]!r} is not a plain file name")
    return name


@dataclass(frozen=True)
class Commands:
    """A language's commands for one entry file under one memory limit."""

    compile: list[str]
    run: list[str]


def commands(lang: LanguageSetting, entry: str, memory_bytes: int) -> Commands:
    """The compile and run commands with their placeholders filled in."""
    stem = entry.rsplit(".", 1)[0]
    memory_mb = memory_bytes >> 20
    values = {
        "file": entry,
        "stem": stem,
        "memory_mb": str(memory_mb),
        "heap_mb": str(max(memory_mb - lang.runtime_mb, 16)),
    }

    def filled(argv: tuple[str, ...]) -> list[str]:
        return [_fill(arg, values) for arg in argv]

    return Commands(filled(lang.compile), filled(lang.run))


def _fill(arg: str, values: dict[str, str]) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: values.get(m.group(1), m.group(0)), arg)


def processes(lang: LanguageSetting) -> int:
    """A run's processes and threads, at most."""
    return lang.processes or DEFAULT_PROCESSES


def out_of_memory(lang: LanguageSetting, stderr_tail: bytes) -> bool:
    """Whether a run's standard error says its runtime's heap ran out (an MLE)."""
    text = stderr_tail.decode("utf-8", errors="replace")
    return any(marker in text for marker in lang.memory_errors)
