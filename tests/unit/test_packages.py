"""Problem packages read as the format says (tests in order, groups' flags inherited, both
spec versions), the default output validator's flags, and verify's verdicts and promises."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pipeline.config import JudgeSettings
from pipeline.errors import UsageError
from pipeline.packages import package
from pipeline.packages.default_validator import Flags, validate
from pipeline.packages.outcomes import Run, full_score, keeps, outcome, score_note, tle_margin_kept

LANGUAGES = JudgeSettings().languages


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_tests_come_in_the_specs_order_with_their_groups_flags(tmp_path: Path) -> None:
    root = _write(
        tmp_path,
        {
            "problem.yaml": "name: Groups\nvalidator_flags: case_sensitive\nlimits:\n"
            "  time_multiplier: 3\n  memory: 256\n",
            "data/sample/2.in": "", "data/sample/2.ans": "",
            "data/sample/10.in": "", "data/sample/10.ans": "",
            "data/secret/testdata.yaml": "output_validator_flags: float_tolerance 1e-3\n",
            "data/secret/b/1.in": "", "data/secret/b/1.ans": "",
            "data/secret/b/testdata.yaml": "input_validator_flags: big=1\n",
            "data/secret/a/1.in": "", "data/secret/a/1.ans": "",
            "data/secret/top.in": "", "data/secret/top.ans": "",
            "submissions/accepted/sol.py": "print()\n",
            "submissions/wrong_answer/Bad.java": "class Bad {}\n",
            "submissions/accepted/old.py": "#!/usr/bin/env python2\n",
        },
    )  # fmt: skip
    pkg = package.read(root, LANGUAGES)
    assert [t.name for t in pkg.tests] == [
        "sample/10", "sample/2", "secret/a/1", "secret/b/1", "secret/top",
    ]  # fmt: skip
    flags = {t.name: (t.input_flags, t.output_flags) for t in pkg.tests}
    assert flags["secret/a/1"] == ((), ("float_tolerance", "1e-3"))
    assert flags["secret/b/1"] == (("big=1",), ("float_tolerance", "1e-3"))
    assert flags["sample/2"] == ((), ())
    assert pkg.validator_flags == ("case_sensitive",)
    assert (pkg.limits.time_multiplier, pkg.limits.memory_mb, pkg.limits.time_limit) == (
        3,
        256,
        None,
    )
    judged = {p.name: (p.language, p.not_judged) for ps in pkg.submissions.values() for p in ps}
    assert judged["submissions/accepted/sol.py"] == ("python", "")
    assert judged["submissions/wrong_answer/Bad.java"][0] == "java"
    assert "Python 2" in judged["submissions/accepted/old.py"][1]
    assert pkg.output_validator is None and not pkg.scoring


def test_the_2023_draft_and_what_is_not_judged_here(tmp_path: Path) -> None:
    draft = _write(
        tmp_path / "draft",
        {
            "problem.yaml": "problem_format_version: 2023-07-draft\ntype: scoring\n"
            "name:\n  en: Odd Echo\n  sv: Udda eko\nlimits:\n  time_limit: 2.5\n",
            "data/secret/1.in": "", "data/secret/1.ans": "",
            "output_validator/validate.cpp": "int main() { return 42; }\n",
            "output_validator/validate.h": "\n",
        },
    )  # fmt: skip
    pkg = package.read(draft, LANGUAGES)
    assert (pkg.name, pkg.scoring, pkg.limits.time_limit) == ("Odd Echo", True, 2.5)
    assert pkg.output_validator is not None
    assert pkg.output_validator.entry == "validate.cpp"
    assert [name for name, _ in pkg.output_validator.files] == ["validate.cpp", "validate.h"]
    assert package.derived_time_limit(pkg.limits, 0.01) == 2.5
    interactive = _write(tmp_path / "guess", {"problem.yaml": "validation: custom interactive\n"})
    with pytest.raises(UsageError, match="interactive"):
        package.read(interactive, LANGUAGES)
    with pytest.raises(UsageError, match=r"no problem\.yaml"):
        package.read(tmp_path, LANGUAGES)
    no_answer = _write(tmp_path / "bare", {"problem.yaml": "name: x\n", "data/secret/1.in": ""})
    with pytest.raises(UsageError, match="no answer file"):
        package.read(no_answer, LANGUAGES)


def test_the_time_limit_is_derived_from_the_slowest_accepted_run() -> None:
    limits = package.Limits(time_multiplier=5)
    assert package.derived_time_limit(limits, 0.03) == 1  # at least a second
    assert package.derived_time_limit(limits, 0.41) == 3  # 2.05, rounded up


def test_the_default_validator_and_its_flags() -> None:
    plain = Flags.parse([])
    assert validate(b"Hello World\n", b"hello   world", plain) is None  # case, spacing
    assert validate(b"hello world", b"hello world\n", Flags.parse(["case_sensitive"])) is None
    assert validate(b"Hello", b"hello", Flags.parse(["case_sensitive"])) is not None
    assert validate(b"a  b", b"a b", Flags.parse(["space_change_sensitive"])) is not None
    assert validate(b"1 2 3", b"1 2", plain) == "more output than the answer: '3' after the answer"
    assert "ended before" in (validate(b"1", b"1 2", plain) or "")
    tolerant = Flags.parse(["float_tolerance", "1e-6"])
    assert validate(b"0.3333333", b"0.333333333", tolerant) is None
    assert validate(b"3.3333333e-1", b"0.333333333", tolerant) is None  # any notation
    assert validate(b"0.3334", b"0.333333333", tolerant) is not None
    assert validate(b"200.0", b"200", Flags.parse([])) is not None  # no tolerance: exact
    relative = Flags.parse(["float_relative_tolerance", "1e-3"])
    assert validate(b"1000.9", b"1000", relative) is None
    assert validate(b"0.0009", b"0", relative) is not None  # relative to zero: none
    assert validate(b"abc", b"0.5", tolerant) is not None
    with pytest.raises(ValueError, match="no flag"):
        Flags.parse(["fuzzy"])
    with pytest.raises(ValueError, match="needs a number"):
        Flags.parse(["float_tolerance"])


def _groups(tmp_path: Path, files: dict[str, str]) -> package.Group:
    names = {f"data/{n}": "" for n in files if n.endswith(".in")}
    answers = {n.replace(".in", ".ans"): "" for n in names}
    configs = {f"data/{n}": t for n, t in files.items() if n.endswith(".yaml")}
    root = _write(tmp_path, {"problem.yaml": "name: g\n", **names, **answers, **configs})
    return package.read(root, LANGUAGES).groups


def test_pass_fail_verdicts_stop_at_the_first_failing_test(tmp_path: Path) -> None:
    root = _groups(tmp_path, {"sample/1.in": "", "secret/1.in": "", "secret/2.in": ""})
    runs = [Run("sample/1", "A", 0.1), Run("secret/1", "W", 0.2, "no"), Run("secret/2", "R", 0.1)]
    found = outcome(runs, root, 1.0)
    assert (found.verdict, found.failed and found.failed.test) == ("WA", "secret/1")
    slow = [Run("sample/1", "A", 0.1), Run("secret/1", "A", 1.5), Run("secret/2", "A", 0.1)]
    low, high = outcome(slow, root, 1.0), outcome(slow, root, None)
    assert (low.verdict, high.verdict) == ("TLE", "AC")  # finished, but past the time limit
    assert keeps("accepted", low, high) and keeps("time_limit_exceeded", low, high)
    memory = [Run("sample/1", "L", 0.1)]
    assert outcome(memory, root, 1.0).verdict == "RTE"  # as the format counts MLE
    assert tle_margin_kept([Run("s", "T", 2.0)], 1.0, 2.0)
    assert not tle_margin_kept([Run("s", "A", 1.5)], 1.0, 2.0)


def test_scoring_groups_aggregate_as_the_default_grader(tmp_path: Path) -> None:
    """oddecho's shape: samples ignored, two subtasks of 50 points each, all or nothing."""
    root = _groups(
        tmp_path,
        {
            "testdata.yaml": "on_reject: continue\nrange: 0 100\ngrader_flags: ignore_sample\n",
            "sample/testdata.yaml": "range: 0 0\naccept_score: 0\ngrader_flags: first_error\n",
            "sample/1.in": "",
            "secret/testdata.yaml": "grader_flags: first_error accept_if_any_accepted\n",
            "secret/s1/testdata.yaml": "on_reject: break\naccept_score: 50\ngrader_flags: min\n",
            "secret/s2/testdata.yaml": "on_reject: break\naccept_score: 50\ngrader_flags: min\n",
            "secret/s1/1.in": "", "secret/s1/2.in": "", "secret/s2/1.in": "",
        },
    )  # fmt: skip
    assert full_score(root) == 100
    every = ["sample/1", "secret/s1/1", "secret/s1/2", "secret/s2/1"]
    full = outcome([Run(t, "A", 0.1) for t in every], root, 1.0)
    assert (full.verdict, full.score) == ("AC", 100)
    half = [Run(t, "W" if t == "secret/s2/1" else "A", 0.1) for t in every]
    partial = outcome(half, root, 1.0)
    assert (partial.verdict, partial.score) == ("AC", 50)  # one subtask accepted is enough
    assert score_note("accepted", partial, 100) and not score_note(
        "partially_accepted", partial, 100
    )
    none = outcome([Run(t, "W", 0.1) for t in every], root, 1.0)
    assert (none.verdict, none.score) == ("WA", 0)


