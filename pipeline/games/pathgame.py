"""The pathgame plugin: paint cells of a 2xN board without cutting the last path (SRM 637)."""

from __future__ import annotations

import random
import re
from array import array
from collections.abc import Iterator
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from pipeline.games.grundy import BORDER, CROSS, OPEN, SAME, GrundyTables, compute_tables
from pipeline.games.problem import TableCache
from pipeline.games.tokens import TokenReader, shorten

TABLE_NAME = "pathgame:grundy"
TABLE_SIZE = 1024  # widths solved from the table; the closed form takes over beyond

# Column codes: 0 white, 1 black on top, 2 black below (3, both black, blocks every path).
_TOP = bytes.maketrans(b".#", b"\x00\x01")
_BOTTOM = bytes.maketrans(b".#", b"\x00\x02")
_RUNS = re.compile(rb"\x00+")

_tables: GrundyTables | None = None

try:
    from pipeline.games import _pathgame  # the C kernels, when they could be built at install time
except ImportError:  # pragma: no cover - depends on the machine
    _pathgame = None  # type: ignore[assignment]


def prepare(cache: TableCache | None) -> None:
    """Load the Grundy tables from the shared cache, or compute them and store them there."""
    global _tables  # noqa: PLW0603 - one table set per process, loaded before the pool forks
    if _tables is not None:
        return
    cached = cache.get(TABLE_NAME) if cache is not None else None
    tables = GrundyTables.from_bytes(cached) if cached else None
    if tables is None or tables.size < TABLE_SIZE:
        tables = packaged_tables() or GrundyTables(compute_tables(TABLE_SIZE))
        if cache is not None:
            cache.set(TABLE_NAME, tables.to_bytes())
    _tables = tables


PACKAGED = Path(__file__).with_name("pathgame_tables.json")  # compute_tables(TABLE_SIZE)


def packaged_tables() -> GrundyTables | None:
    """The tables shipped with the package (computing them takes 0.3 s), when readable."""
    try:
        found = GrundyTables.from_bytes(PACKAGED.read_bytes())
    except OSError:
        return None
    return found if found is not None and found.size == TABLE_SIZE else None


def tables() -> GrundyTables:
    """The process's tables, computed on first use when prepare() was not called."""
    if _tables is None:
        prepare(None)
    assert _tables is not None
    return _tables


def column_codes(top: bytes, bottom: bytes) -> bytes:
    """One code byte per column (the byte-wise sum of the two translated rows)."""
    width = len(top)
    total = int.from_bytes(top.translate(_TOP), "big") + int.from_bytes(
        bottom.translate(_BOTTOM), "big"
    )
    return total.to_bytes(width, "big")


def read_case(tokens: TokenReader) -> list[str]:
    """Two rows of equal length, only `.` and `#`, with a left-to-right white path."""
    rows = (tokens.next("row 1 of the board"), tokens.next("row 2 of the board"))
    reason = board_problem(*rows)
    if reason:
        raise tokens.error(reason, recoverable=True)
    return [row.decode("ascii") for row in rows]


_TOP_SEP = bytes.maketrans(b".#|", b"\x00\x01\x00")
_BOTTOM_SEP = bytes.maketrans(b".#|", b"\x00\x02\x00")


def read_batch(tokens: list[bytes]) -> list[Any]:
    """Many boards at once (two tokens each): a case, or what is wrong with it.

    The whole batch is checked with a few C-level scans of the joined rows (`|` between
    boards); only a batch with a bad board is checked board by board.
    """
    tops, bottoms = tokens[0::2], tokens[1::2]
    top, bottom = b"|".join(tops), b"|".join(bottoms)
    valid = (
        list(map(len, tops)) == list(map(len, bottoms))
        and top.count(b"|") == len(tops) - 1  # no `|` inside a row: it would split it
        and bottom.count(b"|") == len(bottoms) - 1
        and not top.translate(None, b".#|")
        and not bottom.translate(None, b".#|")
    )
    if valid:
        codes = (
            int.from_bytes(top.translate(_TOP_SEP), "big")
            + int.from_bytes(bottom.translate(_BOTTOM_SEP), "big")
        ).to_bytes(len(top), "big")
        valid = b"\x03" not in codes and b"\x01\x02" not in codes and b"\x02\x01" not in codes
    if valid:
        return list(zip(top.decode().split("|"), bottom.decode().split("|"), strict=True))
    return [
        board_problem(t, b) or [t.decode("ascii"), b.decode("ascii")]
        for t, b in zip(tops, bottoms, strict=True)
    ]


