"""Comparison jobs: output files read and cut into chunks for the workers, their verdicts
gathered back per file. Output files are read here, never by workers on other machines."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from bisect import bisect_left
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from io import BufferedReader
from itertools import accumulate
from pathlib import Path
from typing import BinaryIO

from pipeline.data.messages import ComparePayload, Segment
from pipeline.data.producer import Queuer
from pipeline.errors import JobCancelled, JobFailed, JobLost, UsageError
from pipeline.escape import shorten
from pipeline.grading.rules import SHOWN_CHARS
from pipeline.grading.verdicts import MAX_LINE, FileVerdicts, output_lines
from pipeline.store.connections import this_process
from pipeline.store.jobstate import JobState
from pipeline.store.protocol import Store

BLOCK = 1 << 20  # bytes read at a time
CHUNK_CASES = 50_000  # cases of a comparison chunk at most (and settings.chunk.max_cases)
CHUNK_BYTES = 1 << 20  # bytes of output lines in a comparison chunk, about


@dataclass(frozen=True)
class Output:
    """One output file to compare: its place, what it is compared with, and its bytes' hash."""

    key: str  # names its verdicts (grade_service.file_key)
    path: Path | None  # None: no such file (every case MISSING)
    expected: str  # answer codes of its test
    digest: str  # SHA-256 of its bytes when it was listed
    test: Path | None = None  # a judged program's: the input it runs on


def job_id_for(problem: str, outputs: Sequence[Output], kind: str = "compare") -> str:
    """A comparison (or judging) job is named by the files it compares, so that a re-run
    finds it."""
    digest = hashlib.sha256()
    for n, output in enumerate(outputs):
        digest.update(("\n" if n else "").encode() + output.key.encode())
    return f"{kind}.{problem}-{digest.hexdigest()[:24]}"


@contextmanager
def open_output(path: Path) -> Iterator[BufferedReader]:
    """A submission file opened for reading: a regular file only, and a symbolic link is not
    followed (O_NOFOLLOW) even if the file was swapped for one after it was listed."""
    fd, _ = _open_regular(path)
    with os.fdopen(fd, "rb") as stream:
        yield stream


def _open_regular(path: Path) -> tuple[int, os.stat_result]:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise UsageError(f"cannot read {path}: not a regular file")
    return fd, info


def digest_of(path: Path | None) -> str:
    """SHA-256 of a submission file's bytes (of nothing, for a file that does not exist)."""
    digest = hashlib.sha256()
    if path is None:
        return digest.hexdigest()
    fd, info = _open_regular(path)
    try:  # read as it is now: its size at first, then whatever it has grown by
        size = min(info.st_size + 1, 1 << 20)
        while data := os.read(fd, size):
            digest.update(data)
            size = 1 << 20
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    finally:
        os.close(fd)
    return digest.hexdigest()


class LineReader:
    """The non-blank lines of a stream, stripped, a block at a time; a line is cut at MAX_LINE
    bytes (and marked "...") and the rest of it is skipped, never held. Hashes what it reads."""

    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream
        self.hash = hashlib.sha256()
        self._rest = b""  # the start of a line not ended yet (at most MAX_LINE + 1 bytes)
        self._cut = False  # the rest of an overlong line is being skipped

    def blocks(self) -> Iterator[list[str]]:
        """Lists of lines, in order."""
        while data := self.stream.read(BLOCK):
            self.hash.update(data)
            parts = data.split(b"\n")
            head = self._rest if self._cut else self._rest + parts[0]
            if len(parts) == 1:
                self._rest, self._cut = self._hold(head)
                continue
            lines = [head, *parts[1:-1]]
            self._rest, self._cut = self._hold(parts[-1])
            yield output_lines(lines)
        if self._rest:
            yield output_lines([self._rest])

    @staticmethod
    def _hold(start: bytes) -> tuple[bytes, bool]:
        return (start[: MAX_LINE + 1], True) if len(start) > MAX_LINE else (start, False)


