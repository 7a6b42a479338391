"""Running one chunk: fetch its payload, solve (or compare) every case, store the result once."""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from enum import StrEnum
from types import TracebackType
from typing import TYPE_CHECKING

import msgspec

from pipeline.config import JudgeSettings
from pipeline.data.messages import (
    ANSWER_CODES,
    INVALID_CODE,
    BadPayload,
    ChunkPayload,
    ComparePayload,
    FilePayload,
    JudgePayload,
    Payload,
    RunPayload,
    SlicePayload,
    encode_answer,
    open_payload,
)
from pipeline.errors import UsageError
from pipeline.games.problem import Problem, slice_solver
from pipeline.games.registry import find_problem
from pipeline.store.protocol import Store

if TYPE_CHECKING:
    from workers.programs import Runner


class Outcome(StrEnum):
    """What happened to a chunk task."""

    SOLVED = "solved"
    DUPLICATE = "duplicate"  # already answered (a message delivered twice)
    GONE = "gone"  # its job does not exist (any more) or was cancelled, or no such chunk
    FAILED = "failed"
    REJECTED = "rejected"  # a malformed message (see pipeline.data.messages.task_args)


class Policy(msgspec.Struct, frozen=True):
    """How a worker runs chunks."""

    holder: str = "worker"  # names the lease holder
    lease_seconds: int = 30  # an unrefreshed lease tells others the worker is gone
    max_attempts: int = 3  # runs of a chunk before it is failed as a poison chunk
    file_payloads: bool = False  # read chunks that name a place in an input file
    judge: JudgeSettings | None = None  # judge programs (grade --programs) with these
    verdict_ttl: int = 86400  # seconds a program's verdicts of cases are kept (result_ttl)


DEFAULT_POLICY = Policy()


class _Leases:
    """One thread per process renews the leases of the chunks the process is running (a
    process of a prefork pool runs one at a time; a forked process starts its own)."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Hold nothing, and no thread yet."""
        self._held: dict[tuple[str, int], tuple[Store, Policy, float]] = {}  # -> next renewal
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._pid = 0

    def hold(self, store: Store, job_id: str, index: int, policy: Policy) -> None:
        with self._lock:
            self._held[(job_id, index)] = (store, policy, time.monotonic() + _every(policy))
            if not self._pid:
                self._pid = os.getpid()
                threading.Thread(target=self._run, daemon=True, name="leases").start()
        self._wake.set()

    def drop(self, job_id: str, index: int) -> None:
        with self._lock:
            self._held.pop((job_id, index), None)

    def _run(self) -> None:
        while True:
            with self._lock:
                due = [
                    (key, store, policy)
                    for key, (store, policy, at) in self._held.items()
                    if at <= time.monotonic()
                ]
                for key, store, policy in due:
                    self._held[key] = (store, policy, time.monotonic() + _every(policy))
                pause = min((at for _, _, at in self._held.values()), default=None)
            for (job_id, index), store, policy in due:
                with contextlib.suppress(Exception):  # a missed renewal is retried next time
                    store.refresh_lease(job_id, index, policy.holder, policy.lease_seconds)
            self._wake.wait(None if pause is None else max(pause - time.monotonic(), 0))
            self._wake.clear()


def _every(policy: Policy) -> float:
    return max(policy.lease_seconds / 3, 0.1)


_LEASES = _Leases()
os.register_at_fork(after_in_child=_LEASES.reset)  # a forked process starts afresh


class Lease:
    """A chunk's lease, renewed by the process's lease thread while the chunk runs."""

    def __init__(self, store: Store, job_id: str, index: int, policy: Policy) -> None:
        self._args = (store, job_id, index, policy)

    def __enter__(self) -> Lease:
        _LEASES.hold(*self._args)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        _LEASES.drop(self._args[1], self._args[2])