def test_a_zipped_package_is_opened_and_a_hostile_zip_refused(tmp_path: Path) -> None:
    import zipfile

    root = _write(tmp_path / "pkg", {"problem.yaml": "name: Zipped\n", "data/secret/1.in": "",
                                     "data/secret/1.ans": ""})  # fmt: skip
    packed = tmp_path / "pkg.zip"
    with zipfile.ZipFile(packed, "w") as archive:
        for path in root.rglob("*"):
            archive.write(path, path.relative_to(tmp_path).as_posix())  # the folder inside
    with package.opened(packed) as opened:
        assert package.read(opened, LANGUAGES).name == "Zipped"
    assert not opened.exists()  # gone once used
    hostile = tmp_path / "evil.zip"
    with zipfile.ZipFile(hostile, "w") as archive:
        archive.writestr("../escape.txt", "x")
    with pytest.raises(UsageError, match="not a plain path"), package.opened(hostile):
        pass
    with pytest.raises(UsageError, match="neither"), package.opened(tmp_path / "pkg/problem.yaml"):
        pass


def test_a_run_chunk_crosses_the_broker_as_json_and_a_malformed_one_is_refused() -> None:
    from pipeline.data.messages import (
        BadPayload,
        ProgramFiles,
        RunPayload,
        RunTest,
        decode_payload,
    )

    program = ProgramFiles("cpp", "g++ 12", "a.cpp", [("a.cpp", b"int main() {}\n\xff")])
    payload = RunPayload(
        problem="sum", file=3, mode="solve", program=program, limits=(1.0, 1 << 28, 1 << 23),
        tests=[RunTest(b"4\n", b"0 4\n", ["float_tolerance", "1e-6"], 0)], stop=True,
        checker="testlib",
    )  # fmt: skip
    assert decode_payload(payload.encode()) == payload
    assert b"\xff" not in payload.encode()  # bytes travel as base64, never raw
    broken = payload.encode().replace(b'"mode":"solve"', b'"mode":7')
    with pytest.raises(BadPayload):
        decode_payload(broken)


@pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox's folders are root's")
def test_run_folders_of_workers_that_are_gone_are_swept(tmp_path: Path) -> None:
    from pipeline.judging.sandbox import shared_folder
    from workers.packages import RUNS, sweep_runs

    runs = shared_folder(RUNS)
    gone, alive = runs / "999999999-left", runs / f"{os.getpid()}-running"
    gone.mkdir(exist_ok=True)
    alive.mkdir(exist_ok=True)
    try:
        sweep_runs()
        assert not gone.exists() and alive.exists()
    finally:
        alive.rmdir()
