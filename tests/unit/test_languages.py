"""Which language a source is in, each language's commands, and the programs of a folder:
contestant folders or files of their own, a `language` file, shebangs, missing toolchains."""

from __future__ import annotations

import re
from pathlib import Path

import msgspec
import pytest

from pipeline.config import JudgeSettings, LanguageSetting, SettingError, Settings, validated
from pipeline.errors import UsageError
from pipeline.judging import languages
from pipeline.judging.languages import NotJudged, commands, identify
from pipeline.judging.programs import find_programs

LANGUAGES = JudgeSettings().languages


def test_a_source_is_told_by_its_extension_its_code_and_its_shebang() -> None:
    assert identify("Different.java", b"import java.util.*;\n", LANGUAGES) == "java"
    assert identify("a.kt", b"", LANGUAGES) == "kotlin"
    assert identify("sol.cc", b"", LANGUAGES) == "cpp"
    assert identify("main.py", b"import sys\n", LANGUAGES) == "python"  # CPython by default
    assert identify("main.py", b"#!/usr/bin/env pypy3\n", LANGUAGES) == "pypy3"
    assert identify("main.py", b"#!/usr/bin/env python3\n", LANGUAGES) == "python"
    assert identify("main.py", b"", LANGUAGES, code="PyPy3") == "pypy3"  # Kattis's codes
    assert identify("main.py", b"", LANGUAGES, code="python3") == "python"
    assert identify("main.cs", b"", LANGUAGES, code="C#") == "csharp"
    assert identify("main.js", b"", LANGUAGES, code="nodejs") == "javascript"


def test_a_source_of_no_language_here_is_not_judged() -> None:
    with pytest.raises(NotJudged, match="Python 2"):
        identify("main.py", b"#!/usr/bin/python2\n", LANGUAGES)
    with pytest.raises(NotJudged, match="Python 2"):
        identify("old.py2", b"", LANGUAGES)
    with pytest.raises(NotJudged, match="no language takes"):
        identify("main.pl", b"", LANGUAGES)
    with pytest.raises(NotJudged, match="does not take"):
        identify("main.py", b"", LANGUAGES, code="java")
    with pytest.raises(NotJudged, match="no language is called"):
        identify("main.py", b"", LANGUAGES, code="cobol")


def test_commands_name_the_entry_file_and_the_heap_from_the_memory_limit() -> None:
    java = commands(LANGUAGES["java"], "Different.java", 256 << 20)
    assert java.compile[-1] == "Different.java"
    assert java.run[-1] == "Different"
    assert "-Xmx192m" in java.run and "-Xms192m" in java.run and "-Xss64m" in java.run
    kotlin = commands(LANGUAGES["kotlin"], "main.kt", 512 << 20)
    assert kotlin.run[-2:] == ["-jar", "main.jar"] and "-Xmx448m" in kotlin.run
    node = commands(LANGUAGES["javascript"], "sol.js", 256 << 20)
    assert "--max-old-space-size=224" in node.run
    assert commands(LANGUAGES["cpp"], "a.cpp", 256 << 20).compile[-1] == "a.cpp"


def test_runtimes_get_room_for_their_threads_and_the_jvm_says_when_its_heap_ran_out() -> None:
    assert languages.processes(LANGUAGES["cpp"]) == 16
    assert languages.processes(LANGUAGES["java"]) == 64
    assert languages.processes(LANGUAGES["go"]) == 32
    said = b"Terminating due to java.lang.OutOfMemoryError: Java heap space\n"
    assert languages.out_of_memory(LANGUAGES["java"], said)
    thread = b'Exception in thread "main" java.lang.OutOfMemoryError: unable to create native'
    assert not languages.out_of_memory(LANGUAGES["java"], thread)
    assert not languages.out_of_memory(LANGUAGES["cpp"], said)


def test_entry_names_are_plain_file_names() -> None:
    assert languages.entry_name("Different.java") == "Different.java"
    for bad in ("../x.py", "a/b.py", ".hidden.py", "", "a b.py"):
        with pytest.raises(ValueError):
            languages.entry_name(bad)


def _here(version: str) -> dict[str, LanguageSetting]:
    """Python and Java whose toolchains are here, and a Zed whose toolchain is not."""
    found = {
        k: msgspec.structs.replace(LANGUAGES[k], version=(version,)) for k in ("python", "java")
    }
    found["pypy3"] = msgspec.structs.replace(LANGUAGES["pypy3"], version=(version,))
    found["zed"] = LanguageSetting(
        extensions=(".zed",), compile=(), run=("zed",), version=("/nonexistent/zed",),
        name="Zed", package="zed-lang",
    )  # fmt: skip
    return found


