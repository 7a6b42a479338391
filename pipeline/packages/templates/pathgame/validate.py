#!/usr/bin/env python3
"""pathgame's input validator (exit 42: valid): T boards, each a line of two rows of `.`
and `#` of equal width (1 to 1,000), with a white path from the left to the right."""

import re
import sys

MAX_T, MAX_WIDTH = 10**5, 1000
NUMBER = re.compile(r"[1-9][0-9]*")
ROW = re.compile(r"[.#]+")


def fail(line: int, why: str) -> None:
    print(f"line {line}: {why}", file=sys.stderr)
    sys.exit(43)


lines = sys.stdin.buffer.read().decode("ascii", errors="replace").split("\n")
if lines[-1] != "":
    fail(len(lines), "the input does not end with a newline")
lines.pop()
if not lines or not NUMBER.fullmatch(lines[0]) or int(lines[0]) > MAX_T:
    fail(1, f"T must be an integer in [1, {MAX_T}]")
if len(lines) != int(lines[0]) + 1:
    fail(len(lines), f"{len(lines) - 1} boards, not T = {lines[0]}")
for number, line in enumerate(lines[1:], 2):
    rows = line.split(" ")
    if len(rows) != 2 or not all(ROW.fullmatch(r) for r in rows) or len(rows[0]) != len(rows[1]):
        fail(number, "a board is two rows of '.' and '#' of the same width")
    top, bottom = rows
    if len(top) > MAX_WIDTH:
        fail(number, f"width {len(top)} is over {MAX_WIDTH}")
    for c in range(len(top)):
        if top[c] == bottom[c] == "#":
            fail(number, f"column {c + 1} is black in both rows: no path")
        if c and {top[c - 1] + bottom[c - 1], top[c] + bottom[c]} == {"#.", ".#"}:
            fail(number, f"columns {c} and {c + 1} block each other: no path")
sys.exit(42)