def run_chunk(store: Store, job_id: str, index: int, policy: Policy = DEFAULT_POLICY) -> Outcome:
    """Solve (or compare) chunk `index` of `job_id`; safe to run any number of times."""
    attempt, raw, digest = store.begin_chunk(job_id, index, policy.holder, policy.lease_seconds)
    if raw is None:
        return Outcome.DUPLICATE if attempt == 0 else Outcome.GONE
    try:
        payload = open_payload(raw)
    except BadPayload as exc:
        store.fail_chunk(job_id, index, str(exc))
        return Outcome.FAILED
    if attempt > policy.max_attempts:
        where = _where(store, job_id, index, payload)
        store.fail_chunk(job_id, index, f"{where}: its worker died in {attempt - 1} attempts")
        return Outcome.FAILED
    if isinstance(payload, RunPayload):  # a problem package's: no game of ours
        with Lease(store, job_id, index, policy):
            try:
                codes, details = _package_chunk(payload, policy)
            except BadPayload as exc:
                store.fail_chunk(job_id, index, str(exc))
                return Outcome.FAILED
        saved = store.save_answers(job_id, index, codes, details, digest)
        return Outcome.SOLVED if saved else Outcome.DUPLICATE
    problem = find_problem(payload.problem)
    if problem is None:
        store.fail_chunk(job_id, index, f"unknown problem {payload.problem!r}")
        return Outcome.FAILED
    with Lease(store, job_id, index, policy):
        if isinstance(payload, ComparePayload | JudgePayload):
            try:
                codes, details = _check_chunk(problem, payload, policy, store, job_id)
            except BadPayload as exc:
                store.fail_chunk(job_id, index, str(exc))
                return Outcome.FAILED
        else:
            if isinstance(payload, FilePayload):
                try:
                    payload = _from_file(payload, policy)
                except BadPayload as exc:
                    store.fail_chunk(job_id, index, str(exc))
                    return Outcome.FAILED
            found = _solve_chunk(store, job_id, index, problem, payload, careful=attempt > 1)
            if isinstance(found, Outcome):
                return found
            codes, details = found, ""
    saved = store.save_answers(job_id, index, codes, details, digest)
    return Outcome.SOLVED if saved else Outcome.DUPLICATE


def _check_chunk(
    problem: Problem,
    payload: ComparePayload | JudgePayload,
    policy: Policy,
    store: Store,
    job_id: str,
) -> tuple[str, str]:
    """A comparison or judging chunk's letters and details."""
    if isinstance(payload, ComparePayload):
        return compare_chunk(problem, payload)
    if policy.judge is None:
        raise BadPayload("this process does not judge programs")
    from workers.programs import Memory

    memory = Memory(store, job_id, policy.verdict_ttl)
    return _judge_runner(policy.judge).judge(problem, payload, memory)


def _package_chunk(payload: RunPayload, policy: Policy) -> tuple[str, str]:
    """A problem package's run chunk: its letter and details."""
    from workers.packages import needs_sandbox, run_chunk, sweep_runs

    if not needs_sandbox(payload):
        return run_chunk(None, payload)
    if policy.judge is None:
        raise BadPayload("this process does not judge programs")

    runner = _judge_runner(policy.judge)
    if not _SWEPT:  # once a process: what killed workers left
        sweep_runs()
        _SWEPT.append(True)
    return run_chunk(runner, payload)


_SWEPT: list[bool] = []


_RUNNERS: dict[str, Runner] = {}


def _judge_runner(settings: JudgeSettings) -> Runner:
    """One judge per process and settings (it checks the sandbox once); a sandbox that
    cannot run fails the chunk with its reason."""
    from workers.programs import Runner

    key = repr(settings)
    if key not in _RUNNERS:
        try:
            _RUNNERS[key] = Runner(settings)
        except UsageError as exc:
            raise BadPayload(f"this worker cannot judge programs: {exc}") from None
    return _RUNNERS[key]


def _from_file(payload: FilePayload, policy: Policy) -> SlicePayload:
    """The bytes a reference names: an object's, or a file's if this worker reads files."""
    if not payload.remote and not policy.file_payloads:
        raise BadPayload(
            f"chunk names a place in {payload.path}, and this worker reads only chunks that"
            " carry their cases (setting file_payloads)"
        )
    return payload.read()