def test_the_programs_of_a_folder_in_every_layout(tmp_path: Path) -> None:
    files = {
        "alice/main.py": "print()",  # today's layout
        "bob/Different.java": "class Different {}",  # any name, alone in its folder
        "carol/main.py": "#!/usr/bin/env pypy3\n",  # several sources: main.* is the entry
        "carol/helper.py": "",
        "dave/sol.py": "",  # a language file names the language
        "dave/language": "pypy3\n",
        "Flat.java": "class Flat {}",  # a source file of its own
        "erin/a.py": "",  # two sources and no main: skipped
        "erin/b.py": "",
        "frank/main.zed": "",  # a toolchain that is not here: not judged
        "gina/main.py": "#!/usr/bin/python2\n",  # Python 2: not judged
        "notes.txt": "",  # no source: skipped
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    (tmp_path / "empty").mkdir()
    found, notes = find_programs(tmp_path, _here("/bin/true"))
    assert [(p.contestant, p.source.name, p.language) for p in found] == [
        ("Flat.java", "Flat.java", "java"),
        ("alice", "main.py", "python"),
        ("bob", "Different.java", "java"),
        ("carol", "main.py", "pypy3"),
        ("dave", "sol.py", "pypy3"),
    ]
    assert [name for p in found for _, name in p.files()] == [
        "Flat.java", "alice/main.py", "bob/Different.java", "carol/main.py", "dave/sol.py",
        "dave/language",
    ]  # fmt: skip
    said = "\n".join(notes)
    assert "erin: more than one source file and no main.*" in said
    assert "empty: no source file" in said
    assert "frank: not judged: no Zed here (" in said and "apt-get install zed-lang" in said
    assert "gina: Python 2" in said
    assert "notes.txt: not a contestant's folder or source file" in said


def test_a_folder_without_programs_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "only").mkdir()
    (tmp_path / "only" / "main.zed").write_text("")
    with pytest.raises(UsageError, match="no contestant's program"):
        find_programs(tmp_path, _here("/bin/true"))


def test_language_settings_are_checked() -> None:
    with pytest.raises(SettingError):
        validated({"judge": {"languages": {"x": {"extensions": ["zed"], "compile": [],
                   "run": ["x"], "version": ["x"]}}}}, Settings)  # fmt: skip
    with pytest.raises(SettingError):
        validated({"judge": {"languages": {"x": {"extensions": [".z"], "compile": [],
                   "run": ["x"], "version": ["x"], "shebang": "("}}}}, Settings)  # fmt: skip


def test_a_worker_without_the_toolchain_judges_none_of_the_chunk() -> None:
    """The chunk fails with why (a judge error of the grading), never a CE of its program;
    an entry file that is not a plain name of the language is refused too."""
    from pipeline.data.messages import BadPayload, JudgePayload
    from workers.programs import Runner, _entry

    runner = object.__new__(Runner)  # no sandbox needed to refuse a chunk
    runner.settings = JudgeSettings(languages=_here("/bin/true"))
    chunk = JudgePayload("strgame", "zed", "zed 1.0", b"", (1.0, 1 << 28, 1 << 26), 0, 1, "", [])
    with pytest.raises(BadPayload, match=r"no Zed toolchain \(apt-get install zed-lang\)"):
        runner._language(chunk)
    java = LANGUAGES["java"]
    for entry in ("../Escape.java", "Escape.py"):
        with pytest.raises(BadPayload):
            _entry(msgspec.structs.replace(chunk, language="java", entry=entry), java)
    assert _entry(msgspec.structs.replace(chunk, language="java"), java) == "main.java"


def test_every_language_is_installed_by_the_worker_image_and_ci() -> None:
    root = Path(__file__).resolve().parents[2]
    dockerfile, ci = (root / "Dockerfile").read_text(), (root / ".ci" / "run").read_text()
    for name, lang in LANGUAGES.items():
        assert f" {lang.package} " in dockerfile.replace("\\\n", " "), name
        if lang.package not in ("g++", "gcc", "python3"):  # on every machine of this kind
            assert re.search(rf"[\s(]{re.escape(lang.package)}[\s)]", ci), name


def test_a_java_source_is_compiled_under_its_public_class() -> None:
    java = LANGUAGES["java"]
    source = (
        b"import java.util.*;\n\npublic final class Main {\n  public static void main() {}\n}\n"
    )
    assert languages.entry_of("main.java", source, java) == "Main.java"
    assert languages.entry_of("Sol.java", b"class Sol {}\n", java) == "Sol.java"  # no public class
    assert languages.entry_of("main.cpp", source, LANGUAGES["cpp"]) == "main.cpp"
