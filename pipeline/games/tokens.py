"""Whitespace-token reading of a binary stream, with line numbers and size limits."""

from __future__ import annotations

import re
from typing import Protocol

from pipeline.errors import InputError

_BLOCK = 1 << 20  # bytes read at once
_WHITESPACE = b" \t\n\r\x0b\x0c"  # what bytes.split() splits on
_TOKEN = re.compile(rb"[^ \t\n\r\x0b\x0c]+")
_DIGITS = frozenset(b"0123456789")
_MAX_DIGITS = 30  # longer integers are named too large without being parsed


class Readable(Protocol):
    """What the reader needs of a stream: a binary file, or a wrapper of one."""

    def read(self, size: int = -1, /) -> bytes: ...


class _Block:
    """The tokens of one block of input, and what is needed to find a token's line later."""

    __slots__ = ("first_line", "raw", "tokens")

    def __init__(self, raw: bytes, first_line: int) -> None:
        self.raw = raw
        self.first_line = first_line
        self.tokens = raw.split()

    def line_of(self, index: int) -> int:
        """Line of token `index` (only computed for error messages)."""
        for i, match in enumerate(_TOKEN.finditer(self.raw)):
            if i == index:
                return self.first_line + self.raw.count(b"\n", 0, match.start())
        return self.first_line + self.raw.count(b"\n")


Mark = tuple[_Block | None, int]  # where a token is, to name its line later


