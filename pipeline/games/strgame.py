"""The strgame plugin: K rounds of building a common prefix of n strings (CF 455B)."""

from __future__ import annotations

import itertools
import random
import string
from collections.abc import Iterator
from functools import cache
from typing import Any

from pipeline.errors import InputError
from pipeline.games.tokens import TokenReader, shorten

MAX_K = 10**9
MAX_STRINGS = 10**12
_LOWER = string.ascii_lowercase.encode()

_LOWER_SPACE = _LOWER + b" "

# A case is [K, strings joined by spaces]: one JSON string instead of n is far cheaper, and
# a space, unlike a newline, needs no escaping in JSON (3x faster to decode).


def make_case(k: int, words: list[str]) -> list[Any]:
    """The case of K rounds over `words`."""
    return [k, " ".join(words)]


def words_of(case: Any) -> list[str]:
    """The strings of a case."""
    return case[1].split(" ")  # type: ignore[no-any-return]


def read_case(tokens: TokenReader) -> list[Any]:
    """Read `n K` and n strings of lowercase letters."""
    n = tokens.next_int("n (the number of strings)", 1, MAX_STRINGS)
    problem: InputError | None = None  # reported once the whole case is read
    try:
        k = tokens.next_int("K (the number of rounds)", 1, MAX_K)
    except InputError as exc:
        problem, k = exc, 0
    words = tokens.next_many(n, f"string {{}} of {n}")
    joined = b" ".join(words)
    if problem is None and joined.translate(None, _LOWER_SPACE):
        i, word = next((i, w) for i, w in enumerate(words) if w.translate(None, _LOWER))
        bad = next(j for j, byte in enumerate(word) if byte not in _LOWER)
        problem = tokens.error(
            f"string {i + 1} of {n} has {shorten(word[bad : bad + 1])} at position {bad + 1}:"
            " only lowercase letters a-z are allowed",
            tokens.line_in_many(i),
        )
    if problem is not None:
        problem.recoverable = True
        raise problem
    return [k, joined.decode("ascii")]


def work(case: Any) -> int:
    """Letters plus strings: sorting and comparing them is the solver's cost."""
    return len(case[1]) + 1


def common_prefix(a: str, b: str) -> int:
    """Length of the longest common prefix, compared in C via big integers."""
    m = min(len(a), len(b))
    x = int.from_bytes(a[:m].encode(), "big") ^ int.from_bytes(b[:m].encode(), "big")
    return m - (x.bit_length() + 7) // 8


def first_player_outcomes(words: list[str]) -> tuple[bool, bool]:
    """(can force a win, can force a loss) for the first mover of one round.

    Works on the compressed trie given by the sorted leaves (strings that are not a
    prefix of another) and the common prefixes of neighbours, with an explicit stack.
    Along a chain of single-child nodes both outcomes flip at every step.
    """
    ordered = sorted(set(words))
    leaves = [w for w, nxt in itertools.pairwise(ordered) if not nxt.startswith(w)]
    leaves.append(ordered[-1])
    # Open branching nodes on the current path: depth, and whether some closed child
    # lets the mover win (child lost for the opponent) / lose (child won for the opponent).
    depths, wins, loses = [0], [False], [False]
    for i, leaf in enumerate(leaves):
        split = common_prefix(leaf, leaves[i + 1]) if i + 1 < len(leaves) else 0
        depth, win, lose = len(leaf), False, True  # at a leaf the mover cannot move
        while depths[-1] > split:
            flip = (depth - depths[-1] - 1) & 1  # value at the child of the open node
            wins[-1] |= win == bool(flip)
            loses[-1] |= lose == bool(flip)
            depth, win, lose = depths.pop(), wins.pop(), loses.pop()
        flip = (depth - split - 1) & 1
        if depths[-1] == split:
            wins[-1] |= win == bool(flip)
            loses[-1] |= lose == bool(flip)
        else:
            depths.append(split)
            wins.append(win == bool(flip))
            loses.append(lose == bool(flip))
    return wins[0], loses[0]


def outcomes_in_python(text: str) -> tuple[bool, bool]:
    """first_player_outcomes() of strings joined by spaces."""
    return first_player_outcomes(text.split(" "))


def _outcomes_in_c(text: str) -> tuple[bool, bool]:
    bits = _trie.outcomes(text)
    return bool(bits & 1), bool(bits & 2)