def board_problem(top: bytes, bottom: bytes) -> str | None:
    """What makes a board invalid, or None."""
    for number, row in enumerate((top, bottom), 1):
        if row.translate(None, b".#"):
            bad = next(i for i, byte in enumerate(row) if byte not in b".#")
            return (
                f"row {number} has {shorten(row[bad : bad + 1])} in column {bad + 1}:"
                " only '.' and '#' are allowed"
            )
    if len(top) != len(bottom):
        return f"rows have different lengths ({len(top)} and {len(bottom)})"
    codes = column_codes(top, bottom)
    blocked = codes.find(b"\x03")
    if blocked >= 0:
        return f"board has no left-to-right path: column {blocked + 1} is all black"
    cut = min((i for i in (codes.find(b"\x01\x02"), codes.find(b"\x02\x01")) if i >= 0), default=-1)
    if cut >= 0:
        return (
            f"board has no left-to-right path: columns {cut + 1} and {cut + 2}"
            " have black cells in different rows"
        )
    return None


def work(case: Any) -> int:
    """Columns: reading and scanning them is the solver's cost."""
    return len(case[0]) + 16


SMALL_BOARD = 24  # narrower boards are few: their answers are remembered


def solve(case: Any) -> int:
    """0 (Snuke, the first player wins) or 1 (Sothe)."""
    top, bottom = case
    if len(top) <= SMALL_BOARD:
        return _solve_small(top, bottom)
    return 0 if board_value(top.encode(), bottom.encode()) else 1


@lru_cache(maxsize=1 << 16)
def _solve_small(top: str, bottom: str) -> int:
    return 0 if board_value(top.encode(), bottom.encode()) else 1


def board_value(top: bytes, bottom: bytes) -> int:
    """Grundy value of a board: border runs from the tables, inner runs by parity.

    Every inner run has value (width + [its blacks are in different rows]) mod 2 (the
    closed form, checked against the tables in the tests), so their XOR is the parity of
    the inner white columns plus the row changes between consecutive black cells.
    """
    width = len(top)
    g = tables()
    firsts = [i for i in (top.find(b"#"), bottom.find(b"#")) if i >= 0]
    if not firsts:
        return g.value(OPEN, width)
    first = min(firsts)
    last = max(top.rfind(b"#"), bottom.rfind(b"#"))
    blacks = top.count(b"#") + bottom.count(b"#")
    inner_white = last - first + 1 - blacks
    rows = column_codes(top[first : last + 1], bottom[first : last + 1]).translate(None, b"\x00")
    changes = rows.count(b"\x01\x02") + rows.count(b"\x02\x01")
    return (
        g.value(BORDER, first) ^ g.value(BORDER, width - 1 - last) ^ ((inner_white + changes) & 1)
    )


def board_value_by_runs(top: bytes, bottom: bytes) -> int:
    """Grundy value as the XOR of every run's table value (the textbook decomposition)."""
    codes = column_codes(top, bottom)
    width, g, value = len(codes), tables(), 0
    for run in _RUNS.finditer(codes):
        start, end = run.span()
        if start == 0 and end == width:
            kind = OPEN
        elif start == 0 or end == width:
            kind = BORDER
        else:
            kind = SAME if codes[start - 1] == codes[end] else CROSS
        value ^= g.value(kind, end - start)
    return value


def has_path(top: str, bottom: str) -> bool:
    """Breadth-first search for a left-to-right path of white cells."""
    rows = (top, bottom)
    width = len(top)
    seen = {(r, 0) for r in (0, 1) if rows[r][0] == "."}
    frontier = list(seen)
    while frontier:
        r, c = frontier.pop()
        if c == width - 1:
            return True
        for nr, nc in ((1 - r, c), (r, c + 1), (r, c - 1)):
            if 0 <= nc < width and rows[nr][nc] == "." and (nr, nc) not in seen:
                seen.add((nr, nc))
                frontier.append((nr, nc))
    return False


@cache
def _mover_wins(top: str, bottom: str) -> bool:
    for r in (0, 1):
        for c in range(len(top)):
            if (top, bottom)[r][c] != ".":
                continue
            row = (top, bottom)[r]
            painted = row[:c] + "#" + row[c + 1 :]
            nxt = (painted, bottom) if r == 0 else (top, painted)
            if has_path(*nxt) and not _mover_wins(*nxt):
                return True
    return False


def exhaustive(case: Any) -> int:
    """Plain minimax over explicit boards (paint any cell that keeps a path); small only."""
    return 0 if _mover_wins(case[0], case[1]) else 1


def format_case(case: Any) -> str:
    """The two rows on one line."""
    return f"{case[0]} {case[1]}\n"


SHAPES = ("random", "white", "alternating", "sparse", "width1", "small")


