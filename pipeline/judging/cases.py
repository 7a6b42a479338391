"""A program's verdict for every case of a multi-case test, from runs over batches of its
cases: a batch that does not pass whole is split until each failing case stands alone, so a
correct program costs one run per batch and a case's verdict never depends on the others
(no I/O here)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field

from pipeline.grading.verdicts import AC, NOT_RUN, judge
from pipeline.judging.sandbox import Status

RUNTIME_CODES = {Status.TLE: "T", Status.MLE: "L", Status.OLE: "O", Status.RE: "R"}
COMPILE_ERROR = "C"
# a failed batch is cut in this many parts: a run that fails by its time limit costs the whole
# limit, so fewer levels of splitting cost less than the extra runs of good parts
SPLIT_WAYS = 8


@dataclass(frozen=True)
class Attempt:
    """What one run over a batch gave: how it ended, its output lines when it ended well,
    and what it used."""

    status: Status
    lines: list[str] = field(default_factory=list)
    cpu_seconds: float = 0.0
    peak_bytes: int = 0
    detail: str = ""  # what a report shows of a failed run: "signal SIGSEGV", "CPU 1.02 s"


@dataclass(frozen=True)
class CaseVerdict:
    """One case's verdict letter, what to show for it (None: nothing was found), and the
    time and memory of the run that judged it (a run of `batch` cases)."""

    code: str
    shown: str | None
    cpu_seconds: float
    peak_bytes: int
    batch: int


Runner = Callable[[list[int]], Attempt]  # runs the program on these cases (0-based numbers)


def case_key(case: bytes, expected: str) -> str:
    """What a case's verdict depends on besides its program: its text and its answer."""
    return hashlib.blake2b(case + b"\0" + expected.encode(), digest_size=16).hexdigest()


def encode_verdict(verdict: CaseVerdict) -> str:
    """A case's verdict as kept in Redis."""
    v = verdict
    fields = [v.code, v.shown, v.cpu_seconds, v.peak_bytes, v.batch]
    return json.dumps(fields, separators=(",", ":"))


def decode_verdict(text: str | bytes) -> CaseVerdict:
    """A kept verdict (one that does not parse is a ValueError)."""
    try:
        code, shown, cpu, peak, batch = json.loads(text)
        return CaseVerdict(str(code), shown, float(cpu), int(peak), int(batch))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"a kept verdict that does not parse: {exc}") from None


def judge_known(
    expected: list[str],
    known: list[CaseVerdict | None],
    run: Runner,
    *,
    batch: int,
    lazy: bool = False,
) -> tuple[list[CaseVerdict], dict[int, CaseVerdict]]:
    """judge_cases() of only the cases whose verdict is not known: every verdict, in order,
    and those found now (by case number; never NR). `lazy`: the cases after the first
    failing one are NR."""
    todo = [i for i, v in enumerate(known) if v is None]
    first_known = next((i for i, v in enumerate(known) if v is not None and v.code != AC), None)
    if lazy and first_known is not None:  # a kept failure: only the cases before it matter
        todo = [i for i in todo if i < first_known]
    found, _ = judge_cases(
        [expected[i] for i in todo],
        lambda cases: run([todo[c] for c in cases]),
        batch=batch,
        lazy=lazy,
    )
    fresh = {i: v for i, v in zip(todo, found, strict=True) if v.code != NOT_RUN}
    verdicts = [v if v is not None else fresh.get(i, _NOT_RUN) for i, v in enumerate(known)]
    return _stopped(verdicts) if lazy else verdicts, fresh


def judge_cases(
    expected: list[str],
    run: Runner,
    *,
    batch: int,
    ignore_case: bool = False,
    lazy: bool = False,
) -> tuple[list[CaseVerdict], int]:
    """Every case's verdict, in order, given each case's expected answer; how many runs it
    took. Batches hold at most `batch` cases. `lazy`: no run for cases after a failing one
    (they are NR)."""
    verdicts: dict[int, CaseVerdict] = {}
    batch = max(batch, 1)
    todo = [list(range(s, min(s + batch, len(expected)))) for s in range(0, len(expected), batch)]
    todo.reverse()
    runs = 0
    while todo:
        cases = todo.pop()
        failed = [i for i, v in verdicts.items() if v.code != AC]
        if lazy and failed and cases[0] > min(failed):
            continue  # after a failing case: not run
        attempt = run(cases)
        runs += 1
        if attempt.status != Status.OK or len(attempt.lines) > len(cases):
            if len(cases) == 1:
                verdicts[cases[0]] = _alone(cases[0], expected, attempt, ignore_case)
                continue
            todo += reversed(_parts(cases, SPLIT_WAYS))  # the first part next
            continue
        for case, line in zip(cases, _padded(attempt.lines, len(cases)), strict=True):
            code = judge(expected[case], line, ignore_case)
            if code == AC or len(cases) == 1:
                verdicts[case] = _verdict(code, line, attempt, len(cases))
            else:  # wrong in a batch: judged again alone, where no other case can matter
                todo.append([case])
    found = [verdicts.get(i, _NOT_RUN) for i in range(len(expected))]
    return _stopped(found) if lazy else found, runs


_NOT_RUN = CaseVerdict(NOT_RUN, None, 0.0, 0, 0)


def _stopped(found: list[CaseVerdict]) -> list[CaseVerdict]:
    """NR for every case after the first failing one."""
    first = next((i for i, v in enumerate(found) if v.code != AC), len(found))
    return found[: first + 1] + [_NOT_RUN] * (len(found) - first - 1)


def compile_error(cases: int, message: str) -> list[CaseVerdict]:
    """A program that did not compile: CE for every case, the compiler's words on the first."""
    return [
        CaseVerdict(COMPILE_ERROR, message if i == 0 else None, 0.0, 0, 0) for i in range(cases)
    ]


def _alone(case: int, expected: list[str], attempt: Attempt, ignore_case: bool) -> CaseVerdict:
    if attempt.status != Status.OK:
        code = RUNTIME_CODES[attempt.status]
        return CaseVerdict(code, attempt.detail, attempt.cpu_seconds, attempt.peak_bytes, 1)
    # it ended well but printed more than one line for one case: the first judges it, and
    # a right first line followed by more is a presentation error
    first = attempt.lines[0] if attempt.lines else None
    code = judge(expected[case], first, ignore_case)
    return _verdict("P" if code == AC else code, first, attempt, 1)


def _verdict(code: str, line: str | None, attempt: Attempt, batch: int) -> CaseVerdict:
    return CaseVerdict(
        code, None if code == AC else line, attempt.cpu_seconds, attempt.peak_bytes, batch
    )


def _parts(cases: list[int], ways: int) -> list[list[int]]:
    size = -(-len(cases) // ways)
    return [cases[i : i + size] for i in range(0, len(cases), size)]


def _padded(lines: list[str], count: int) -> list[str | None]:
    return [*lines, *([None] * (count - len(lines)))]
