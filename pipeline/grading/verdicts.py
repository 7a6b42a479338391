"""Compact verdicts: one letter per case, the first mismatches kept, scored without objects."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from pipeline.data.messages import ANSWER_CODES
from pipeline.escape import shorten
from pipeline.grading.rules import SHOWN_CHARS, CaseResult, Scoring, Standing, Verdict

MAX_LINE = 4096  # bytes of an output line held and judged; a longer line cannot be right
# a line that is blank, or that starts or ends with whitespace (what str.strip removes)
_UNSTRIPPED = re.compile(r"(?:^|\n)\s|\s(?:\n|$)")


def output_lines(lines: list[bytes]) -> list[str]:
    """An output's raw lines (without newlines) as the grader judges them: each cut at
    MAX_LINE bytes (then marked "..."), decoded, stripped, and the blank ones dropped."""
    cut = [line[:MAX_LINE] + b"..." if len(line) > MAX_LINE else line for line in lines]
    text = b"\n".join(cut).decode("utf-8", "replace")
    if text and _UNSTRIPPED.search(text) is None:  # the usual output: nothing to strip
        return text.split("\n")
    return [stripped for line in text.split("\n") if (stripped := line.strip())]


def compare_file(
    expected: list[str], data: bytes, *, ignore_case: bool
) -> tuple[str, list[tuple[int, str | None]], tuple[str, int] | None]:
    """A whole output file: the letters of its cases, the first mismatches, and the lines
    past the last case (the first one shortened, and how many more)."""
    lines = output_lines(data.split(b"\n"))
    codes, shown = compare_segment(expected, lines[: len(expected)], 1, ignore_case=ignore_case)
    rest = lines[len(expected) :]
    return codes, shown, (shorten(rest[0], SHOWN_CHARS), len(rest) - 1) if rest else None


CODES = {
    Verdict.AC: "A",
    Verdict.WA: "W",
    Verdict.PE: "P",
    Verdict.MISSING: "M",
    Verdict.TLE: "T",
    Verdict.MLE: "L",
    Verdict.OLE: "O",
    Verdict.RE: "R",
    Verdict.CE: "C",
    Verdict.NR: "N",
}
VERDICT_OF = {code: verdict for verdict, code in CODES.items()}
AC = CODES[Verdict.AC]
KEPT = 10  # mismatches of a file kept with what was found (the rest are letters only)
NOT_RUN = CODES[Verdict.NR]


def stopped_at_first_failure(found: FileVerdicts) -> FileVerdicts:
    """A lazily judged file: every case after its first failing one is NR, whatever its
    chunk found (chunks of one file run at once, so a later one may have run its cases)."""
    first = next((i for i, code in enumerate(found.codes) if code != AC), None)
    if first is None:
        return found
    rest = len(found.codes) - first - 1
    return FileVerdicts(
        found.codes[: first + 1] + NOT_RUN * rest,
        [(index, text) for index, text in found.shown if index <= first + 1],
        found.extra,
        found.usage[: first + 1] + [(0, 0)] * rest if found.usage else [],
    )


def judge(want: str, line: str | None, ignore_case: bool) -> str:
    """The letter of one case: `line` is the stripped output line, None past the end."""
    if line is None:
        return "M"
    if line == want or (ignore_case and line.lower() == want.lower()):
        return "A"
    low = want.lower()
    return "P" if any(token.lower() == low for token in line.split()) else "W"


def compare_segment(
    expected: list[str], lines: list[str], first: int, *, ignore_case: bool, keep: int = KEPT
) -> tuple[str, list[tuple[int, str | None]]]:
    """Letters of cases `first`.. (their answer words `expected`, the output's non-blank
    lines `lines`, fewer at the end of the file), and the first `keep` mismatches found."""
    codes = [
        "A" if line == want else judge(want, line, ignore_case)
        for want, line in zip(expected, lines, strict=False)
    ]
    codes += "M" * (len(expected) - len(codes))
    text = "".join(codes)
    shown: list[tuple[int, str | None]] = []
    at = 0
    while len(shown) < keep and (at := _next_mismatch(text, at)) >= 0:
        found = shorten(lines[at], SHOWN_CHARS) if at < len(lines) else None
        shown.append((first + at, found))
        at += 1
    return text, shown


def _next_mismatch(codes: str, start: int) -> int:
    """Index of the first letter but A at or after `start`, or -1."""
    stripped = codes[start:].lstrip(AC)
    return len(codes) - len(stripped) if stripped else -1


@dataclass
class FileVerdicts:
    """The verdicts of one output file, compact: what is stored and what reports read."""

    codes: str = ""  # one letter per case of the test
    shown: list[tuple[int, str | None]] = field(default_factory=list)  # first mismatches
    extra: tuple[str, int] | None = None  # the first line past the last case, lines after it
    usage: list[tuple[int, int]] = field(default_factory=list)  # a program's: µs, KiB per case

    @property
    def accepted(self) -> int:
        """Cases with AC."""
        return self.codes.count(AC)

    @property
    def total(self) -> int:
        """Cases of the test."""
        return len(self.codes)

    @property
    def wrong(self) -> int:
        """Mismatches: cases not accepted, and extra output (one)."""
        return self.total - self.accepted + (self.extra is not None)

    def add(self, codes: str, shown: list[tuple[int, str | None]]) -> None:
        """Append a segment's verdicts."""
        self.codes += codes
        self.shown += shown[: max(KEPT - len(self.shown), 0)]

    def first_mismatches(self, expected: str, words: tuple[str, ...]) -> list[CaseResult]:
        """The kept mismatches as case results (EXTRA last); `expected` as answer codes."""
        results = [
            CaseResult(
                index,
                VERDICT_OF[self.codes[index - 1]],
                words[ANSWER_CODES.index(expected[index - 1])],
                found,
            )
            for index, found in self.shown
        ]
        if self.extra is not None and len(results) < KEPT:
            results.append(self._extra_case())
        return results

    def case_results(self, expected: str, words: tuple[str, ...]) -> Iterator[CaseResult]:
        """Every case's result in order (found text only where it was kept)."""
        found = dict(self.shown)
        for index, code in enumerate(self.codes, 1):
            verdict = VERDICT_OF[code]
            if verdict == Verdict.AC:
                yield CaseResult(index, verdict)
            else:
                want = words[ANSWER_CODES.index(expected[index - 1])]
                yield CaseResult(index, verdict, want, found.get(index))
        if self.extra is not None:
            yield self._extra_case()

    def _extra_case(self) -> CaseResult:
        assert self.extra is not None
        line, more = self.extra
        return CaseResult(
            self.total + 1, Verdict.EXTRA, "", f"{line} (+{more} more lines)" if more else line
        )

    def encode(self) -> str:
        """The stored form (JSON)."""
        doc: dict[str, object] = {"codes": self.codes, "shown": self.shown, "extra": self.extra}
        if self.usage:
            doc["usage"] = self.usage
        return json.dumps(doc, separators=(",", ":"))

    @classmethod
    def decode(cls, text: str | bytes) -> FileVerdicts:
        """Read the stored form."""
        doc = json.loads(text)
        extra = doc.get("extra")
        return cls(
            str(doc["codes"]),
            [(int(i), f) for i, f in doc["shown"]],
            (str(extra[0]), int(extra[1])) if extra else None,
            [(int(ms), int(kib)) for ms, kib in doc.get("usage", [])],
        )


