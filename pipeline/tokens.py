"""Whitespace-token reading of a binary stream, with line numbers and size limits."""

from __future__ import annotations

from typing import BinaryIO

from pipeline.errors import InputError

_PIECE = 1 << 20  # bytes read per call; a longer line arrives in several pieces
_DIGITS = frozenset(b"0123456789")


class TokenReader:
    """Yields whitespace-separated tokens; `line` is the line of the last token returned.

    Never holds more than one piece plus one token in memory, so a huge line or file is
    rejected by the limits before it is read whole.
    """

    def __init__(
        self, stream: BinaryIO, name: str, *, max_token: int = 1 << 26, max_bytes: int = 0
    ) -> None:
        self.name = name
        self.line = 0
        self.case = 0  # set by the case loop so that errors can name the case
        self._stream = stream
        self._max_token = max_token
        self._max_bytes = max_bytes
        self._read = 0
        self._next_line = 1  # line number of the next piece
        self._tokens: list[bytes] = []  # reversed: pop() gives the next token
        self._token_line = 0
        self._carry: list[bytes] = []  # parts of a token cut at a piece boundary
        self._carry_len = 0
        self._eof = False

    def error(
        self, reason: str, line: int | None = None, *, recoverable: bool = False
    ) -> InputError:
        """An InputError at the current (or given) line and case.

        `recoverable`: the whole case was read, so reading can go on with the next one.
        """
        return InputError(
            reason,
            file=self.name,
            line=self.line if line is None else line,
            case=self.case,
            recoverable=recoverable,
        )

    def next(self, what: str) -> bytes:
        """The next token; `what` names it in the error at end of file."""
        while not self._tokens:
            if self._eof or not self._fill():
                self.line = max(self._next_line - 1, 1)
                raise self.error(f"unexpected end of file: expected {what}")
        self.line = self._token_line
        return self._tokens.pop()

    def next_int(self, what: str, low: int, high: int) -> int:
        """The next token as an integer in [low, high]."""
        token = self.next(what)
        if len(token) > 19 or not token or not _DIGITS.issuperset(token):
            raise self.error(f"{what} must be an integer, got {shorten(token)}")
        value = int(token)
        if not low <= value <= high:
            raise self.error(f"{what} must be between {low} and {high}, got {value}")
        return value

    def at_end(self) -> bool:
        """True when only whitespace remains."""
        while not self._tokens:
            if self._eof or not self._fill():
                return True
        self.line = self._token_line
        return False

    def _fill(self) -> bool:
        """Read one piece into the token list; False at end of file."""
        piece = self._stream.readline(_PIECE)
        self._read += len(piece)
        if self._max_bytes and self._read > self._max_bytes:
            raise self.error(f"file is larger than the limit of {self._max_bytes} bytes", 0)
        line = self._next_line
        if not piece:
            self._eof = True
            if self._carry:
                self._push([self._take_carry()], line)
                return True
            return False
        ends_line = piece.endswith(b"\n")
        if ends_line:
            self._next_line += 1
        tokens = piece.split()
        continues = not ends_line and not piece[-1:].isspace()  # last token may go on
        if self._carry and tokens and not piece[:1].isspace():
            self._add_carry(tokens.pop(0), line)
            if not tokens and continues:
                return True  # the whole piece is the middle of one long token
            tokens.insert(0, self._take_carry())
        elif self._carry:
            tokens.insert(0, self._take_carry())
        if continues and tokens:
            self._add_carry(tokens.pop(), line)
        self._push(tokens, line)
        return True

    def _push(self, tokens: list[bytes], line: int) -> None:
        tokens.reverse()
        self._tokens = tokens
        self._token_line = line

    def _add_carry(self, part: bytes, line: int) -> None:
        self._carry.append(part)
        self._carry_len += len(part)
        if self._carry_len > self._max_token:
            raise self.error(f"token longer than the limit of {self._max_token} bytes", line)

    def _take_carry(self) -> bytes:
        token = b"".join(self._carry)
        self._carry.clear()
        self._carry_len = 0
        return token


def shorten(token: bytes, limit: int = 20) -> str:
    """A token for an error message: printable, quoted, cut when long."""
    text = token[:limit].decode("ascii", "backslashreplace")
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    return repr(text + ("..." if len(token) > limit else ""))
