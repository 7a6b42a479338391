"""Grading runs: answers through the pipeline, then each file compared by the workers, once
(verdicts are kept by content), then reports streamed from the stored verdicts."""

from __future__ import annotations

import hashlib
import io
import os
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TextIO, overload

from pipeline import service
from pipeline.config import Settings
from pipeline.data import files
from pipeline.data.messages import FORMAT, ComparePayload, Segment, encode_answer
from pipeline.data.producer import Window
from pipeline.errors import InputError, JobLost, Refused, UsageError
from pipeline.games import toolkit
from pipeline.games.problem import Problem
from pipeline.grading import comparing, reports, verdicts
from pipeline.grading.rules import CaseResult, Found, Scoring, Standing, Submission, Test
from pipeline.grading.verdict_store import Bodies, MemoryVerdicts, RedisVerdicts, VerdictStore
from pipeline.grading.verdicts import FileVerdicts, stopped_at_first_failure
from pipeline.jobs.view import judging_line
from pipeline.judging import judge_service
from pipeline.judging.judge_service import Program
from pipeline.progress import ProgressBar
from pipeline.store.jobstate import JobCounters


@dataclass(frozen=True)
class ReportFiles:
    """The report files a grading run writes (None: not wanted)."""

    json: Path | None = None
    junit: Path | None = None
    scoreboard: Path | None = None  # .json, else CSV
    version: int = reports.REPORT_VERSION  # of the JSON report (1: every case as an object)
    junit_cases: bool = False  # one JUnit testcase per case (default: per file)

    def _paths(self) -> list[Path]:
        return [p for p in (self.json, self.junit, self.scoreboard) if p is not None]

    def check(self, graded: Iterable[Path]) -> None:
        """Before any work: each report writable, apart, and none of them a graded file (the
        graded files are looked at once, and only when some report file exists already)."""
        paths = self._paths()
        if len({os.path.realpath(p) for p in paths}) < len(paths):
            raise UsageError("--json, --junit and --scoreboard must name different files")
        for path in paths:
            files.check_output(path)
        files.check_not_inputs(paths, graded)

    def write(self, run: GradeRun, *also: Callable[[GradeRun], reports.Report]) -> None:
        """Write every wanted report (and `also` the reports made by these functions, such as
        the text summary) in one pass over the stored verdicts, each file whole or not at
        all."""
        makers: list[tuple[Path, Callable[[TextIO], reports.Report]]] = []
        if self.json:
            version = self.version
            makers.append((self.json, lambda out: reports.JsonReport(out, run, version)))
        if self.junit:
            per_case = self.junit_cases
            makers.append(
                (self.junit, lambda out: reports.JunitReport(out, run, per_case=per_case))
            )
        files.write_all_atomically(
            [path for path, _ in makers],
            lambda streams: reports.write(
                run,
                [make(out) for (_, make), out in zip(makers, streams, strict=True)]
                + [make_also(run) for make_also in also],
            ),
        )
        if self.scoreboard:
            board = (
                reports.scoreboard_json(run.standings)
                if self.scoreboard.suffix == ".json"
                else reports.scoreboard_csv(run.standings, [t.name for t in run.tests])
            )
            files.atomic_write(self.scoreboard, board)


Answers = tuple[list[str], bool] | str
Solver = Callable[[list[Test]], list[Answers]]
"""Answers of tests without answer files: each the answer lines and whether they were
computed now (else cached), or the error line of a test whose input is invalid."""


