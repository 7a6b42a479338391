"""What crosses Redis between producer and workers: chunk payloads, as JSON."""

from __future__ import annotations

import json
import os
import re
import string
from typing import Any

import msgspec
import zstandard
from blake3 import blake3

from pipeline.data.objects import read_range
from pipeline.errors import UsageError
from pipeline.games.problem import MAX_ANSWERS
from pipeline.store.jobstate import is_job_id
from pipeline.urls import is_remote

# A chunk's answers travel as one ASCII character per case: character i of ANSWER_CODES for
# answer word i of the game, INVALID_CODE for a case that --keep-going let through. Redis
# counts them with string.len, so they must be one byte each.
ANSWER_CODES = string.digits + string.ascii_uppercase + string.ascii_lowercase
assert len(ANSWER_CODES) == MAX_ANSWERS  # a code for every answer word a game may have
INVALID_CODE = "-"


def encode_answer(index: int) -> str:
    """The code of answer word `index`."""
    return ANSWER_CODES[index]


def answer_lines(words: tuple[str, ...], invalid_word: str) -> dict[int, str]:
    """A str.translate table from codes to result lines (the word and a newline)."""
    table = {ord(ANSWER_CODES[i]): word + "\n" for i, word in enumerate(words)}
    table[ord(INVALID_CODE)] = invalid_word + "\n"
    return table


# Bumped whenever the payload or a game's case encoding changes, so that a worker of another
# gamebatch version fails the chunk with a clear reason instead of misreading it.
# 2: strgame strings are joined by spaces (they were joined by newlines).
# 3: comparison chunks of grading jobs (ComparePayload) beside solving chunks.
# 4: solving chunks may be the input's own bytes (SlicePayload) or a place in the input file
#    (FilePayload).
# 5: a place in a file that grows as it is uploaded (FilePayload with a CRC-32).
# 6: a place in a file is checked by the BLAKE3 digest of its bytes (FilePayload.digest).
# 7: judging chunks (JudgePayload): a program and cases to run it on.
# 8: a chunk's payload may be kept in the payload store, Redis holding its place (StoredPayload).
FORMAT = 8


def digest_of(data: bytes | memoryview) -> str:
    """What names a chunk's bytes: their BLAKE3 digest (hex). Collision resistant, so that no
    one can make other bytes pass for a chunk's, and four times as fast as SHA-256 here."""
    return blake3(data).hexdigest()


MAX_CHUNKS = 1 << 40  # no job has more chunks: a larger index is not a chunk


class BadPayload(ValueError):
    """A chunk payload that is not what a producer writes."""


class BadTask(ValueError):
    """A chunk task whose arguments no producer sends."""


def task_args(job_id: object, index: object) -> tuple[str, int]:
    """The (job id, chunk index) of a chunk task, checked: the broker is not trusted."""
    if not isinstance(job_id, str) or not is_job_id(job_id):
        raise BadTask(f"{_cut(job_id)} is not a job id")
    if type(index) is not int or not 0 <= index < MAX_CHUNKS:
        raise BadTask(f"{_cut(index)} is not a chunk index (job {job_id})")
    return job_id, index


def _cut(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:60] + "..."


class ChunkPayload(msgspec.Struct, frozen=True):
    """The cases of one chunk, with the game's name and the number of the first case."""

    problem: str
    first: int
    cases: list[Any]

    def encode(self) -> bytes:
        """Compact JSON."""
        doc = {"format": FORMAT, "problem": self.problem, "first": self.first, "cases": self.cases}
        return json.dumps(doc, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, data: bytes) -> ChunkPayload:
        """Parse and check the shape; raise BadPayload otherwise."""
        payload = decode_payload(data)
        if not isinstance(payload, ChunkPayload):
            raise BadPayload("a comparison chunk where a solving chunk was expected")
        return payload


class SlicePayload(msgspec.Struct, frozen=True):
    """`count` cases as the bytes of the input they were read from (checked by the producer,
    and again by the worker's C kernel), after a one-line JSON header."""

    problem: str
    first: int
    count: int
    data: bytes | memoryview

    def header(self) -> bytes:
        """The header line, newline included: the payload is the header and the data."""
        doc = {
            "format": FORMAT,
            "kind": "slice",
            "problem": self.problem,
            "first": self.first,
            "count": self.count,
        }
        return json.dumps(doc, separators=(",", ":")).encode() + b"\n"

    def encode(self) -> bytes:
        """Header and data in one string."""
        return self.header() + self.data


def packed(payload: bytes) -> bytes:
    """A payload compressed (zstd level 1; setting compress_payloads) after a header line
    that names its size: decode_payload gives what the payload itself gives."""
    doc = {"format": FORMAT, "kind": "zstd", "size": len(payload)}
    header = json.dumps(doc, separators=(",", ":")).encode() + b"\n"
    return header + zstandard.ZstdCompressor(level=1).compress(payload)  # one per call: threads


