"""Malformed input: every error names the file, the line and the case, and says what is wrong."""

from __future__ import annotations

import io
import tracemalloc

import pytest

from pipeline.errors import InputError
from pipeline.games.reader import read_cases
from pipeline.games.registry import get_problem
from pipeline.games.tokens import TokenReader
from tests.helpers import parse

# (problem, input, line, case, words the message must contain)
CORPUS = [
    ("strgame", b"", 1, 0, "end of file: expected the number of cases"),
    ("strgame", b"   \n\n", 2, 0, "end of file"),
    ("strgame", b"x\n", 1, 0, "T must be an integer"),
    ("strgame", b"0\n", 1, 0, "T must be between 1"),
    ("strgame", b"-1\n1 1\na\n", 1, 0, "T must be between 1 and 1000000000000, got -1"),
    ("strgame", b"1\n1 -99999999999999999999999\na\n", 2, 1, "between 1 and 1000000000, got -9"),
    ("strgame", b"1\n1 -" + b"9" * 40 + b"\na\n", 2, 1, "between 1 and 1000000000, got '-99"),
    ("strgame", b"1\n1 +1\na\n", 2, 1, "must be an integer, got '+1'"),
    ("strgame", b"2\n1 1\na\n", 3, 2, "file ends after 1 of 2 cases"),
    ("strgame", b"1\n1 1\na\n1 1\nb\n", 4, 0, "unexpected data after the last of 1 cases"),
    ("strgame", b"1\n2 1\na\n", 3, 1, "end of file: expected string 2 of 2"),
    ("strgame", b"1\n0 1\n", 2, 1, "n (the number of strings) must be between 1"),
    ("strgame", b"1\n1 0\na\n", 2, 1, "K (the number of rounds) must be between 1 and"),
    ("strgame", b"1\n1 10000000000\na\n", 2, 1, "got 10000000000"),
    ("strgame", b"1\n1 ten\na\n", 2, 1, "K (the number of rounds) must be an integer"),
    ("strgame", b"1\n1 1.5\na\n", 2, 1, "must be an integer"),
    ("strgame", b"1\n1 1\nAbc\n", 3, 1, "'A' at position 1"),
    ("strgame", "1\n1 1\nab\u00e9\n".encode(), 3, 1, "position 3: only lowercase"),
    ("strgame", b"1\n1 1\na1\n", 3, 1, "'1' at position 2"),
    ("strgame", b"1\n2 1\na\n\n\n", 5, 1, "end of file: expected string 2 of 2"),
    ("strgame", b"\x00\xff\xfe garbage", 1, 0, "T must be an integer"),
    ("strgame", b"1\r\n1 1\r\nA\r\n", 3, 1, "lowercase"),
    ("strgame", b"99999999999999999999999\n", 1, 0, "T must be between 1 and 1000000000000, got 9"),
    ("strgame", b"9" * 4000 + b"\n", 1, 0, "T is too large: '99999999999999999999...' is above"),
    ("pathgame", b"1\n#.. .#.\n", 2, 1, "no left-to-right path"),
    ("pathgame", b"1\n#. #.\n", 2, 1, "column 1 is all black"),
    ("pathgame", b"1\n.# .#\n", 2, 1, "column 2 is all black"),
    ("pathgame", b"1\n#. .#\n", 2, 1, "columns 1 and 2 have black cells in different rows"),
    ("pathgame", b"1\n... ..\n", 2, 1, "different lengths (3 and 2)"),
    ("pathgame", b"1\n.x. ...\n", 2, 1, "row 1 has 'x' in column 2"),
    ("pathgame", b"1\n... .o.\n", 2, 1, "row 2 has 'o' in column 2"),
    ("pathgame", b"2\n... ...\n", 2, 2, "file ends after 1 of 2 cases"),
    ("pathgame", b"1\n...\n", 2, 1, "expected row 2 of the board"),
    ("pathgame", b"1\n... ... ...\n", 2, 0, "unexpected data after the last of 1 cases"),
    ("pathgame", b"2\n... ...\n\n\n.#. #..\n", 5, 2, "different rows"),
    # 64 boards or more are checked as one batch: a `|` (the batch's own separator) must be
    # caught in either row, at its case
    ("pathgame", b"70\n" + b". .\n" * 40 + b". |\n" + b". .\n" * 29, 42, 41, "row 2 has '|'"),
    ("pathgame", b"70\n" + b". .\n" * 40 + b"| .\n" + b". .\n" * 29, 42, 41, "row 1 has '|'"),
    ("pathgame", b"70\n" + b". .\n" * 40 + b".|. ...\n" + b". .\n" * 29, 42, 41, "row 1 has '|'"),
]


@pytest.mark.parametrize(("game", "data", "line", "case", "words"), CORPUS)
def test_bad_input_is_named_precisely(
    game: str, data: bytes, line: int, case: int, words: str
) -> None:
    with pytest.raises(InputError) as caught:
        parse(get_problem(game), data, name="bad.in")
    error = caught.value
    assert (error.file, error.line, error.case) == ("bad.in", line, case), str(error)
    assert words in error.reason
    text = str(error)
    assert text.startswith(f"bad.in:{line}") and "\n" not in text
    assert (f"case {case}" in text) == (case > 0)


def test_token_longer_than_the_limit_is_refused_before_it_is_read_whole() -> None:
    data = b"1\n1 1\n" + b"a" * (64 << 20) + b"\n"
    reader = TokenReader(io.BytesIO(data), "big.in", max_token=1 << 20)
    tracemalloc.start()
    try:
        with pytest.raises(InputError, match="token longer than the limit"):
            list(read_cases(get_problem("strgame"), reader))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # a block being read, the carried part of the token, and the join of both
    assert peak < 8 << 20, f"{peak} bytes held for a token of 64 MiB"


def test_leading_zeros_are_accepted() -> None:
    assert parse(get_problem("strgame"), b"0001\n01 003\nab\n") == [[3, "ab"]]


def test_file_size_limit() -> None:
    reader = TokenReader(io.BytesIO(b"1\n1 1\n" + b"a" * 100 + b"\n"), "f.in", max_bytes=50)
    with pytest.raises(InputError, match="larger than the limit of 50 bytes"):
        list(read_cases(get_problem("strgame"), reader))


def test_tokens_spanning_pieces_are_joined() -> None:
    word = "ab" * (3 << 19)  # 3 MiB, read in 1 MiB pieces
    cases = parse(get_problem("strgame"), f"1\n3 2\n{word} b\n  {word}a\n")
    assert cases == [[2, f"{word} b {word}a"]]


def test_a_short_token_limit_is_checked_inside_a_block() -> None:
    reader = TokenReader(io.BytesIO(b"1\n1 1\n" + b"a" * 5000 + b"\n"), "t.in", max_token=100)
    with pytest.raises(InputError, match="token longer than the limit of 100 bytes") as caught:
        list(read_cases(get_problem("strgame"), reader))
    assert caught.value.line == 3
