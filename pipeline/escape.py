"""Untrusted text (contestant names, their output) made safe for each medium it is shown in."""

from __future__ import annotations

import os
import re
from functools import cache

# XML 1.0 allows tab, newline, carriage return and these ranges, nothing else
_NOT_XML = "[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]"  # compiled when used
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")  # what spreadsheets read as a formula


def file_name(name: str) -> str:
    """A file name as text: bytes that are not UTF-8 (os.fsdecode's surrogates) become
    `\\xNN`, so that the name can be printed, written to any report and compared."""
    return os.fsencode(name).decode("utf-8", "backslashreplace")


def terminal(text: str) -> str:
    """Printable text: control characters (ANSI escapes, carriage returns, bidirectional
    overrides) are shown as escapes instead of acting on the terminal."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else _escape(c) for c in text)


def xml(text: str) -> str:
    """Text that XML 1.0 can hold (ElementTree escapes <, & and quotes itself)."""
    return _not_xml().sub(lambda m: _escape(m.group()), text)


def csv_cell(text: str) -> str:
    """A cell that a spreadsheet shows as text, never runs as a formula (and that `cat`
    shows without control characters acting on the terminal)."""
    text = terminal(text)
    return "'" + text if text.startswith(_FORMULA_START) else text


def shorten(text: str, limit: int = 200) -> str:
    """At most `limit` characters, saying how many were left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit} more characters)"


@cache
def _not_xml() -> re.Pattern[str]:
    return re.compile(_NOT_XML)  # 5 ms: only commands that write XML pay it


def _escape(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