def grade(
    settings: Settings,
    problem: Problem,
    tests: list[Test],
    submissions: Sequence[Submission],
    *,
    scoring: Scoring,
    ignore_case: bool,
    quiet: bool = False,
    solver: Solver | None = None,
    keep_going: bool = False,
    use: Callable[[GradeRun], None] = lambda run: None,
) -> GradeRun:
    """Verdicts of every submission against the answers of its test, compared by the workers
    (only files whose verdicts are not stored yet); `use` reads the run's verdicts (to write
    reports) while they can be read. With `keep_going`, a test whose input is invalid marks
    its submissions instead of stopping the grading."""
    progress = ProgressBar("grade", enabled=not quiet)
    contest = Contest(problem, tests, submissions, scoring, ignore_case)
    try:
        if solver is not None:  # a server's answers: the comparisons are made here
            found = _found(problem, tests, solver, keep_going)
            run = _run(contest, found, MemoryVerdicts(), lambda todo: _compare_here(todo, contest))
            use(run)
            return run
        with service.cluster(settings) as c:
            found = _found(problem, tests, _cluster_solver(c, problem, progress), keep_going)
            store = RedisVerdicts(c.store.client, settings.result_ttl)
            run = _run(contest, found, store, lambda todo: _compare_on(c, todo, contest, progress))
            use(run)
            return run
    finally:
        progress.close()


def judge_programs(
    settings: Settings,
    problem: Problem,
    tests: list[Test],
    programs: list[Program],
    *,
    scoring: Scoring,
    quiet: bool = False,
    keep_going: bool = False,
    lazy: bool = False,
    use: Callable[[GradeRun], None] = lambda run: None,
    note: Callable[[str], None] = lambda line: None,
) -> GradeRun:
    """Verdicts of every contestant's program on every test, judged by the workers in their
    sandboxes (only (program, test) pairs whose verdicts are not stored yet); as `grade`.
    `lazy`: a test stops at its first failing case (the rest NR). `note` hears how many
    pairs were judged now."""
    progress = ProgressBar("judge", enabled=not quiet)
    try:
        with service.cluster(settings) as c:
            return judge_on(
                c,
                problem,
                tests,
                programs,
                scoring=scoring,
                progress=progress,
                keep_going=keep_going,
                lazy=lazy,
                use=use,
                note=note,
            )
    finally:
        progress.close()


def judge_on(
    c: service.Cluster,
    problem: Problem,
    tests: list[Test],
    programs: list[Program],
    *,
    scoring: Scoring,
    progress: ProgressBar,
    keep_going: bool = False,
    lazy: bool = False,
    use: Callable[[GradeRun], None] = lambda run: None,
    note: Callable[[str], None] = lambda line: None,
) -> GradeRun:
    """`judge_programs` on a cluster already open (a hack search judges many times)."""
    subs = judge_service.submissions(programs, tests)
    salt = {p.contestant: judge_service.salt(c.settings.judge, p, lazy=lazy) for p in programs}
    contest = Contest(problem, tests, subs, scoring, False, salt)
    chunks = judge_service.Chunks(problem, c.settings.judge, programs, lazy=lazy)
    judged, did = 0, list[JobCounters]()

    def judge(todo: Sequence[comparing.Output]) -> Iterator[FileVerdicts]:
        nonlocal judged
        judged = len(todo)
        return _judge_on(c, todo, chunks, progress, did)

    found = _found(problem, tests, _cluster_solver(c, problem, progress), keep_going)
    store = RedisVerdicts(c.store.client, c.settings.result_ttl)
    run = _run(contest, found, store, judge)
    known = "; the rest were known" if judged < len(subs) else ""
    note(f"judged {judged} of {len(subs)} (program, test) pairs{known}")
    if did and did[0].judging is not None:
        note(judging_line(did[0].judging._asdict()))
    use(run)
    return run


def _judge_on(
    c: service.Cluster,
    todo: Sequence[comparing.Output],
    chunks: judge_service.Chunks,
    progress: ProgressBar,
    did: list[JobCounters],
) -> Iterator[FileVerdicts]:
    """The verdicts of `todo`, judged by the cluster's workers in one judging job (whose
    counters go to `did`)."""
    job_id = comparing.job_id_for(chunks.problem.name, todo, kind="judge")
    s = c.settings
    files, programs = len(todo), len({o.path for o in todo})
    most = chunks.settings.batch_cases
    opened = comparing.open_job(
        c.store, job_id, chunks.problem.name, files, most, kind="judge", programs=programs
    )
    if not opened:
        window = Window(c.store, job_id, s, lambda p: c.check(), chunks=s.chunk.window)
        try:
            count, cases = chunks.produce(
                c.store, c.send, job_id, todo, window if s.chunk.window else None
            )
        except UsageError:
            c.store.delete(job_id)
            raise
        progress.add_total(cases)
        comparing.finish_production(c.store, job_id, count, cases)
    did.append(service.wait(c, job_id, timeout=None, progress=progress))
    for found in comparing.gather(c.store, job_id, todo):
        yield stopped_at_first_failure(found) if chunks.lazy else found
    c.store.finish(job_id, COMPARE_KEPT_SECONDS)


