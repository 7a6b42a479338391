"""Grundy values of the fully white runs of a 2xN PathGame board: recurrence and closed form.

A run is a maximal block of fully white columns. Its kind depends on what bounds it:
  OPEN    nothing on either side (the whole board is white)
  BORDER  the board edge on one side, a black cell on the other
  CROSS   black cells on both sides, in different rows
  SAME    black cells on both sides, in the same row
Painting a cell splits a run into a left and a right run; a move that cuts every path is
not allowed. The recurrence below is the definition; `closed_form` is what it evaluates to
(proved by induction, and checked against the recurrence in the tests).
"""

from __future__ import annotations

import json

OPEN, BORDER, CROSS, SAME = 0, 1, 2, 3
KINDS = (OPEN, BORDER, CROSS, SAME)
TABLE_VERSION = 1


def _mex(values: set[int]) -> int:
    m = 0
    while m in values:
        m += 1
    return m


def compute_tables(size: int) -> list[list[int]]:
    """Grundy values of every kind for widths 0..size by the O(size^2) recurrence."""
    g = [[0] * (size + 1) for _ in KINDS]
    for x in range(size + 1):
        if x <= 1:  # one column: painting either cell of an OPEN/BORDER/SAME run leaves a
            g[OPEN][x] = g[BORDER][x] = g[SAME][x] = x  # lost position; CROSS has no move
            continue
        # Painting column c (0-based) leaves a run of width c on the left, x-c-1 on the right.
        g[OPEN][x] = _mex({g[BORDER][c] ^ g[BORDER][x - c - 1] for c in range(x)})
        border = set()
        for c in range(x):  # the edge is on the left; the black on the right
            right = x - c - 1
            border.add(g[BORDER][c] ^ g[SAME][right])  # paint the row of the black
            if right:  # the other row, unless that blocks the path beside the black
                border.add(g[BORDER][c] ^ g[CROSS][right])
        g[BORDER][x] = _mex(border)
        # CROSS: painting the row of the right black leaves CROSS on the left and SAME on
        # the right (the other row gives the mirror image); beside a black of the other
        # row the move would block the path.
        g[CROSS][x] = _mex({g[CROSS][c] ^ g[SAME][x - c - 1] for c in range(1, x)})
        same = set()
        for c in range(x):
            left, right = c, x - c - 1
            same.add(g[SAME][left] ^ g[SAME][right])  # paint the row of the blacks
            if left and right:
                same.add(g[CROSS][left] ^ g[CROSS][right])  # paint the other row
        g[SAME][x] = _mex(same)
    return g


def closed_form(kind: int, width: int) -> int:
    """The recurrence's value for any width, in O(1)."""
    if kind == BORDER:
        return width
    if kind == CROSS:
        return 0 if width == 0 else (width + 1) & 1
    return width & 1


class GrundyTables:
    """Tables computed (or loaded) once per process; the closed form beyond their end."""

    def __init__(self, tables: list[list[int]]) -> None:
        self.tables = tables
        self.size = len(tables[0]) - 1

    def value(self, kind: int, width: int) -> int:
        """Grundy value of a run."""
        if width <= self.size:
            return self.tables[kind][width]
        return closed_form(kind, width)

    def to_bytes(self) -> bytes:
        """Serialised form kept in the shared table cache."""
        return json.dumps({"version": TABLE_VERSION, "tables": self.tables}).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> GrundyTables | None:
        """Parse cached tables; None when they are of another version or malformed."""
        try:
            doc = json.loads(data)
            tables = doc["tables"]
            ok = doc["version"] == TABLE_VERSION and len(tables) == len(KINDS)
            ok = ok and all(isinstance(v, int) for row in tables for v in row)
            ok = ok and len({len(row) for row in tables}) == 1
        except (ValueError, KeyError, TypeError):
            return None
        return cls(tables) if ok else None