_HEADER_MAX = 4096  # a slice payload's header line is shorter than this


class StoredPayload(msgspec.Struct, frozen=True):
    """A chunk's payload kept in the payload store (the bytes it would carry through Redis):
    the object `url`, of `size` bytes and `digest` (see digest_of), which the worker reads and
    decodes as the payload itself."""

    url: str
    size: int
    digest: str

    def encode(self) -> bytes:
        """Compact JSON."""
        doc = {"format": FORMAT, "kind": "stored", "url": self.url, "size": self.size}
        return json.dumps({**doc, "digest": self.digest}, separators=(",", ":")).encode()

    def read(self) -> bytes:
        """The payload it names; BadPayload when it is gone or holds other bytes."""
        try:
            data = read_range(self.url, 0, self.size)
        except UsageError as exc:
            raise BadPayload(str(exc)) from None
        if len(data) != self.size or digest_of(data) != self.digest:
            raise BadPayload(f"the payload store holds other bytes at {self.url} than were queued")
        return data


def open_payload(data: bytes) -> Payload:
    """decode_payload of a chunk's payload as Redis holds it: one kept in the payload store is
    read from there first (a payload kept there names no other)."""
    stored = _stored(data) if len(data) < _HEADER_MAX else None
    return decode_payload(data if stored is None else stored.read())


# where a producer keeps a chunk's payload: its job's folder in the payload store
_CHUNK_OBJECT = re.compile(r"^[a-z0-9]+://.+/inputs/[^/]+/[0-9a-f]{24}/chunk-[0-9]+$")


def _stored(data: bytes) -> StoredPayload | None:
    """The place of a payload kept in the payload store, or None for any other payload."""
    try:
        doc = json.loads(data)
        if doc.get("format") != FORMAT or doc.get("kind") != "stored":
            return None
        url, size, digest = doc["url"], int(doc["size"]), doc["digest"]
    except (ValueError, KeyError, TypeError, AttributeError):
        return None  # decode_payload says what is wrong with it
    if not isinstance(url, str) or not _CHUNK_OBJECT.match(url) or not is_remote(url):
        raise BadPayload("a stored payload's place of another shape")
    if size < 0 or not isinstance(digest, str):
        raise BadPayload("a stored payload's place of another shape")
    return StoredPayload(url, size, digest)


class FilePayload(msgspec.Struct, frozen=True):
    """`count` cases as `length` bytes at `offset` of the input `path` (a file that workers
    see, or an object store's URL), for workers that read it; `digest` (see digest_of) of the
    bytes the producer cut them from: a worker solves them only if it reads those very
    bytes. `version` names the object as the producer read it (its VersionId or ETag)."""

    problem: str
    first: int
    count: int
    path: str
    offset: int
    length: int
    digest: str
    version: str = ""

    def encode(self) -> bytes:
        """Compact JSON."""
        doc = {
            "format": FORMAT,
            "kind": "file",
            "problem": self.problem,
            "first": self.first,
            "count": self.count,
            "path": self.path,
            "offset": self.offset,
            "length": self.length,
            "digest": self.digest,
            **({"version": self.version} if self.version else {}),
        }
        return json.dumps(doc, separators=(",", ":")).encode()

    @property
    def remote(self) -> bool:
        """Whether it names an object of a store (read by any worker), not a local file."""
        return is_remote(self.path)

    def read(self) -> SlicePayload:
        """The cases' bytes, from the file or the object; BadPayload when it is gone or
        holds other bytes than the producer read there."""
        data = self._object() if self.remote else self._file()
        if len(data) != self.length or digest_of(data) != self.digest:
            where = "object" if self.remote else "file"
            raise BadPayload(
                f"this worker reads other bytes at {self.path} (offset {self.offset}) than the"
                f" producer did: the {where} changed after it was queued, or this host sees"
                " another one under that name; run the command again"
            )
        return SlicePayload(self.problem, self.first, self.count, data)

    def _file(self) -> bytes:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as exc:
            raise BadPayload(f"cannot read the input {self.path}: {exc.strerror}") from None
        try:
            return os.pread(fd, self.length, self.offset)
        finally:
            os.close(fd)

    def _object(self) -> bytes:
        try:
            return read_range(self.path, self.offset, self.length)
        except UsageError as exc:
            raise BadPayload(str(exc)) from None


class Segment(msgspec.Struct, frozen=True):
    """Consecutive cases of one output file in a comparison chunk."""

    file: int  # the file's place in its grading job
    first: int  # number of the first case
    expected: str  # answer codes of the cases
    lines: list[str]  # the file's non-blank lines for them, stripped (fewer at its end)
    extra: tuple[str, int] | None = None  # at the file's end: a line past the last case, and
    # how many more there are
    data: bytes | None = None  # instead of lines and extra: the whole file, for the worker


