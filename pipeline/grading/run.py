"""A grading's run: which files need verdicts (each keyed by what its verdicts depend on), and
the totals, scoreboard and report pieces counted from the stored verdicts."""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import overload

from pipeline.data.messages import FORMAT
from pipeline.errors import JobLost
from pipeline.games import toolkit
from pipeline.games.problem import Problem
from pipeline.grading import comparing, reports, verdicts
from pipeline.grading.rules import CaseResult, Found, Scoring, Standing, Submission, Test
from pipeline.grading.verdict_store import Bodies, RedisVerdicts, VerdictStore
from pipeline.grading.verdicts import FileVerdicts

Compare = Callable[[Sequence[comparing.Output]], Iterator[FileVerdicts]]
"""The verdicts of the files given, in order (compared or judged somewhere)."""


def file_key(problem: Problem, expected: str, ignore_case: bool, digest: str) -> str:
    """What a file's verdicts depend on, hashed: the answers, the rules and its bytes."""
    answers = _digest_of_answers(expected)
    what = f"{FORMAT}:{verdicts.KEPT}:{problem.name}:{int(ignore_case)}:{answers}:{digest}"
    return hashlib.sha256(what.encode()).hexdigest()


@lru_cache(maxsize=256)
def _digest_of_answers(expected: str) -> str:
    """Once per test, not once per file (the same string object comes back each time)."""
    return hashlib.sha256(expected.encode()).hexdigest()


@dataclass(frozen=True)
class Contest:
    """What is graded, and by which rules."""

    problem: Problem
    tests: list[Test]
    submissions: Sequence[Submission]
    scoring: Scoring
    ignore_case: bool
    salt: dict[str, str] = field(default_factory=dict)  # per contestant: keys of programs
    # per contestant judged: its program's language and the toolchain's version
    programs: dict[str, tuple[str, str]] = field(default_factory=dict)

    def test_input(self, name: str) -> Path:
        """The input file of a test."""
        return next(t.input for t in self.tests if t.name == name)


LOOKUP_FILES = 20_000  # files hashed and looked up in Redis at a time


def grade_files(
    contest: Contest,
    found: Found,
    store: VerdictStore,
    compare: Callable[[Sequence[comparing.Output]], Iterator[FileVerdicts]],
) -> GradeRun:
    """The verdicts of the files not stored yet, compared in one job, then the run."""
    keys, todo = files_to_grade(contest, found, store)
    if todo:
        store.put_many((o.key, got) for o, got in zip(todo, compare(todo), strict=True))
    run = GradeRun(contest, keys, found, store)
    run.count()
    return run


def files_to_grade(
    contest: Contest, found: Found, store: VerdictStore
) -> tuple[bytearray, Sequence[comparing.Output]]:
    """Each file's key (32 bytes each, kept per file), and the files whose verdicts are not
    stored yet (equal ones once)."""
    subs = contest.submissions
    keys, digests, todo = bytearray(32 * len(subs)), bytearray(32 * len(subs)), array("q")
    # a judged program's verdicts depend on its test's input too, not only on the answers
    inputs = {t.name: comparing.digest_of(t.input) for t in contest.tests} if contest.salt else {}
    for start in range(0, len(subs), LOOKUP_FILES):
        batch = []
        for i in range(start, min(start + LOOKUP_FILES, len(subs))):
            sub = subs[i]
            expected = found.expected.get(sub.test)
            if expected is None:
                continue  # its test is broken: no key
            digest = comparing.digest_of(sub.path)
            salted = digest + contest.salt.get(sub.contestant, "") + inputs.get(sub.test, "")
            key = file_key(contest.problem, expected, contest.ignore_case, salted)
            keys[32 * i : 32 * i + 32] = bytes.fromhex(key)
            digests[32 * i : 32 * i + 32] = bytes.fromhex(digest)
            batch.append((key, i))
        seen = set()  # equal files are compared once (within a batch)
        for (key, i), known in zip(batch, store.known([k for k, _ in batch]), strict=True):
            if not known and key not in seen:
                seen.add(key)
                todo.append(i)
    return keys, _Outputs(contest, found, keys, digests, todo)