def _found(problem: Problem, tests: list[Test], solver: Solver, keep_going: bool) -> Found:
    found = Found({}, {}, {})
    todo = []
    for test in tests:
        if test.answers is None:
            todo.append(test)
            continue
        try:
            words = _read_answers(problem, test.answers, _case_count(test.input))
            found.expected[test.name] = _codes(problem, words)
            found.solved[test.name] = None
        except InputError as exc:
            if not keep_going:
                raise
            found.broken[test.name] = str(exc)
    for test, answer in zip(todo, solver(todo) if todo else [], strict=True):
        if isinstance(answer, str):
            if not keep_going:
                raise Refused(answer.removeprefix("error: "))  # one line: the first bad test
            found.broken[test.name] = answer.removeprefix("error: ")
            continue
        found.expected[test.name] = _codes(problem, answer[0])
        found.solved[test.name] = answer[1]
    return found


def _codes(problem: Problem, words: list[str]) -> str:
    index = {word: encode_answer(i) for i, word in enumerate(problem.answers)}
    return "".join(index[word] for word in words)


def _cluster_solver(c: service.Cluster, problem: Problem, progress: ProgressBar) -> Solver:
    def solve(todo: list[Test]) -> list[Answers]:
        texts = {t.name: io.StringIO() for t in todo}
        outcomes = service.run_on(
            c,
            problem,
            [service.FileJob(t.input, texts[t.name]) for t in todo],
            lambda line: None,
            keep_going=False,
            lane="auto",
            progress=progress,
        )
        found: list[Answers] = []
        for test, outcome in zip(todo, outcomes, strict=True):
            if outcome.job is None:
                found.append(outcome.error or f"error: {test.input}: not solved")
            else:
                found.append((texts[test.name].getvalue().splitlines(), outcome.job.queued > 0))
        return found

    return solve


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

    def test_input(self, name: str) -> Path:
        """The input file of a test."""
        return next(t.input for t in self.tests if t.name == name)


LOOKUP_FILES = 20_000  # files hashed and looked up in Redis at a time


def _run(
    contest: Contest,
    found: Found,
    store: VerdictStore,
    compare: Callable[[Sequence[comparing.Output]], Iterator[FileVerdicts]],
) -> GradeRun:
    """Each file's key and digest (32 bytes each, kept per file), then the verdicts of those
    not stored yet, compared in one job."""
    subs = contest.submissions
    keys, digests, todo = bytearray(32 * len(subs)), bytearray(32 * len(subs)), array("q")
    for start in range(0, len(subs), LOOKUP_FILES):
        batch = []
        for i in range(start, min(start + LOOKUP_FILES, len(subs))):
            sub = subs[i]
            expected = found.expected.get(sub.test)
            if expected is None:
                continue  # its test is broken: no key
            digest = comparing.digest_of(sub.path)
            salted = digest + contest.salt.get(sub.contestant, "")
            key = file_key(contest.problem, expected, contest.ignore_case, salted)
            keys[32 * i : 32 * i + 32] = bytes.fromhex(key)
            digests[32 * i : 32 * i + 32] = bytes.fromhex(digest)
            batch.append((key, i))
        seen = set()  # equal files are compared once (within a batch)
        for (key, i), known in zip(batch, store.known([k for k, _ in batch]), strict=True):
            if not known and key not in seen:
                seen.add(key)
                todo.append(i)
    if todo:
        outputs = _Outputs(contest, found, keys, digests, todo)
        store.put_many((o.key, got) for o, got in zip(outputs, compare(outputs), strict=True))
    run = GradeRun(contest, keys, found, store)
    run.count()
    return run


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


COMPARE_KEPT_SECONDS = 600  # a gathered comparison job, for gradings of the same files