class ComparePayload(msgspec.Struct, frozen=True):
    """Segments of output files to compare with their answers, case by case."""

    problem: str
    ignore_case: bool
    segments: list[Segment]

    def encode(self) -> bytes:
        """Compact JSON; a segment's lines travel as one string (they hold no newline), a whole
        file's bytes as latin-1 text (one character per byte)."""
        segments = [
            [s.file, s.first, s.expected, "\n".join(s.lines), s.extra]
            if s.data is None
            else [s.file, s.first, s.expected, s.data.decode("latin-1")]
            for s in self.segments
        ]
        doc = {
            "format": FORMAT,
            "kind": "compare",
            "problem": self.problem,
            "ignore_case": self.ignore_case,
            "segments": segments,
        }
        return json.dumps(doc, separators=(",", ":")).encode()


class JudgePayload(msgspec.Struct, frozen=True):
    """A contestant's program and consecutive cases of one test to run it on: the worker
    compiles it (once per machine) and judges each case (pipeline.judging.cases)."""

    problem: str
    language: str  # a name of the worker's judge.languages
    toolchain: str  # the compiler the grading saw: a worker with another refuses
    source: bytes
    limits: tuple[float, int, int]  # CPU seconds, memory and output bytes of a run
    file: int  # the (program, test) pair's place in its grading job
    first: int  # number of the first case
    expected: str  # answer codes of the cases
    cases: list[bytes]  # each case's text, as the game formats it
    refused: str = ""  # why the program is a compile error before it is compiled (no source)
    lazy: bool = False  # stop at the first failing case: the later ones are not run
    entry: str = ""  # the source's file name ("": main and the language's first extension)

    def encode(self) -> bytes:
        """Compact JSON; bytes as latin-1 text (one character per byte)."""
        doc = {
            "refused": self.refused,
            "lazy": self.lazy,
            "entry": self.entry,
            "format": FORMAT,
            "kind": "judge",
            "problem": self.problem,
            "language": self.language,
            "toolchain": self.toolchain,
            "source": self.source.decode("latin-1"),
            "limits": list(self.limits),
            "file": self.file,
            "first": self.first,
            "expected": self.expected,
            "cases": [case.decode("latin-1") for case in self.cases],
        }
        return json.dumps(doc, separators=(",", ":")).encode()


class ProgramFiles(msgspec.Struct, frozen=True):
    """A program by content: its language, the toolchain the producer saw, its entry file and
    every file of it (a validator's header beside its source)."""

    language: str
    toolchain: str
    entry: str
    files: list[tuple[str, bytes]]


class RunTest(msgspec.Struct, frozen=True):
    """One test of a run chunk: its input, its answer, the validator's flags for it (and the
    output to judge, in mode "output")."""

    input: bytes
    answer: bytes = b""
    flags: list[str] = msgspec.field(default_factory=list)
    cases: int = 0  # a game's test: its cases, each judged by its own answer line
    output: bytes | None = None  # mode "output": a contestant's (None: there was no file)


class RunPayload(msgspec.Struct, frozen=True, kw_only=True):
    """A problem package's runs of one program on tests in order: run on each input and its
    output validated (mode "solve": by `validator`, or the default validator with the test's
    flags), or the program is an input validator run on each input (mode "input"), or no
    program: the tests' outputs are validated as they are (mode "output"); with `stop`, the
    tests after the first that fails are not run."""

    problem: str  # the package's name, for the job's lines
    file: int  # the chunk's place in its job
    mode: str
    program: ProgramFiles | None
    limits: tuple[float, int, int]  # CPU seconds, memory and output bytes of a run
    tests: list[RunTest]
    validator: ProgramFiles | None = None  # None: the default output validator
    checker: str = "kattis"  # the validator's calling convention, or "testlib"
    validation: tuple[float, int, int] = (60.0, 2 << 30, 8 << 20)  # the validator's limits
    stop: bool = False
    kind: str = "run"
    format: int = FORMAT

    def encode(self) -> bytes:
        """JSON (bytes as base64)."""
        return msgspec.json.encode(self)


Payload = ChunkPayload | SlicePayload | FilePayload | ComparePayload | JudgePayload | RunPayload