class _Outputs(Sequence[comparing.Output]):
    """The files to compare, each made when asked from its place in the contest."""

    def __init__(
        self, contest: Contest, found: Found, keys: bytearray, digests: bytearray, at: array[int]
    ) -> None:
        self.contest, self.found, self.keys, self.digests, self.at = (
            contest,
            found,
            keys,
            digests,
            at,
        )

    def __len__(self) -> int:
        return len(self.at)

    @overload
    def __getitem__(self, i: int) -> comparing.Output: ...
    @overload
    def __getitem__(self, i: slice) -> list[comparing.Output]: ...

    def __getitem__(self, i: int | slice) -> comparing.Output | list[comparing.Output]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        j = self.at[i]
        sub = self.contest.submissions[j]
        key, digest = self.keys[32 * j : 32 * j + 32], self.digests[32 * j : 32 * j + 32]
        test = self.contest.test_input(sub.test) if self.contest.salt else None
        expected = self.found.expected[sub.test]
        return comparing.Output(key.hex(), sub.path, expected, digest.hex(), test)


@dataclass
class GradeRun:
    """A grading: its files, where their verdicts are, and the totals counted from them."""

    contest: Contest
    keys: bytearray  # 32 bytes per submission: its verdicts' key (zeros: its test is broken)
    found: Found
    store: VerdictStore
    standings: list[Standing] = field(default_factory=list)
    wrong_files: int = 0
    wrong_cases: int = 0
    shown: dict[str, set[int]] = field(default_factory=dict)  # cases of the kept mismatches
    _texts: dict[str, dict[int, str]] = field(default_factory=dict)  # their inputs, by test
    _held: dict[int, tuple[Submission, FileVerdicts | None]] = field(default_factory=dict)

    BYTES = 16 << 20  # verdict letters read from the store at once, about
    HELD_BYTES = 32 << 20  # letters held between the counting and the reports, at most

    @property
    def problem(self) -> Problem:
        """The game."""
        return self.contest.problem

    @property
    def tests(self) -> list[Test]:
        """The tests, in order."""
        return self.contest.tests

    @property
    def programs(self) -> dict[str, tuple[str, str]]:
        """Per contestant judged: its program's language and toolchain's version."""
        return self.contest.programs

    def key(self, i: int) -> str | None:
        """The key of submission `i`'s verdicts (None: its test is broken)."""
        raw = self.keys[32 * i : 32 * i + 32]
        return raw.hex() if any(raw) else None

    def graded(self) -> Iterator[tuple[Submission, FileVerdicts | None]]:
        """Every submission with its verdicts (None: its test is broken), read in batches."""
        for batch in self._batches():
            yield from self._read(batch)

    def pieces(self, kinds: list[str]) -> Iterator[reports.Piece]:
        """Every submission with its verdicts and its report bodies of these kinds kept from
        an earlier grading (None: none yet); the bodies made now are kept in batches."""
        context = self._contexts(kinds)
        for batch in self._batches():
            graded = self._read(batch)
            names = [
                self._bodies_key(i, sub.test, context)
                for i, (sub, _) in zip(batch, graded, strict=True)
            ]
            found = iter(self.store.get_bodies([n for n in names if n]))
            made: list[tuple[str, Bodies]] = []
            for name, (sub, result) in zip(names, graded, strict=True):
                kept = next(found) if name else None
                yield sub, result, kept, _Keeper(made, name)
            if made:
                self.store.put_bodies(made)

    def _contexts(self, kinds: list[str]) -> dict[str, str]:
        """Per test, a digest of what report bodies depend on besides the file's verdicts: the
        reports, the code that renders them, the test's name and input, the scoring."""
        common = f"{kinds}:{reports.rendering()}:{self.contest.scoring!r}"
        return {
            test.name: hashlib.sha256(
                f"{common}:{test.name}:{comparing.digest_of(test.input)}".encode()
            ).hexdigest()[:32]
            for test in self.tests
            if test.name in self.found.expected
        }

    def _bodies_key(self, i: int, test: str, context: dict[str, str]) -> str | None:
        key = self.key(i)
        return f"{key}:{context[test]}" if key and test in context else None

    def _batches(self) -> Iterator[list[int]]:
        """Submission numbers, a batch's verdict letters about BYTES at most."""
        longest = max((len(codes) for codes in self.found.expected.values()), default=1)
        step = max(1, min(RedisVerdicts.BATCH, self.BYTES // max(longest, 1)))
        for start in range(0, len(self.contest.submissions), step):
            yield list(range(start, min(start + step, len(self.contest.submissions))))

    def _read(self, batch: list[int]) -> list[tuple[Submission, FileVerdicts | None]]:
        held = [h for i in batch if (h := self._held.pop(i, None)) is not None]
        if len(held) == len(batch):  # counted already, and held since
            return held
        keys = [self.key(i) for i in batch]
        found = iter(self.store.get_many([k for k in keys if k is not None]))
        out = []
        for i, key in zip(batch, keys, strict=True):
            result = next(found) if key is not None else None
            if key is not None and result is None:
                raise JobLost("Redis lost verdicts of this grading: grade again")
            out.append((self.contest.submissions[i], result))
        return out

    def count(self) -> None:
        """The scoreboard, the totals, and the cases whose inputs reports may show."""
        board = verdicts.Board(self.contest.scoring)
        held = 0
        for i, (sub, result) in enumerate(self.graded()):
            if held < self.HELD_BYTES:  # the reports will read these again
                self._held[i] = (sub, result)
                held += len(result.codes) if result else 0
            if result is None:
                continue
            board.add(sub.contestant, sub.test, result.codes)
            self.wrong_files += result.wrong > 0
            self.wrong_cases += result.wrong
            self.shown.setdefault(sub.test, set()).update(i for i, _ in result.shown)
        self.standings = board.standings()

    def case_text(self, test: str, index: int) -> str | None:
        """A shown case's input, shortened (a test's input is read when first needed, for
        all its shown cases at once)."""
        if test not in self._texts:
            path = next(t.input for t in self.tests if t.name == test)
            wanted = self.shown.get(test, set())
            self._texts[test] = toolkit.case_texts(self.problem, path, wanted, reports.INPUT_CHARS)
        return self._texts[test].get(index)

    @property
    def all_accepted(self) -> bool:
        """Every case of every submission accepted, and no output longer than its test
        (what exit status 0 of `grade` promises)."""
        return self.wrong_files == 0 and not self.found.broken

    def exit_status(self) -> int:
        """0 all accepted, 1 some wrong, 2 some test could not be graded (--keep-going)."""
        return 2 if self.found.broken else 0 if self.all_accepted else 1

    def score(self, sub: Submission, result: FileVerdicts) -> tuple[float, float]:
        """One file's score and maximum, on its own."""
        return verdicts.score(self.contest.scoring, {sub.test: result.codes})

    def mismatches(self, sub: Submission, result: FileVerdicts) -> list[CaseResult]:
        """The kept mismatches of a file (EXTRA last)."""
        expected = self.found.expected[sub.test]
        return result.first_mismatches(expected, self.problem.answers)


@dataclass(frozen=True)
class _Keeper:
    """Keeps the report bodies made now of one file, with the rest of its batch."""

    made: list[tuple[str, Bodies]]
    name: str | None  # None: not kept (its test is broken)

    def __call__(self, bodies: Bodies) -> None:
        if self.name:
            self.made.append((self.name, bodies))
