"""The producer's C path: an input read in large blocks by its game's C scanner, which checks
the cases and cuts the chunks (exactly where `chunking.chunk_cases` cuts them), each chunk
leaving as the slice of the input's bytes that holds its cases.

The scanner accepts only plainly valid input. For anything else it defers (`Deferred`) and
the producer reads the input again with the Python reader, which names the error's file, line
and case, or (keep-going) records it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import msgspec

from pipeline.games.problem import Scanner
from pipeline.games.reader import MAX_CASES
from pipeline.games.tokens import Readable

BLOCK = 8 << 20  # bytes read at once
CHUNK, MORE, UNSURE = 0, 1, 2  # what a scanner answers (pipeline/games/_scan.h)
_FIRST_TOKEN = re.compile(rb"[ \t\n\r\x0b\x0c]*([^ \t\n\r\x0b\x0c]+)")
_WHITESPACE = b" \t\n\r\x0b\x0c"
_HEADER_MAX = 1 << 16  # bytes before the end of T


class Deferred(Exception):
    """The scanner met what only the Python reader may judge."""


class SliceChunk(msgspec.Struct, frozen=True):
    """Consecutive cases as the bytes of the input that hold them."""

    index: int
    first: int  # 1-based number of the first case
    count: int
    data: memoryview
    offset: int  # where `data` starts in the input


class Limits(msgspec.Struct, frozen=True):
    """How chunks are cut, and what the reader refuses."""

    target_work: int
    max_cases: int
    max_token: int
    max_bytes: int  # 0: no limit


class _Blocks:
    """The bytes not yet handed out, refilled a block at a time."""

    def __init__(self, stream: Readable, max_bytes: int) -> None:
        self.stream, self.max_bytes = stream, max_bytes
        self.buf, self.final, self.read = b"", False, 0
        self.base = 0  # where buf starts in the input

    def more(self, keep_from: int) -> int:
        """Drop the bytes before `keep_from` and read a block (or learn that none is left);
        return how far the kept bytes moved."""
        block = self.stream.read(BLOCK)
        self.read += len(block)
        if self.max_bytes and self.read > self.max_bytes:
            raise Deferred  # the reader names the limit
        self.final = not block
        self.buf = self.buf[keep_from:] + block
        self.base += keep_from
        return keep_from


def slice_chunks(scan: Scanner, stream: Readable, limits: Limits) -> Iterator[SliceChunk]:
    """Every chunk of the input in order; raise Deferred for the Python reader."""
    blocks = _Blocks(stream, limits.max_bytes)
    blocks.more(0)
    count, pos = _header(blocks)
    index, first, start, cases, work = 0, 1, pos, 0, 0  # the chunk being scanned
    while count - first + 1 > 0:
        status, pos, cases, work = scan(
            blocks.buf,
            pos,
            count - first + 1,
            limits.target_work,
            limits.max_cases,
            limits.max_token,
            blocks.final,
            cases,
            work,
        )
        if status == CHUNK:
            yield SliceChunk(
                index, first, cases, memoryview(blocks.buf)[start:pos], blocks.base + start
            )
            index, first, start, cases, work = index + 1, first + cases, pos, 0, 0
        elif status == MORE:
            moved = blocks.more(start)
            start, pos = start - moved, pos - moved
        else:
            raise Deferred
    _only_whitespace(blocks, pos)


def _header(blocks: _Blocks) -> tuple[int, int]:
    """T and where the first case starts."""
    while True:
        found = _FIRST_TOKEN.match(blocks.buf)
        if found and (found.end() < len(blocks.buf) or blocks.final):
            break
        if blocks.final or len(blocks.buf) > _HEADER_MAX:
            raise Deferred  # no header, or one the Python reader should judge
        blocks.more(0)
    assert found is not None
    token = found.group(1)
    digits = token.lstrip(b"0") or b"0"
    if not token.isdigit() or len(digits) > 18 or not 1 <= int(digits) <= MAX_CASES:
        raise Deferred
    return int(digits), found.end()


def _only_whitespace(blocks: _Blocks, pos: int) -> None:
    """Nothing but whitespace after the last case (the stream is read to its end)."""
    rest = blocks.buf[pos:]
    while True:
        if rest.translate(None, _WHITESPACE):
            raise Deferred
        if blocks.final:
            return
        blocks.more(len(blocks.buf))
        rest = blocks.buf