try:
    from pipeline.games import _trie  # the C kernel, when it could be built at install time
except ImportError:  # pragma: no cover - depends on the machine
    outcomes = outcomes_in_python
else:
    outcomes = _outcomes_in_c


def solve(case: Any) -> int:
    """0 (Pure) or 1 (Dirty)."""
    k = case[0]
    can_win, can_lose = outcomes(case[1])
    pure = can_win and (can_lose or k % 2 == 1)
    return 0 if pure else 1


def exhaustive(case: Any) -> int:
    """Plain minimax over (round, word so far) for the whole K-round game; small cases only."""
    k, words = case[0], words_of(case)
    prefixes = {w[:i] for w in words for i in range(len(w) + 1)}
    letters = sorted({c for w in words for c in w})

    @cache
    def mover_wins(round_no: int, word: str) -> bool:
        moves = [word + c for c in letters if word + c in prefixes]
        if not moves:  # the mover loses this round and starts the next one
            return False if round_no == k else mover_wins(round_no + 1, "")
        return any(not mover_wins(round_no, nxt) for nxt in moves)

    return 0 if mover_wins(1, "") else 1


def format_case(case: Any) -> str:
    """`n K` then one string per line."""
    return f"{case[1].count(' ') + 1} {case[0]}\n{case[1].replace(' ', chr(10))}\n"


SHAPES = ("random", "long", "singles", "wide", "chain", "extreme-k", "small")


def generate(rng: random.Random, shape: str, size: int) -> list[Any]:
    """A valid case whose total length is about `size` letters."""
    size = max(size, 1)
    k = rng.choice((1, MAX_K, MAX_K - 1)) if shape == "extreme-k" else rng.randint(1, 10)
    if shape == "long":  # one string; its parity decides, so both parities are drawn
        words = [_letters(rng, "ab", max(1, size - rng.randrange(2)))]
    elif shape == "singles":
        words = list(_letters(rng, string.ascii_lowercase, size))
    elif shape == "wide":
        words = _wide_words(size)
    elif shape == "chain":  # a, aa, ...: m(m + 1) / 2 letters at most `size`
        longest = max(1, int(((8 * size + 1) ** 0.5 - 1) / 2))
        words = ["a" * i for i in range(1, longest + 1)]
        rng.shuffle(words)
    elif shape == "small":
        k = rng.randint(1, 4)
        words = [
            "".join(rng.choices("abc"[: rng.randint(1, 3)], k=rng.randint(1, 4)))
            for _ in range(rng.randint(1, 4))
        ]
    else:  # few letters make shared prefixes, many make a flat trie: both are drawn
        text = _letters(rng, string.ascii_lowercase[: rng.choice((2, 5, 26))], size)
        words, at = [], 0
        for length in rng.randbytes(size):  # words of 1 to 12 letters
            if at >= size:
                break
            words.append(text[at : at + 1 + length % 12])
            at += 1 + length % 12
    return make_case(k, words)


def _letters(rng: random.Random, alphabet: str, count: int) -> str:
    """`count` letters drawn from `alphabet`, a byte of randomness each (a generator of 10^5
    letters a case: a draw per letter in Python cost the hack search most of its time)."""
    table = bytes(ord(alphabet[i % len(alphabet)]) for i in range(256))
    return rng.randbytes(count).translate(table).decode()