class TokenReader:
    """Whitespace-separated tokens, split in C a block at a time.

    Line numbers are worked out only when an error needs one. A token longer than
    `max_token` or a file longer than `max_bytes` is refused before it is held whole.
    """

    def __init__(
        self, stream: Readable, name: str, *, max_token: int = 1 << 26, max_bytes: int = 0
    ) -> None:
        self.name = name
        self.case = 0  # set by the case loop so that errors can name the case
        self._stream = stream
        self._max_token = max_token
        self._max_bytes = max_bytes
        self._read = 0
        self._next_line = 1  # line of the next block's first byte
        self._block: _Block | None = None
        self._pos = 0  # next token in the block
        self._carry: list[bytes] = []  # a token cut at the end of a block
        self._carry_len = 0
        self._eof = False
        self._newline_at_end = False
        self._segments: list[tuple[int, _Block, int]] = []  # of the last next_many()

    # --- tokens -----------------------------------------------------------------------------

    def next(self, what: str) -> bytes:
        """The next token; `what` names it in the error at end of file."""
        block = self._block
        if block is None or self._pos >= len(block.tokens):
            if not self._advance():
                raise self._end_error(what)
            block = self._block
            assert block is not None
        token = block.tokens[self._pos]
        self._pos += 1
        return token

    def next_many(self, count: int, what: str) -> list[bytes]:
        """The next `count` tokens (sliced in C where they lie in one block).

        `what` names a token in the error at end of file; `{}` stands for its 1-based number.
        """
        taken: list[bytes] = []
        self._segments = []
        while count > 0:
            block = self._block
            if block is None or self._pos >= len(block.tokens):
                if not self._advance():
                    raise self._end_error(what.format(len(taken) + 1))
                block = self._block
                assert block is not None
            part = block.tokens[self._pos : self._pos + count]
            self._segments.append((len(taken), block, self._pos))
            self._pos += len(part)
            count -= len(part)
            taken += part
        return taken

    def next_int(self, what: str, low: int, high: int) -> int:
        """The next token as an integer in [low, high]."""
        token = self.next(what)
        negative = token[:1] == b"-"
        digits = token[1:] if negative else token
        if not digits or not _DIGITS.issuperset(digits):
            raise self.error(f"{what} must be an integer, got {shorten(token)}")
        significant = digits.lstrip(b"0") or b"0"  # leading zeros are accepted
        if len(significant) > _MAX_DIGITS:  # out of any range: never parse a huge number
            if negative:
                raise self.error(f"{what} must be between {low} and {high}, got {shorten(token)}")
            raise self.error(f"{what} is too large: {shorten(token)} is above {high}")
        value = -int(significant) if negative else int(significant)
        if not low <= value <= high:
            raise self.error(f"{what} must be between {low} and {high}, got {value}")
        return value

    def available(self) -> int:
        """Tokens left in the current block (reading the next block when none are)."""
        if self.at_end():
            return 0
        assert self._block is not None
        return len(self._block.tokens) - self._pos

    def at_end(self) -> bool:
        """True when only whitespace remains."""
        block = self._block
        return (block is None or self._pos >= len(block.tokens)) and not self._advance()

    # --- positions and errors ---------------------------------------------------------------

    def mark(self) -> Mark:
        """The position of the next token."""
        self.at_end()
        return (self._block, self._pos)

    def line_at(self, mark: Mark, back: int = 0) -> int:
        """Line of the token at `mark` (or `back` tokens before it, within its block)."""
        block, pos = mark
        if block is None:
            return max(self._next_line - (1 if self._newline_at_end else 0), 1)
        return block.line_of(max(pos - back, 0))

    def line_in_many(self, index: int) -> int:
        """Line of token `index` of the last next_many() result."""
        start, block, pos = next(s for s in reversed(self._segments) if s[0] <= index)
        return block.line_of(pos + index - start)

    @property
    def line(self) -> int:
        """Line of the last token returned."""
        return self.line_at((self._block, self._pos), back=1)

    def error(
        self, reason: str, line: int | None = None, *, recoverable: bool = False
    ) -> InputError:
        """An InputError at the line of the last token (or the given line) and case.

        `recoverable`: the whole case was read, so reading can go on with the next one.
        """
        return InputError(
            reason,
            file=self.name,
            line=self.line if line is None else line,
            case=self.case,
            recoverable=recoverable,
        )

    def _end_error(self, what: str) -> InputError:
        line = max(self._next_line - (1 if self._newline_at_end else 0), 1)
        return self.error(f"unexpected end of file: expected {what}", line)

    # --- reading ----------------------------------------------------------------------------

    def _advance(self) -> bool:
        """Move to the next block that holds tokens; False at end of file."""
        while not self._eof:
            block = self._read_block()
            if block is not None and block.tokens:
                self._block, self._pos = block, 0
                return True
        return False

    def _read_block(self) -> _Block | None:
        data = self._stream.read(_BLOCK)
        self._read += len(data)
        if self._max_bytes and self._read > self._max_bytes:
            raise self.error(f"file is larger than the limit of {self._max_bytes} bytes", 0)
        if not data:
            self._eof = True
            return self._take_carry(b"")
        self._newline_at_end = data.endswith(b"\n")
        cut = max(data.rfind(c) for c in _WHITESPACE)
        if cut < 0:  # the whole block is inside one token
            self._add_carry(data)
            return None
        block = self._take_carry(data[: cut + 1])
        self._add_carry(data[cut + 1 :])
        if block is not None and self._max_token < _BLOCK:  # tokens a block can hold whole
            longest = max(block.tokens, key=len, default=b"")
            if len(longest) > self._max_token:
                raise self.error(
                    f"token longer than the limit of {self._max_token} bytes",
                    block.line_of(block.tokens.index(longest)),
                )
        return block

    def _take_carry(self, head: bytes) -> _Block | None:
        raw = b"".join([*self._carry, head]) if self._carry else head
        self._carry.clear()
        self._carry_len = 0
        if not raw:
            return None
        block = _Block(raw, self._next_line)
        self._next_line += head.count(b"\n")
        return block

    def _add_carry(self, part: bytes) -> None:
        if not part:
            return
        self._carry.append(part)
        self._carry_len += len(part)
        if self._carry_len > self._max_token:
            raise self.error(
                f"token longer than the limit of {self._max_token} bytes", self._next_line
            )


def shorten(token: bytes, limit: int = 20) -> str:
    """A token for an error message: printable, quoted, cut when long."""
    text = token[:limit].decode("ascii", "backslashreplace")
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    return repr(text + ("..." if len(token) > limit else ""))