def decode_payload(data: bytes, *, inner: bool = False) -> Payload:
    """A solving or a comparison chunk, shape checked; raise BadPayload otherwise. A slice's
    data is a view of `data` (or of the bytes `packed` data decompress to), not a copy."""
    newline = data.find(b"\n", 0, _HEADER_MAX)  # JSON payloads have none: it is escaped
    try:
        doc = json.loads(data if newline < 0 else data[:newline])
        version = doc.get("format", 1)
        if version == FORMAT and doc.get("kind") == "zstd" and newline >= 0 and not inner:
            unpacked = _unpacked(memoryview(data)[newline + 1 :], int(doc["size"]))
            return decode_payload(unpacked, inner=True)
        if version == FORMAT and doc.get("kind") == "compare":
            return _compare_payload(doc)
        if version == FORMAT and doc.get("kind") == "judge":
            return _judge_payload(doc)
        if version == FORMAT and doc.get("kind") == "run":
            return msgspec.json.decode(data, type=RunPayload)
        if version == FORMAT and doc.get("kind") == "file":
            return _file_payload(doc)
        if version == FORMAT and doc.get("kind") == "slice" and newline >= 0:
            count = int(doc["count"])
            if count < 0:
                raise ValueError("a negative count of cases")
            view = memoryview(data)[newline + 1 :]
            return SlicePayload(str(doc["problem"]), int(doc["first"]), count, view)
        payload = ChunkPayload(str(doc["problem"]), int(doc["first"]), list(doc["cases"]))
    except BadPayload:  # of the compressed payload's contents
        raise
    except (ValueError, KeyError, TypeError, AttributeError, IndexError) as exc:
        raise BadPayload(f"malformed chunk payload: {exc}") from None
    if version != FORMAT:
        raise BadPayload(
            f"chunk payload of format {version} where this worker reads format {FORMAT}:"
            " run the same gamebatch version on every machine"
        )
    return payload


def _unpacked(packed: memoryview, size: int) -> bytes:
    """A packed payload's bytes, of the size its header names and never more."""
    parts, held = [], 0
    try:  # read in steps: a frame may claim any size, only `size` + 1 bytes are ever made
        with zstandard.ZstdDecompressor().stream_reader(packed) as reader:
            while held <= size and (part := reader.read(min(size + 1 - held, 1 << 24))):
                parts.append(part)
                held += len(part)
    except zstandard.ZstdError as exc:
        raise ValueError(f"compressed data that does not decompress ({exc})") from None
    data = b"".join(parts)
    if len(data) != size:
        raise ValueError(f"compressed data of {len(data)} bytes where its header says {size}")
    return data


def _file_payload(doc: dict[str, Any]) -> FilePayload:
    numbers = [int(doc[k]) for k in ("first", "count", "offset", "length")]
    path, digest = doc["path"], doc["digest"]
    if min(numbers) < 0 or not isinstance(path, str):
        raise ValueError("a file reference of another shape")
    if not isinstance(digest, str) or len(digest) != 64:
        raise ValueError("a file reference whose digest is not one")
    if not (os.path.isabs(path) or is_remote(path)):
        raise ValueError("a file reference whose path is not absolute (nor an object's URL)")
    version = doc.get("version", "")
    if not isinstance(version, str):
        raise ValueError("a file reference whose version is not a string")
    first, count, offset, length = numbers
    return FilePayload(str(doc["problem"]), first, count, path, offset, length, digest, version)


def _compare_payload(doc: dict[str, Any]) -> ComparePayload:
    segments = []
    for file, first, expected, text, *rest in doc["segments"]:
        if not isinstance(expected, str) or not isinstance(text, str):
            raise TypeError("a segment's answers and lines are strings")
        if not rest:  # a whole file, its bytes as latin-1 text
            segments.append(
                Segment(int(file), int(first), expected, [], data=text.encode("latin-1"))
            )
            continue
        (extra,) = rest
        lines = text.split("\n") if text else []
        shown = (str(extra[0]), int(extra[1])) if extra else None
        segments.append(Segment(int(file), int(first), expected, lines, shown))
    return ComparePayload(str(doc["problem"]), bool(doc["ignore_case"]), segments)


def _judge_payload(doc: dict[str, Any]) -> JudgePayload:
    cpu, memory, output = doc["limits"]
    texts = [doc[k] for k in ("language", "toolchain", "source", "expected")]
    if not all(isinstance(t, str) for t in (*texts, *doc["cases"])):
        raise TypeError("a judging chunk's texts are strings")
    if len(doc["cases"]) != len(doc["expected"]) or float(cpu) <= 0:
        raise ValueError("a judging chunk of another shape")
    return JudgePayload(
        str(doc["problem"]),
        texts[0],
        texts[1],
        texts[2].encode("latin-1"),
        (float(cpu), int(memory), int(output)),
        int(doc["file"]),
        int(doc["first"]),
        texts[3],
        [case.encode("latin-1") for case in doc["cases"]],
        str(doc.get("refused", "")),
        doc.get("lazy", False) is True,
        str(doc.get("entry", "")),
    )
