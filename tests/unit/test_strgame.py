"""strgame: official examples, exhaustive search, the reference program and worst-case sizes."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

from pipeline.games import strgame
from pipeline.games.strgame import PROBLEM, common_prefix, first_player_outcomes, make_case, solve
from tests.conftest import run_reference
from tests.helpers import answers, input_text, random_cases

EXAMPLE = "2\n\n2 3\n\na\n\nb\n\n1 2\n\nab\n"


def test_official_examples() -> None:
    assert answers(PROBLEM, EXAMPLE) == "Pure\nDirty\n"
    assert answers(PROBLEM, "1\n3 1\na\nb\nc\n") == "Pure\n"


def test_crlf_and_blank_lines_read_like_plain_text() -> None:
    assert answers(PROBLEM, EXAMPLE.replace("\n", "\r\n")) == "Pure\nDirty\n"


KERNELS = {"python": strgame.outcomes_in_python}
if hasattr(strgame, "_trie"):
    KERNELS["c"] = strgame._outcomes_in_c  # the radix walk


@pytest.fixture(params=sorted(KERNELS))
def kernel(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run the test with each available kernel: the pure-Python one and the C one."""
    monkeypatch.setattr(strgame, "outcomes", KERNELS[request.param])
    return str(request.param)


@pytest.mark.parametrize("seed", range(4))
def test_agrees_with_exhaustive_search(seed: int, kernel: str) -> None:
    for case in random_cases(PROBLEM, "small", 1500, 5, seed):
        assert solve(case) == strgame.exhaustive(case), case


def test_the_c_kernel_is_built_where_a_compiler_is() -> None:
    import shutil

    if shutil.which("cc") or shutil.which("gcc"):
        assert "c" in KERNELS, "the C kernel was not built although a compiler is present"


@pytest.mark.skipif("c" not in KERNELS, reason="the C kernel is not built")
def test_the_c_kernel_refuses_other_bytes() -> None:
    for text in ("aB", "a\nb", "a z\x00", "\u00e9"):
        with pytest.raises(ValueError, match="lowercase"):
            strgame._trie.outcomes(text)


def _tricky_games(rng: random.Random) -> list[list[str]]:
    """Shapes that exercise the radix walk's shortcuts: shared prefixes skipped at once,
    duplicates, words that end inside others, a node whose visit stops early, deep combs."""

    def word(letters: str, most: int) -> str:
        return "".join(rng.choices(letters, k=rng.randint(1, most)))

    prefix = word("ab", 40)
    return [
        [prefix + word("ab", 3) for _ in range(rng.randint(2, 9))],
        [w for w in [word("abc", 6) for _ in range(20)] for _ in range(rng.randint(1, 3))],
        [prefix[:i] for i in range(1, len(prefix) + 1)] + [prefix + "z"],
        ["a" * i + "b" for i in range(rng.randint(1, 60))] + [word("ab", 8)],
        [word("a", 30) for _ in range(rng.randint(2, 6))],
        [word("abcdefghijklmnopqrstuvwxyz", 3) for _ in range(rng.randint(2, 400))],
    ]


@pytest.mark.parametrize("seed", range(3))
def test_kernels_agree_on_tricky_shapes(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(150):
        for words in _tricky_games(rng):
            text = " ".join(words)
            assert {name: k(text) for name, k in KERNELS.items()} == {
                name: first_player_outcomes(words) for name in KERNELS
            }, words


def test_kernels_agree_on_large_games() -> None:
    big = random_cases(PROBLEM, "random", 2, 1_100_000, seed=4)  # past the C trie's limit
    for shape in ("random", "wide", "singles", "chain", "long"):
        for case in random_cases(PROBLEM, shape, 5, 20000, seed=3) + big:
            assert {name: k(case[1]) for name, k in KERNELS.items()} == {
                name: strgame.outcomes_in_python(case[1]) for name in KERNELS
            }


def test_exhaustive_search_sees_both_outcomes() -> None:
    found = {strgame.exhaustive(c) for c in random_cases(PROBLEM, "small", 200, 5, 9)}
    assert found == {0, 1}


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        (["a"], (True, False)),  # one move, then the opponent is stuck
        (["ab"], (False, True)),
        (["a", "ab"], (False, True)),  # "a" is inside the trie, not a leaf
        (["ab", "ac", "b"], (True, True)),
    ],
)
def test_outcomes_of_small_tries(words: list[str], expected: tuple[bool, bool]) -> None:
    assert first_player_outcomes(words) == expected


def test_common_prefix() -> None:
    assert common_prefix("abcd", "abxd") == 2
    assert common_prefix("abc", "abcde") == 3
    assert common_prefix("x", "y") == 0
    assert common_prefix("", "a") == 0


def test_only_parity_of_k_matters() -> None:
    for words in (["a"], ["ab"], ["ab", "ac", "b"]):
        assert {solve(make_case(k, words)) for k in (1, 3, 10**9 - 1)} == {
            solve(make_case(1, words))
        }
        assert {solve(make_case(k, words)) for k in (2, 4, 10**9)} == {solve(make_case(2, words))}


def test_worst_case_sizes_need_no_recursion(kernel: str) -> None:
    limit = sys.getrecursionlimit()
    deep = "".join(random.Random(1).choices("ab", k=10**6))
    assert solve(make_case(1, [deep])) == 1  # even length: the second player makes the last move
    assert solve(make_case(1, [deep + "a"])) == 0
    assert solve(make_case(2, ["z"] * 10**5)) == 1  # Pure can only win a round: Dirty for even K
    chain = ["a" * i for i in range(1, 2000)]
    assert solve(make_case(1, chain)) == solve(make_case(1, [chain[-1]]))
    assert sys.getrecursionlimit() == limit


@pytest.mark.parametrize("shape", [s for s in strgame.SHAPES if s != "small"])
def test_agrees_with_reference_program(shape: str, reference: dict[str, Path], kernel: str) -> None:
    cases = random_cases(PROBLEM, shape, 10, 3000, seed=len(shape))
    text = input_text(PROBLEM, cases)
    assert answers(PROBLEM, text) == run_reference(reference["strgame"], text)


def test_agrees_with_reference_on_long_strings(reference: dict[str, Path]) -> None:
    rng = random.Random(5)
    cases = [make_case(rng.randint(1, 9), ["".join(rng.choices("ab", k=10**5))]) for _ in range(3)]
    words = ["".join(rng.choices("abc", k=rng.randint(1, 30))) for _ in range(3000)]
    cases.append(make_case(3, words))
    text = input_text(PROBLEM, cases)
    assert answers(PROBLEM, text) == run_reference(reference["strgame"], text)