def _wide_words(size: int) -> list[str]:
    """Distinct words of one length, as many as fit in `size` letters: a trie that branches
    at every level (the shortest length that has enough words)."""
    length = 1
    while length * 26**length < size:
        length += 1
    count = max(1, size // length)
    return [
        "".join(w)
        for w in itertools.islice(itertools.product(string.ascii_lowercase, repeat=length), count)
    ]


def shrink(case: Any) -> Iterator[list[Any]]:
    """Drop a string, cut one or two letters off a string (parity matters), or lower K."""
    k, words = case[0], words_of(case)
    for i in range(len(words)):
        if len(words) > 1:
            yield make_case(k, words[:i] + words[i + 1 :])
    for i, word in enumerate(words):
        for shorter in (word[:1], word[:-1], word[1:], word[:-2], word[2:]):
            if shorter and shorter != word:
                yield make_case(k, [*words[:i], shorter, *words[i + 1 :]])
    for smaller in (1, 2, k - 2, k - 1):
        if 1 <= smaller < k:
            yield [smaller, case[1]]


CONTEST_MAX_T = 10
CONTEST_MAX_LETTERS = 10**5


def contest_limits(case: Any) -> str | None:
    """The seed's limits: n and the total length of the strings at most 10^5."""
    n = case[1].count(" ") + 1
    letters = len(case[1]) - (n - 1)
    if n > CONTEST_MAX_LETTERS:
        return f"n = {n} is above the contest limit of {CONTEST_MAX_LETTERS}"
    if letters > CONTEST_MAX_LETTERS:
        return f"total length {letters} is above the contest limit of {CONTEST_MAX_LETTERS}"
    return None


def size_of(case: Any) -> int:
    """A case's size: its letters."""
    text: str = case[1]
    return len(text) - text.count(" ")


def max_tests(rng: random.Random) -> list[list[Any]]:
    """Games of 10^5 letters: the deepest trie (one string) with K at 1, 10^9 - 1 and 10^9,
    the widest, a hundred thousand one-letter strings, a chain, random words."""
    most, ks = CONTEST_MAX_LETTERS, (1, MAX_K - 1, MAX_K)
    deepest = ["".join(rng.choices("ab", k=most))]
    cases = [make_case(k, deepest) for k in ks]
    cases.append(make_case(rng.choice(ks), ["a" * most]))
    for shape in ("wide", "singles", "chain", "random"):
        generated = generate(rng, shape, most)
        cases.append([rng.choice(ks), generated[1]])
    return cases


def resize(case: Any, size: int) -> list[Any]:
    """The case's first `size` letters: its strings in order, the last one cut."""
    kept, left = [], max(size, 1)
    for word in words_of(case):
        if left <= 0:
            break
        kept.append(word[:left])
        left -= len(kept[-1])
    return make_case(case[0], kept)


def mutate(rng: random.Random, case: Any, other: Any) -> list[Any]:
    """One small change: a string dropped, repeated, cut or merged with another, strings
    taken from another case, or another K."""
    k, words = case[0], words_of(case)
    i, j = rng.randrange(len(words)), rng.randrange(len(words))
    change = rng.randrange(6)
    if change == 0 and len(words) > 1:
        del words[i]
    elif change == 1:
        words.insert(j, words[i])
    elif change == 2 and len(words[i]) > 1:
        cut = rng.randrange(1, len(words[i]))
        words[i] = words[i][:cut] if rng.random() < 0.5 else words[i][cut:]
    elif change == 3 and i != j:
        words[i] += words.pop(j) if j > i else words[j]
    elif change == 4:
        theirs = words_of(other)
        words += rng.sample(theirs, rng.randint(1, min(len(theirs), 8)))
    else:
        k = rng.choice((1, 2, max(k - 1, 1), k + 1, MAX_K - 1, MAX_K, rng.randint(1, MAX_K)))
    return make_case(min(k, MAX_K), words)


class StrGame:
    """The plugin object registered under `gamebatch.problems`."""

    name = "strgame"
    answers = ("Pure", "Dirty")
    shapes = SHAPES
    read_case = staticmethod(read_case)
    work = staticmethod(work)
    solve = staticmethod(solve)
    exhaustive = staticmethod(exhaustive)
    format_case = staticmethod(format_case)
    generate = staticmethod(generate)
    shrink = staticmethod(shrink)
    contest_limits = staticmethod(contest_limits)
    contest_max_cases = CONTEST_MAX_T
    # the hack search's max tests and shrinking by size (pipeline/games/problem.KnowsLimits)
    limit_size, size_unit = CONTEST_MAX_LETTERS, "letters"
    size_of = staticmethod(size_of)
    max_tests = staticmethod(max_tests)
    resize = staticmethod(resize)
    mutate = staticmethod(mutate)  # the hack search's mutations of the contest's cases
    # the C producer path and the worker's solve of input bytes (pipeline/data/slices.py)
    scan_chunk = staticmethod(_trie.scan_chunk) if outcomes is _outcomes_in_c else None
    solve_slice = staticmethod(_trie.solve_slice) if outcomes is _outcomes_in_c else None
    in_process = True  # small inputs may be solved in the command itself (it cannot crash it)

    def prepare(self, cache: object) -> None:
        """Nothing to load."""


PROBLEM = StrGame()
