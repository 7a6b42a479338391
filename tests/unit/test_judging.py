"""Per-case verdicts from batched runs: split until each failing case stands alone."""

from __future__ import annotations

import math

import pytest

from pipeline.judging.cases import (
    SPLIT_WAYS,
    Attempt,
    CaseVerdict,
    case_key,
    compile_error,
    decode_verdict,
    encode_verdict,
    judge_cases,
    judge_known,
)
from pipeline.judging.sandbox import Status

WORDS = ["Pure", "Impure"]


def _expected(n: int) -> list[str]:
    return [WORDS[i % 2] for i in range(n)]


class Program:
    """A pretend program: what it does on each case, and a log of its runs."""

    def __init__(self, expected: list[str], **faults: str) -> None:
        self.expected, self.faults = expected, {int(k[1:]): v for k, v in faults.items()}
        self.runs: list[list[int]] = []

    def __call__(self, cases: list[int]) -> Attempt:
        self.runs.append(cases)
        lines = []
        for case in cases:
            fault = self.faults.get(case, "")
            if fault in ("crash", "loop"):
                status = Status.RE if fault == "crash" else Status.TLE
                return Attempt(
                    status, [], 0.5, 1 << 20, "signal SIGSEGV" if fault == "crash" else ""
                )
            if fault == "wrong" or (fault == "stateful" and len(cases) > 1):
                lines.append("Nonsense")
            elif fault == "twice":
                lines += [self.expected[case], self.expected[case]]
            else:
                lines.append(self.expected[case])
        return Attempt(Status.OK, lines, 0.01 * len(cases), 2 << 20)


def test_a_correct_program_costs_one_run_per_batch() -> None:
    expected = _expected(1000)
    program = Program(expected)
    verdicts, runs = judge_cases(expected, program, batch=300)
    assert [v.code for v in verdicts] == ["A"] * 1000
    assert runs == 4 and [len(r) for r in program.runs] == [300, 300, 300, 100]
    assert verdicts[0].batch == 300 and verdicts[999].batch == 100


def test_a_crash_on_one_case_is_found_alone_and_leaves_the_others_accepted() -> None:
    expected = _expected(1024)
    program = Program(expected, c700="crash")
    verdicts, runs = judge_cases(expected, program, batch=1024)
    codes = "".join(v.code for v in verdicts)
    assert codes == "A" * 700 + "R" + "A" * 323
    assert verdicts[700].shown == "signal SIGSEGV" and verdicts[700].batch == 1
    # a path down the parts (each level cuts in SPLIT_WAYS) fails; its siblings pass once
    levels = math.ceil(math.log(1024, SPLIT_WAYS))
    assert sum(700 in r for r in program.runs) == levels + 1
    assert runs <= 1 + SPLIT_WAYS * levels


def test_an_endless_case_is_a_time_limit_for_that_case_only() -> None:
    expected = _expected(16)
    verdicts, _ = judge_cases(expected, Program(expected, c3="loop", c12="loop"), batch=16)
    assert "".join(v.code for v in verdicts) == "AAATAAAAAAAATAAA"


def test_a_wrong_answer_in_a_batch_is_judged_again_alone() -> None:
    expected = _expected(10)
    program = Program(expected, c4="wrong", c6="stateful")
    verdicts, _ = judge_cases(expected, program, batch=10)
    # case 6 is wrong only after other cases: alone it is right, so it is accepted
    assert "".join(v.code for v in verdicts) == "AAAAWAAAAA"
    assert verdicts[4].shown == "Nonsense" and [4] in program.runs and [6] in program.runs


def test_extra_lines_split_the_batch_and_are_a_presentation_error_alone() -> None:
    expected = _expected(8)
    verdicts, _ = judge_cases(expected, Program(expected, c5="twice"), batch=8)
    assert "".join(v.code for v in verdicts) == "AAAAAPAA"


def test_a_compile_error_is_every_case_with_the_message_once() -> None:
    verdicts = compile_error(3, "main.cpp:1: error: expected ';'")
    assert [v.code for v in verdicts] == ["C", "C", "C"]
    assert [v.shown for v in verdicts] == ["main.cpp:1: error: expected ';'", None, None]


