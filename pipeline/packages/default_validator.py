"""The problem package format's default output validator: an output compared with the answer
token by token, with its flags (case_sensitive, space_change_sensitive, and float tolerances
where the answer's token is a float); no I/O here."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

_TOKENS = re.compile(rb"\S+|\s+")
_FLOAT = re.compile(rb"^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$")
SHOWN = 60  # characters of a token quoted in a message


@dataclass(frozen=True)
class Flags:
    """The default validator's flags."""

    case_sensitive: bool = False
    space_change_sensitive: bool = False
    relative: float | None = None
    absolute: float | None = None

    @classmethod
    def parse(cls, flags: Sequence[str]) -> Flags:
        """From a flags list ("float_tolerance 1e-6"...); a ValueError names a bad one."""
        values: dict[str, float | None] = {"relative": None, "absolute": None}
        case = space = False
        words = list(flags)
        while words:
            word = words.pop(0)
            if word == "case_sensitive":
                case = True
            elif word == "space_change_sensitive":
                space = True
            elif word in (
                "float_tolerance",
                "float_relative_tolerance",
                "float_absolute_tolerance",
            ):
                if not words:
                    raise ValueError(f"{word} needs a number")
                amount = float(words.pop(0))
                if word != "float_absolute_tolerance":
                    values["relative"] = amount
                if word != "float_relative_tolerance":
                    values["absolute"] = amount
            else:
                raise ValueError(f"the default validator has no flag {word!r}")
        return cls(case, space, values["relative"], values["absolute"])


def validate(output: bytes, answer: bytes, flags: Flags) -> str | None:
    """None when `output` is accepted; else why not (a judge message)."""
    ours, theirs = _tokens(output, flags), _tokens(answer, flags)
    for number, (got, want) in enumerate(zip(ours, theirs, strict=False), 1):
        if not _same(got, want, flags):
            return f"token {number}: expected {_shown(want)}, found {_shown(got)}"
    if len(ours) > len(theirs):
        return f"more output than the answer: {_shown(ours[len(theirs)])} after the answer"
    if len(ours) < len(theirs):
        missing = _shown(theirs[len(ours)])
        return f"the output ended before the answer's token {len(ours) + 1} {missing}"
    return None


def _tokens(data: bytes, flags: Flags) -> list[bytes]:
    found = _TOKENS.findall(data)
    if not flags.space_change_sensitive:
        return [t for t in found if not t.isspace()]
    return found


def _same(got: bytes, want: bytes, flags: Flags) -> bool:
    if got == want or (not flags.case_sensitive and got.lower() == want.lower()):
        return True
    tolerant = flags.relative is not None or flags.absolute is not None
    if not tolerant or not _FLOAT.match(want) or not _FLOAT.match(got):
        return False
    expected, found = float(want), float(got)
    if not (math.isfinite(expected) and math.isfinite(found)):
        return False
    error = abs(found - expected)
    if flags.absolute is not None and error <= flags.absolute:
        return True
    return flags.relative is not None and error <= flags.relative * abs(expected)


def _shown(token: bytes) -> str:
    text = token.decode("utf-8", errors="replace")
    return repr(text if len(text) <= SHOWN else text[:SHOWN] + "...")