class Packer:
    """Segments of output files packed into chunks of bounded cases and bytes."""

    def __init__(self, emit: Callable[[list[Segment]], None], cases: int) -> None:
        self.emit = emit
        self.max_cases = cases
        self.segments: list[Segment] = []
        self.cases = self.bytes = 0

    def room(self) -> int:
        return self.max_cases - self.cases

    def whole(self, number: int, expected: str, data: bytes) -> None:
        """A whole small file as one segment, its lines left for the worker to split."""
        if self.segments and (len(expected) > self.room() or len(data) > CHUNK_BYTES - self.bytes):
            self.flush()
        self.add(Segment(number, 1, expected, [], data=data), len(data))

    def add(self, segment: Segment, size: int) -> None:
        self.segments.append(segment)
        self.cases += len(segment.expected)
        self.bytes += size + len(segment.expected)
        if self.cases >= self.max_cases or self.bytes >= CHUNK_BYTES:
            self.flush()

    def flush(self) -> None:
        if self.segments:
            self.emit(self.segments)
        self.segments, self.cases, self.bytes = [], 0, 0

    def file(self, number: int, expected: str, blocks: Iterator[list[str]]) -> None:
        """Every case of one file in segments; the lines past its last case become its
        `extra` (the first one shortened, the others counted)."""
        n, pos = len(expected), 0
        extra: tuple[str, int] | None = None
        for lines in blocks:
            i = 0
            while i < len(lines) and pos < n:
                take = self._take(lines, i, min(self.room(), n - pos))
                segment = Segment(number, pos + 1, expected[pos : pos + len(take)], take)
                self.add(segment, sum(map(len, take)))
                i, pos = i + len(take), pos + len(take)
            if i < len(lines):
                if extra is None:
                    extra, i = (shorten(lines[i], SHOWN_CHARS), 0), i + 1
                extra = (extra[0], extra[1] + len(lines) - i)
        while pos < n:  # the output ended early: the rest is MISSING
            count = min(self.room(), n - pos)
            self.add(Segment(number, pos + 1, expected[pos : pos + count], []), 0)
            pos += count
        if extra is not None or n == 0:  # every file has a segment; extra output comes last
            self.add(Segment(number, n + 1, "", [], extra), 0)

    def _take(self, lines: list[str], start: int, count: int) -> list[str]:
        """Up to `count` lines from `start`, fewer when they would overfill the chunk."""
        take = lines[start : start + count]
        sizes = list(accumulate(map(len, take)))
        budget = CHUNK_BYTES - self.bytes
        if sizes and sizes[-1] > budget:
            take = take[: max(bisect_left(sizes, budget), 1)]
        return take


def produce(
    queue: Queuer,
    outputs: Sequence[Output],
    *,
    problem: str,
    ignore_case: bool,
    on_cases: Callable[[int], None],
    on_file: Callable[[int], None] = lambda n: None,
) -> tuple[int, int]:
    """Queue every chunk of a comparison job that has no verdicts yet; (chunks, cases).
    `on_file` hears how many files were read so far."""
    store, job_id = queue.store, queue.job_id
    answered = store.answered(job_id)
    chunks = 0

    def emit(segments: list[Segment]) -> None:
        nonlocal chunks
        if chunks not in answered:
            queue.put(chunks, ComparePayload(problem, ignore_case, segments).encode())
        on_cases(sum(len(s.expected) for s in segments))
        chunks += 1

    manifest = store.manifest(job_id) or {}
    packer = Packer(emit, int(manifest.get("max_cases", CHUNK_CASES)))
    for number, output in enumerate(outputs):
        if output.path is None:
            packer.file(number, output.expected, iter(()))
        else:
            with open_output(output.path) as stream:
                digest = _read(stream, packer, number, output.expected)
            if digest != output.digest:  # verdicts of other bytes than listed
                raise UsageError(f"cannot read {output.path}: the file changed while it was read")
        on_file(number + 1)
    packer.flush()
    return chunks, sum(len(o.expected) for o in outputs)