def generate(rng: random.Random, shape: str, size: int) -> list[str]:
    """A valid board of about `size` columns."""
    width = 1 if shape == "width1" else rng.randint(1, 6) if shape == "small" else max(size, 1)
    density = {"white": 0.0, "sparse": 0.02, "alternating": 0.5}.get(shape, rng.random())
    top: list[str] = []
    bottom: list[str] = []
    previous = 0  # previous: 0 white, 1 top black, 2 bottom black
    for _ in range(width):
        code = 0
        if rng.random() < density:
            code = previous or rng.choice((1, 2))
            if shape == "alternating" and previous == 0:
                code = 1 + (len(top) // 2) % 2
        top.append("#" if code == 1 else ".")
        bottom.append("#" if code == 2 else ".")
        previous = code
    return ["".join(top), "".join(bottom)]


def shrink(case: Any) -> Iterator[list[str]]:
    """Drop a column, or paint a black cell white."""
    top, bottom = case
    for c in range(len(top)):
        if len(top) > 1:
            yield [top[:c] + top[c + 1 :], bottom[:c] + bottom[c + 1 :]]
    for c in range(len(top)):
        if top[c] == "#":
            yield [top[:c] + "." + top[c + 1 :], bottom]
        if bottom[c] == "#":
            yield [top, bottom[:c] + "." + bottom[c + 1 :]]


CONTEST_MAX_WIDTH = 1000


def contest_limits(case: Any) -> str | None:
    """TopCoder's limit: width at most 1000."""
    width = len(case[0])
    if width > CONTEST_MAX_WIDTH:
        return f"width {width} is above the contest limit of {CONTEST_MAX_WIDTH}"
    return None


def size_of(case: Any) -> int:
    """A board's size: its width."""
    return len(case[0])


def max_tests(rng: random.Random) -> list[list[str]]:
    """Boards 1,000 columns wide: all white, stripes, sparse, and random ones."""
    shapes = ("white", "alternating", "sparse", "random", "random", "random")
    return [generate(rng, shape, CONTEST_MAX_WIDTH) for shape in shapes]


def resize(case: Any, size: int) -> list[str]:
    """The board's first `size` columns."""
    width = max(size, 1)
    return [case[0][:width], case[1][:width]]


def mutate(rng: random.Random, case: Any, other: Any) -> list[str]:
    """One small change: a cell flipped, a column added (white, or another board's) or
    dropped, or another board's columns spliced in."""
    top, bottom = list(case[0]), list(case[1])
    at = rng.randrange(len(top) + 1)
    change = rng.randrange(4)
    if change == 0 and top:
        c, row = min(at, len(top) - 1), rng.choice((top, bottom))
        row[c] = "." if row[c] == "#" else "#"
    elif change == 1:
        c = rng.randrange(len(other[0]))
        top.insert(at, rng.choice((".", other[0][c])))
        bottom.insert(at, "." if top[at] == "#" else other[1][c])
    elif change == 2 and len(top) > 1:
        del top[min(at, len(top) - 1)], bottom[min(at, len(bottom) - 1)]
    else:
        first = rng.randrange(len(other[0]))
        end = min(len(other[0]), first + rng.randint(1, 16))
        top[at:at], bottom[at:at] = other[0][first:end], other[1][first:end]
    return ["".join(top), "".join(bottom)]


@lru_cache(maxsize=4)
def _int32_tables(g: GrundyTables) -> tuple[bytes, bytes]:
    """The OPEN and BORDER tables as int32 arrays, for the C kernel."""
    return array("i", g.tables[OPEN]).tobytes(), array("i", g.tables[BORDER]).tobytes()


def solve_slice(data: bytes | memoryview, count: int) -> bytes:
    """Answer codes of `count` boards given as input bytes (raise ValueError if malformed)."""
    return _pathgame.solve_slice(data, count, *_int32_tables(tables()))


class PathGame:
    """The plugin object registered under `gamebatch.problems`."""

    name = "pathgame"
    answers = ("Snuke", "Sothe")
    shapes = SHAPES
    read_case = staticmethod(read_case)
    work = staticmethod(work)
    solve = staticmethod(solve)
    exhaustive = staticmethod(exhaustive)
    format_case = staticmethod(format_case)
    generate = staticmethod(generate)
    prepare = staticmethod(prepare)
    tokens_per_case = 2  # lets the reader hand over many boards at once
    read_batch = staticmethod(read_batch)
    shrink = staticmethod(shrink)
    contest_limits = staticmethod(contest_limits)
    contest_max_cases = None
    # the hack search's max tests and shrinking by size (pipeline/games/problem.KnowsLimits)
    limit_size, size_unit = CONTEST_MAX_WIDTH, "columns"
    size_of = staticmethod(size_of)
    max_tests = staticmethod(max_tests)
    resize = staticmethod(resize)
    mutate = staticmethod(mutate)  # the hack search's mutations of the contest's cases
    # the C producer path and the worker's solve of input bytes (pipeline/data/slices.py)
    scan_chunk = staticmethod(_pathgame.scan_chunk) if _pathgame else None
    solve_slice = staticmethod(solve_slice) if _pathgame else None
    in_process = True  # small inputs may be solved in the command itself (it cannot crash it)


PROBLEM = PathGame()