def _where(store: Store, job_id: str, index: int, payload: Payload) -> str:
    """The case (or cases) a chunk whose worker keeps dying was at."""
    if isinstance(payload, ComparePayload):
        return f"comparison chunk {index}"
    if isinstance(payload, JudgePayload):
        last = payload.first + len(payload.cases) - 1
        return f"judging chunk {index} (cases {payload.first}-{last})"
    if isinstance(payload, RunPayload):
        return f"run chunk {index} (file {payload.file})"
    count = len(payload.cases) if isinstance(payload, ChunkPayload) else payload.count
    offset = store.cursor(job_id, index)
    if offset is None and count == 1:
        offset = 0
    if offset is not None:
        return f"case {payload.first + offset}"
    return f"cases {payload.first}-{payload.first + count - 1}"


def _solve_chunk(
    store: Store,
    job_id: str,
    index: int,
    problem: Problem,
    payload: ChunkPayload | SlicePayload,
    *,
    careful: bool,
) -> str | Outcome:
    """The answer codes of a chunk: a slice by the game's C kernel in one call, unless a run
    died before (then case by case, see _solve)."""
    if isinstance(payload, SlicePayload):
        solve_slice = slice_solver(problem)
        try:
            if solve_slice is not None and not careful:
                return str(solve_slice(payload.data, payload.count), "ascii")
            payload = ChunkPayload(payload.problem, payload.first, cases_of_slice(problem, payload))
        except ValueError as exc:  # the C kernel or the reader found what no producer sends
            store.fail_chunk(job_id, index, f"malformed chunk payload: {exc}")
            return Outcome.FAILED
    return _solve(store, job_id, index, problem, payload, careful=careful)


def cases_of_slice(problem: Problem, payload: SlicePayload) -> list[object]:
    """A slice's cases read by the game's Python reader (exactly `count` of them)."""
    import io

    from pipeline.errors import InputError
    from pipeline.games.reader import read_cases
    from pipeline.games.tokens import TokenReader

    data = bytes(payload.data)
    head = f"{payload.count}\n".encode()
    tokens = TokenReader(
        io.BytesIO(head + data), f"chunk from case {payload.first}", max_token=max(len(data), 1)
    )
    try:
        return [found.case for found in read_cases(problem, tokens)]
    except InputError as exc:
        raise ValueError(str(exc)) from None


def _solve(
    store: Store,
    job_id: str,
    index: int,
    problem: Problem,
    payload: ChunkPayload,
    *,
    careful: bool,
) -> str | Outcome:
    """The answer codes of every case; with `careful` (a run died before) each case is
    recorded first, so that the culprit gets named."""
    codes = []
    for offset, case in enumerate(payload.cases):
        if careful:
            store.set_cursor(job_id, index, offset)
        if case is None:
            codes.append(INVALID_CODE)
            continue
        try:
            codes.append(encode_answer(problem.solve(case)))
        except Exception as exc:  # a solver bug must name its case, not kill the worker
            number = payload.first + offset
            store.fail_chunk(job_id, index, f"case {number}: {type(exc).__name__}: {exc}")
            return Outcome.FAILED
    return "".join(codes)


def compare_chunk(problem: Problem, payload: ComparePayload) -> tuple[str, str]:
    """The verdict letters of every case of every segment, and per segment (as JSON) its
    file, its number of cases, its first mismatches and its extra output."""
    from pipeline.grading.verdicts import compare_file, compare_segment  # grading only

    words = dict(zip(ANSWER_CODES, problem.answers, strict=False))
    codes, details = [], []
    for seg in payload.segments:
        try:
            expected = [words[code] for code in seg.expected]
        except KeyError as exc:
            raise BadPayload(f"{exc} is not an answer code of {problem.name}") from None
        extra = seg.extra
        if seg.data is not None:
            letters, shown, extra = compare_file(
                expected, seg.data, ignore_case=payload.ignore_case
            )
        else:
            letters, shown = compare_segment(
                expected, seg.lines, seg.first, ignore_case=payload.ignore_case
            )
        codes.append(letters)
        details.append([seg.file, len(letters), shown, extra])
    return "".join(codes), json.dumps(details, separators=(",", ":"))