def test_only_cases_without_a_kept_verdict_are_run() -> None:
    expected = _expected(50)
    program = Program(expected, c7="crash", c30="wrong")
    first, fresh = judge_known(expected, [None] * 50, program, batch=50)
    assert sorted(fresh) == list(range(50))
    kept: list[CaseVerdict | None] = [decode_verdict(encode_verdict(v)) for v in first]
    assert kept == first  # a verdict comes back from Redis as it went in
    kept[12] = kept[30] = None  # e.g. these two cases of the test changed
    program.runs.clear()
    again, fresh = judge_known(expected, kept, program, batch=50)
    assert sorted(fresh) == [12, 30] and program.runs[0] == [12, 30]
    assert [v.code for v in again] == [v.code for v in first]
    assert again[7].shown == "signal SIGSEGV" and again[30].code == "W"
    program.runs.clear()
    judge_known(expected, first, program, batch=50)  # all kept: nothing runs
    assert program.runs == []


def test_a_case_key_is_its_text_and_its_answer() -> None:
    assert case_key(b"1 2\nab\n", "Pure") == case_key(b"1 2\nab\n", "Pure")
    assert case_key(b"1 2\nab\n", "Pure") != case_key(b"1 2\nab\n", "Dirty")
    assert case_key(b"1 2\nab\n", "Pure") != case_key(b"1 2\nac\n", "Pure")
    with pytest.raises(ValueError, match="kept verdict"):
        decode_verdict(b'["A", null]')


def test_lazy_judging_runs_nothing_after_the_first_failing_case() -> None:
    """36 cases that each time out: one run at the limit per level down to case 0, then NR
    (judged whole, each of them costs a run of its own)."""
    expected = _expected(36)
    endless = Program(expected, **{f"c{i}": "loop" for i in range(36)})
    verdicts, runs = judge_cases(expected, endless, batch=1000, lazy=True)
    assert "".join(v.code for v in verdicts) == "T" + "N" * 35
    assert runs == 3 and all(0 in r for r in endless.runs)  # 36 cases, then 5, then 1
    whole = Program(expected, **{f"c{i}": "loop" for i in range(36)})
    assert "".join(v.code for v in judge_cases(expected, whole, batch=1000)[0]) == "T" * 36
    assert len(whole.runs) > 36


def test_lazy_judging_finds_the_first_failure_whatever_the_order_of_its_runs() -> None:
    expected = _expected(300)
    program = Program(expected, c40="wrong", c20="wrong", c250="crash")
    verdicts, _ = judge_cases(expected, program, batch=100, lazy=True)
    assert "".join(v.code for v in verdicts) == "A" * 20 + "W" + "N" * 279
    assert not any(case >= 200 for run in program.runs for case in run)  # batch 3 never ran
    assert verdicts[20].shown == "Nonsense"


def test_lazy_judging_of_kept_verdicts_runs_only_the_cases_before_a_kept_failure() -> None:
    expected = _expected(10)
    program = Program(expected)
    kept = CaseVerdict("R", "signal SIGSEGV", 0.1, 1, 1)
    known: list[CaseVerdict | None] = [None] * 10
    known[6] = kept
    verdicts, fresh = judge_known(expected, known, program, batch=100, lazy=True)
    assert "".join(v.code for v in verdicts) == "A" * 6 + "R" + "N" * 3
    assert program.runs == [[0, 1, 2, 3, 4, 5]] and sorted(fresh) == [0, 1, 2, 3, 4, 5]


def test_a_lazily_judged_file_is_cut_after_its_first_failure_whatever_its_chunks_ran() -> None:
    from pipeline.grading.verdicts import FileVerdicts, stopped_at_first_failure

    found = FileVerdicts("AAWAT", [(3, "Nonsense"), (5, "CPU 1.0 s")], None, [(1, 2)] * 5)
    cut = stopped_at_first_failure(found)
    assert (cut.codes, cut.shown, cut.usage) == (
        "AAWNN",
        [(3, "Nonsense")],
        [(1, 2)] * 3 + [(0, 0)] * 2,
    )
    assert stopped_at_first_failure(FileVerdicts("AAA")).codes == "AAA"