def _compare_on(
    c: service.Cluster, todo: Sequence[comparing.Output], contest: Contest, progress: ProgressBar
) -> Iterator[FileVerdicts]:
    """The verdicts of `todo`, compared by the cluster's workers in one comparison job; a
    small job (chunk.local_cases: a re-grade of a few files) is run here, through the same
    runner and records, as it is produced (no worker has to start)."""
    problem, ignore_case = contest.problem, contest.ignore_case
    job_id = comparing.job_id_for(problem.name, todo)
    s = c.settings
    local = sum(len(o.expected) for o in todo) <= s.chunk.local_cases
    send = c.run_here() if local else c.send
    if not comparing.open_job(c.store, job_id, problem.name, len(todo), s.chunk.max_cases):
        window = Window(c.store, job_id, s, lambda p: c.check(), chunks=s.chunk.window)
        try:
            chunks, cases = comparing.produce(
                c.store,
                send,
                job_id,
                todo,
                problem=problem.name,
                ignore_case=ignore_case,
                window=window if s.chunk.window else None,
                on_cases=progress.add_total,
                on_file=lambda n: progress.set_files(n, len(todo)),
            )
        except UsageError:
            c.store.delete(job_id)
            raise
        comparing.finish_production(c.store, job_id, chunks, cases)
    service.wait(c, job_id, timeout=None, progress=progress)
    yield from comparing.gather(c.store, job_id, todo)
    # the files' verdicts are kept by their keys now: the job is needed only by another
    # grading of the same files that waits on it too, so it expires soon (were the last
    # verdicts not stored after all, a re-run compares just those again)
    c.store.finish(job_id, COMPARE_KEPT_SECONDS)


def _compare_here(todo: Sequence[comparing.Output], contest: Contest) -> Iterator[FileVerdicts]:
    """The verdicts of `todo`, compared in this process a file at a time (with the workers'
    code): for `grade --server`, whose machine may not reach Redis."""
    from workers.runner import compare_chunk

    problem, ignore_case = contest.problem, contest.ignore_case
    for output in todo:
        result = FileVerdicts()

        def fold(segments: list[Segment], result: FileVerdicts = result) -> None:
            payload = ComparePayload(problem.name, ignore_case, segments)
            for _, codes, shown, extra, usage in comparing.segments_of(
                *compare_chunk(problem, payload)
            ):
                comparing.add(result, codes, shown, extra, usage)

        packer = comparing.Packer(fold, comparing.CHUNK_CASES)
        if output.path is None:
            packer.file(0, output.expected, iter(()))
        else:
            with comparing.open_output(output.path) as stream:
                packer.file(0, output.expected, comparing.LineReader(stream).blocks())
        packer.flush()
        yield result


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


def summary(out: TextIO, *, standings: bool) -> Callable[[GradeRun], reports.Report]:
    """The text summary (then the standings) as a report for ReportFiles.write."""
    return lambda run: reports.TextSummary(out, run, standings=standings)


def _read_answers(problem: Problem, path: Path, cases: int) -> list[str]:
    """The official answers, one word per non-blank line, exactly one per case of the test."""
    try:
        lines = [line.strip() for line in path.read_text(errors="replace").splitlines()]
    except OSError as exc:
        raise UsageError(f"cannot read answers {path}: {exc.strerror}") from None
    words: list[str] = []
    for number, word in enumerate(lines, 1):
        if not word:
            continue
        if word not in problem.answers:
            raise InputError(
                f"{word[:40]!r} is not one of {', '.join(problem.answers)}",
                file=str(path),
                line=number,
                case=len(words) + 1,
            )
        words.append(word)
    if len(words) != cases:
        raise InputError(f"{len(words)} answers for the {cases} cases of its test", file=str(path))
    return words


def _case_count(path: Path) -> int:
    """A test's number of cases T, its first token (the test itself is checked when solved)."""
    try:
        with path.open("rb") as stream:
            head = stream.read(64).split()
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    if not head or not head[0].isdigit() or len(head[0]) > 18:
        raise InputError("the first token must be the number of cases", file=str(path), line=1)
    return int(head[0])