def score(scoring: Scoring, codes_by_test: dict[str, str]) -> tuple[float, float]:
    """(score, maximum) of one contestant's letters, by test name (see Scoring)."""
    if not scoring.groups:
        accepted = sum(codes.count(AC) for codes in codes_by_test.values())
        return float(accepted), float(sum(len(codes) for codes in codes_by_test.values()))
    board = _Groups(scoring)
    for test, codes in codes_by_test.items():
        board.add(test, codes)
    return board.score(), scoring.max_score


class _Groups:
    """One contestant's groups: whether each has members, and whether all were AC."""

    def __init__(self, scoring: Scoring) -> None:
        self.scoring = scoring
        self.seen = [False] * len(scoring.groups)
        self.failed = [False] * len(scoring.groups)

    def add(self, test: str, codes: str) -> None:
        for i, group in enumerate(self.scoring.groups):
            if not group.covers_test(test):
                continue
            parts = [codes[lo - 1 : hi] for lo, hi in group.cases] if group.cases else [codes]
            if any(parts):
                self.seen[i] = True
            if any(part.count(AC) != len(part) for part in parts):
                self.failed[i] = True

    def score(self) -> float:
        groups = self.scoring.groups
        return sum(
            g.points for g, s, f in zip(groups, self.seen, self.failed, strict=True) if s and not f
        )


class Board:
    """The scoreboard, built file by file: per contestant, totals and group results only."""

    def __init__(self, scoring: Scoring) -> None:
        self.scoring = scoring
        self._accepted: dict[str, dict[str, int]] = {}
        self._cases: dict[str, int] = {}
        self._groups: dict[str, _Groups] = {}

    def add(self, contestant: str, test: str, codes: str) -> None:
        """One file's letters."""
        self._accepted.setdefault(contestant, {})[test] = codes.count(AC)
        self._cases[contestant] = self._cases.get(contestant, 0) + len(codes)
        if self.scoring.groups:
            self._groups.setdefault(contestant, _Groups(self.scoring)).add(test, codes)

    def standings(self) -> list[Standing]:
        """Best first (score, then accepted cases, then name)."""
        rows = []
        for contestant, accepted in self._accepted.items():
            if self.scoring.groups:
                points, maximum = self._groups[contestant].score(), self.scoring.max_score
            else:
                points, maximum = float(sum(accepted.values())), float(self._cases[contestant])
            rows.append(Standing(contestant, points, maximum, accepted))
        rows.sort(key=lambda s: (-s.score, -s.total_accepted, s.contestant))
        return rows
