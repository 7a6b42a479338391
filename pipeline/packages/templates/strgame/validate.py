#!/usr/bin/env python3
"""strgame's input validator (exit 42: valid): T games, each `n K` and n strings of
lowercase letters, one a line, within the contest's limits."""

import re
import sys

MAX_T, MAX_LETTERS, MAX_K = 10, 10**5, 10**9
NUMBER = re.compile(r"0|[1-9][0-9]*")
WORD = re.compile(r"[a-z]+")


def fail(line: int, why: str) -> None:
    print(f"line {line}: {why}", file=sys.stderr)
    sys.exit(43)


lines = sys.stdin.buffer.read().decode("ascii", errors="replace").split("\n")
if lines[-1] != "":
    fail(len(lines), "the input does not end with a newline")
lines.pop()
at = 0


def number(text: str, low: int, high: int, what: str) -> int:
    if not NUMBER.fullmatch(text) or not low <= int(text) <= high:
        fail(at + 1, f"{what} must be an integer in [{low}, {high}], not {text[:20]!r}")
    return int(text)


if not lines:
    fail(1, "no T")
games = number(lines[0], 1, MAX_T, "T")
at = 1
for _ in range(games):
    if at >= len(lines):
        fail(at + 1, "a game is missing")
    head = lines[at].split(" ")
    if len(head) != 2:
        fail(at + 1, "a game starts with `n K`")
    n = number(head[0], 1, MAX_LETTERS, "n")
    number(head[1], 1, MAX_K, "K")
    at += 1
    letters = 0
    for _ in range(n):
        if at >= len(lines) or not WORD.fullmatch(lines[at]):
            fail(at + 1, "a string of lowercase letters is missing")
        letters += len(lines[at])
        at += 1
    if letters > MAX_LETTERS:
        fail(at, f"the strings of a game have {letters} letters, over {MAX_LETTERS}")
if at != len(lines):
    fail(at + 1, "more lines than the games hold")
sys.exit(42)