def _read(stream: BufferedReader, packer: Packer, number: int, expected: str) -> str:
    """One file into segments: whole when it is small (the worker splits its lines), else
    line by line; the SHA-256 of what was read."""
    size = os.fstat(stream.fileno()).st_size
    if size <= CHUNK_BYTES and len(expected) <= packer.max_cases:
        data = stream.read(CHUNK_BYTES + 1)
        if len(data) <= CHUNK_BYTES:
            packer.whole(number, expected, data)
            return hashlib.sha256(data).hexdigest()
        stream.seek(0)  # it grew: read it as a large file (its hash says it changed)
    reader = LineReader(stream)
    packer.file(number, expected, reader.blocks())
    return reader.hash.hexdigest()


def open_job(
    store: Store,
    job_id: str,
    problem: str,
    files: int,
    max_cases: int,
    *,
    kind: str = "compare",
    programs: int = 0,
) -> bool:
    """Open (or find) a comparison (or judging, of `programs`) job; whether its production
    is finished (every chunk queued: nothing is left to produce, only to wait for)."""
    fields: dict[str, str | int] = {
        **({"programs": programs} if kind == "judge" else {}),
        "problem": problem,
        "input": f"{files} output file" + "s" * (files != 1),
        "kind": kind,
        "target_work": 0,
        "max_cases": min(max_cases, CHUNK_CASES),
        "lane": "bulk",
        "producer": this_process(),
    }
    store.open_job(job_id, fields)
    progress = store.progress(job_id)
    return bool(progress and progress.chunks is not None)


def finish_production(store: Store, job_id: str, chunks: int, cases: int) -> None:
    """Every chunk queued: the job's counters are complete."""
    finished = store.finish_production(job_id, chunks, cases)
    if finished is None:
        raise JobLost(f"Redis lost job {job_id} while it was produced")
    if finished == JobState.CANCELLED:
        raise JobCancelled(f"job {job_id} was cancelled")


def gather(store: Store, job_id: str, outputs: Sequence[Output]) -> Iterator[FileVerdicts]:
    """Each file's verdicts, in order, from the job's stored chunk results."""
    progress = store.progress(job_id)
    chunks = progress.chunks if progress and progress.chunks is not None else 0
    number, current = 0, FileVerdicts()
    for codes, details in store.iter_details(job_id, chunks):
        for file, letters, shown, extra, usage in segments_of(codes, details):
            if not number <= file < len(outputs):
                raise JobFailed(f"job {job_id} has verdicts of a file it does not compare")
            if file != number:
                yield _checked(current, outputs[number], job_id)
                number, current = file, FileVerdicts()
            add(current, letters, shown, extra, usage)
    yield _checked(current, outputs[number], job_id)
    if number != len(outputs) - 1:
        raise JobFailed(f"job {job_id} has verdicts of {number + 1} of {len(outputs)} files")


Shown = list[tuple[int, str | None]]
Usage = list[tuple[int, int]]
Extra = tuple[str, int] | None


def segments_of(codes: str, details: str) -> Iterator[tuple[int, str, Shown, Extra, Usage]]:
    """A compared (or judged) chunk's segments: file, letters, first mismatches, extra
    output, and a judged program's time and memory per case."""
    at = 0
    for file, count, shown, extra, *usage in json.loads(details):
        yield (
            int(file),
            codes[at : at + count],
            [(int(i), f) for i, f in shown],
            (str(extra[0]), int(extra[1])) if extra else None,
            [(int(us), int(kib)) for us, kib in usage[0]] if usage else [],
        )
        at += count


def add(verdicts: FileVerdicts, codes: str, shown: Shown, extra: Extra, usage: Usage) -> None:
    """A segment's verdicts appended to its file's."""
    verdicts.add(codes, shown)
    verdicts.usage += usage
    if extra is not None:
        verdicts.extra = extra


def _checked(verdicts: FileVerdicts, output: Output, job_id: str) -> FileVerdicts:
    if verdicts.total != len(output.expected):
        raise JobFailed(
            f"job {job_id} has {verdicts.total} verdicts of a file of {len(output.expected)} cases"
        )
    return verdicts
