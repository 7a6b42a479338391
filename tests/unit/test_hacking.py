"""The hack search's plan and report, without a cluster: rounds the same for a seed, answers
checked by exhaustive search, shrinking candidates, and what is written."""

from __future__ import annotations

import io
import itertools
import json
import random
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pipeline.errors import GamebatchError, UsageError
from pipeline.games.registry import get_problem
from pipeline.games.strgame import words_of
from pipeline.games.toolkit import SMALL, is_valid
from pipeline.grading import layout
from pipeline.grading.rules import Verdict
from pipeline.hacking import plan, report
from pipeline.hacking.hacks import Budget, Hack

STRGAME, PATHGAME = get_problem("strgame"), get_problem("pathgame")


def test_sizes_take_every_small_width_then_grow_to_the_largest() -> None:
    seen = list(itertools.islice(plan.sizes(40), 25))
    assert seen[: plan.DENSE] == list(range(1, plan.DENSE + 1))
    assert seen[plan.DENSE :] == [20, 25, 31, 39, 40, 40, 40, 40, 40]


@pytest.mark.parametrize("problem", [STRGAME, PATHGAME], ids=lambda p: p.name)
def test_rounds_are_the_same_for_a_seed_and_cover_every_shape(problem: Any) -> None:
    def first(seed: int) -> list[str]:
        found = itertools.islice(plan.rounds(problem, seed, 30), 20)
        return [problem.format_case(c) for r in found for c in r.cases]

    assert first(4) == first(4) != first(5)
    one = next(plan.rounds(problem, 1, 30))
    assert len(one.cases) == len(problem.shapes) * plan.MOST_PER_SHAPE
    assert all(is_valid(problem, case) for case in one.cases)
    shapes = [s for s in problem.shapes for _ in range(plan.MOST_PER_SHAPE)]
    assert one.checked == [s == SMALL for s in shapes]  # size 1: small ones are checked


def test_answers_of_small_cases_are_checked_by_exhaustive_search() -> None:
    case = STRGAME.generate(random.Random(1), SMALL, 4)
    assert plan.truth(STRGAME, case, True) == STRGAME.exhaustive(case)
    liar = SimpleNamespace(
        name="liar",
        solve=lambda case: 0,
        exhaustive=lambda case: 1,
        format_case=STRGAME.format_case,
    )
    assert plan.truth(liar, case, False) == 0  # type: ignore[arg-type]
    with pytest.raises(GamebatchError, match="liar's solver and exhaustive search disagree"):
        plan.truth(liar, case, True)  # type: ignore[arg-type]


def test_shrinking_candidates_are_valid_distinct_and_capped() -> None:
    case = STRGAME.read_case(_tokens("3 4\nab\nabc\nb\n"))
    found = plan.candidates(STRGAME, case, 50)
    texts = [STRGAME.format_case(c) for c in found]
    assert found and len(set(texts)) == len(texts) and case not in found
    assert all(is_valid(STRGAME, c) for c in found)
    assert plan.candidates(STRGAME, case, 2) == found[:2]


def test_the_first_failure_is_the_first_letter_not_accepted() -> None:
    assert plan.first_failure("AAAA") is None
    assert plan.first_failure("AAWAT") == 2
    assert plan.first_failure("") is None


def _tokens(text: str) -> Any:
    from pipeline.games.tokens import TokenReader

    return TokenReader(io.BytesIO(text.encode()), "<case>")


def _hacks() -> list[Hack]:
    wrong = STRGAME.read_case(_tokens("1 1\nab\n"))
    crash = STRGAME.read_case(_tokens("2 3\na\nb\n"))
    return [
        Hack("ann", 30, 1.5, Verdict.WA, wrong, "Dirty", "Pure", 1, False, 2),
        Hack("bob", 7, 2.0, Verdict.RE, crash, "Pure", "signal SIGSEGV", 2),
        Hack("cid", 500, 9.0),
        Hack("dan", skipped="does not compile"),
    ]


def test_the_files_hold_each_counterexample_and_all_of_them(tmp_path: Path) -> None:
    report.write_files(tmp_path, STRGAME, _hacks())
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "ann.ans", "ann.in", "bob.ans", "bob.in", "hacks.ans", "hacks.in",
    ]  # fmt: skip
    assert (tmp_path / "ann.in").read_text() == "1\n1 1\nab\n"
    assert (tmp_path / "hacks.in").read_text() == "2\n1 1\nab\n2 3\na\nb\n"
    assert (tmp_path / "hacks.ans").read_text() == "Dirty\nPure\n"
    nothing = tmp_path / "none"
    report.write_files(nothing, STRGAME, _hacks()[2:])
    assert list(nothing.iterdir()) == []


def test_the_summary_and_the_json_report(tmp_path: Path) -> None:
    out = io.StringIO()
    report.summary(out, STRGAME, _hacks())
    lines = out.getvalue().splitlines()
    assert lines == [
        "ann  HACKED WA: expected Dirty, found Pure, shrunk in 2 steps (30 cases, 1.5 s)",
        "bob  HACKED RE: signal SIGSEGV (expected Pure) (7 cases, 2.0 s)",
        "cid  not hacked (500 cases, 9.0 s)",
        "dan  not searched: does not compile",
        "2 of 4 programs hacked",
    ]
    doc = report.document(STRGAME, 7, Budget(60, 1000, 50), _hacks())
    report.write_json(tmp_path / "r.json", doc)
    read = json.loads((tmp_path / "r.json").read_text())
    assert (read["format"], read["version"], read["seed"], read["hacked"]) == (
        "gamebatch-hacks", 1, 7, 2,
    )  # fmt: skip
    ann = read["contestants"][0]
    assert ann["input"] == "1\n1 1\nab\n" and ann["found"] == "Pure" and ann["verdict"] == "WA"
    assert "input" not in read["contestants"][2] and read["contestants"][3]["skipped"]


def test_a_contestant_named_like_the_combined_test_is_refused() -> None:
    with pytest.raises(UsageError, match="named 'hacks'"):
        report.check_names(["ann", "hacks"])


def test_a_problem_packages_data_folder_is_read_as_tests(tmp_path: Path) -> None:
    files = ["data/sample/2.in", "data/sample/2.ans", "data/sample/10.in",
             "data/secret/g2/b.in", "data/secret/g1/a.in", "data/secret/g1/a.ans"]  # fmt: skip
    for rel in files:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("1\n1 1\na\n")
    named = [(t.name, t.answers is not None) for t in layout.tests_in(tmp_path)]
    assert named == [
        ("sample/10", False), ("sample/2", True), ("secret/g1/a", True), ("secret/g2/b", False),
    ]  # fmt: skip
    assert [t.name for t in layout.tests_in(tmp_path / "data")] == [n for n, _ in named]
    (tmp_path / "subs").mkdir()
    with pytest.raises(UsageError, match="is a problem package"):
        layout.bulk_layout(tmp_path, tmp_path / "subs")
    with pytest.raises(UsageError, match="nor in data/sample"):
        layout.tests_in(tmp_path / "subs")


def test_a_problem_package_sent_to_a_server_keeps_its_folders(tmp_path: Path) -> None:
    """Client mode packs a package's tests under their paths: two secret groups may both
    have a `1.in`, and the server reads the same tests by the same names."""
    import tarfile

    from pipeline.client.remote import _pack

    for rel in ("data/sample/1.in", "data/secret/a/1.in", "data/secret/b/1.in"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("1\n1 1\na\n")
    (tmp_path / "data/secret/a/1.ans").write_text("Pure\n")
    tests = layout.tests_in(tmp_path)
    with (tmp_path / "sent.tgz").open("w+b") as archive:
        with tarfile.open(fileobj=archive, mode="w:gz") as packing:
            _pack(packing, tests, [])
        archive.seek(0)
        with tarfile.open(fileobj=archive) as tar:
            names = sorted(tar.getnames())
            tar.extractall(tmp_path / "server", filter="data")
    assert names == [
        "tests/sample/1.in", "tests/secret/a/1.ans", "tests/secret/a/1.in", "tests/secret/b/1.in",
    ]  # fmt: skip
    unpacked = layout.tests_in(tmp_path / "server" / "tests")
    assert [(t.name, t.answers is not None) for t in unpacked] == [
        (t.name, t.answers is not None) for t in tests
    ]


@pytest.mark.parametrize("problem", [STRGAME, PATHGAME], ids=lambda p: p.name)
def test_max_tests_come_right_after_the_dense_sizes_at_the_contests_limits(problem: Any) -> None:
    limits = plan.limits_of(problem)
    assert limits is not None and plan.largest_size(problem, None) == limits.limit_size
    found = list(itertools.islice(plan.rounds(problem, 7, limits.limit_size), plan.DENSE + 2))
    assert [r.size for r in found[: plan.DENSE]] == list(range(1, plan.DENSE + 1))
    most = found[plan.DENSE]
    assert most.size == limits.limit_size and not any(most.checked)
    assert {limits.size_of(c) for c in most.cases} <= set(
        range(limits.limit_size * 99 // 100, limits.limit_size + 1)
    )
    assert all(is_valid(problem, c) and problem.contest_limits(c) is None for c in most.cases)
    assert found[plan.DENSE + 1].size == 20  # then the sizes grow on, to the limit
    assert max(itertools.islice(plan.sizes(limits.limit_size), 80)) == limits.limit_size
    # a --largest below the limits keeps today's rounds: no max tests
    small = list(itertools.islice(plan.rounds(problem, 7, 200), plan.DENSE + 1))
    assert small[plan.DENSE].size == 20


def test_strgame_max_tests_try_the_shapes_a_hacker_tries_first() -> None:
    cases = STRGAME.max_tests(random.Random(3))
    words = [c[1].split(" ") for c in cases]
    assert {c[0] for c in cases} <= {1, 10**9 - 1, 10**9} and {1, 10**9} <= {c[0] for c in cases}
    assert max(len(w[0]) for w in words) == 10**5  # the deepest trie: one string
    assert max(len(w) for w in words) == 10**5  # a hundred thousand one-letter strings
    board = PATHGAME.max_tests(random.Random(3))
    assert ["." * 1000, "." * 1000] in board  # all white


def test_a_game_without_limits_keeps_the_old_largest_size() -> None:
    plugin = SimpleNamespace(name="nim", shapes=("small",))
    assert plan.limits_of(plugin) is None  # type: ignore[arg-type]
    assert plan.largest_size(plugin, None) == plan.LARGEST == 200  # type: ignore[arg-type]
    assert plan.largest_size(STRGAME, 50) == 50


def test_bisection_halves_until_one_passes_then_closes_in() -> None:
    assert plan.bisection(100_000, 0, 5) == [50_000, 25_000, 12_500, 6_250, 3_125]
    assert plan.bisection(1_000, 500, 3) == [625, 750, 875]
    assert plan.bisection(257, 256, 3) == []  # adjacent: the threshold is found
    assert plan.bisection(1_000, 997, 3) == []  # within 1/CLOSE
    assert plan.bisection(1, 0, 3) == []


@pytest.mark.parametrize("problem", [STRGAME, PATHGAME], ids=lambda p: p.name)
def test_a_case_cut_to_a_size_is_a_valid_prefix_of_it(problem: Any) -> None:
    limits = plan.limits_of(problem)
    assert limits is not None
    case = limits.max_tests(random.Random(5))[-1]
    cut = plan.resized(problem, limits, case, [1, 7, 1000])
    assert [limits.size_of(c) for c in cut] == [1, 7, 1000]

    def letters(c: Any) -> list[str]:  # what a cut keeps the start of
        return ["".join(words_of(c))] if problem is STRGAME else list(c)

    for smaller in cut:
        assert is_valid(problem, smaller)
        assert all(b.startswith(a) for a, b in zip(letters(smaller), letters(case), strict=True))


def test_a_bisected_hack_says_where_it_starts_in_both_reports() -> None:
    hack = Hack("narrow", 400, 7.0, Verdict.RE, ["." * 257, "." * 257], "Snuke", "signal SIGSEGV")
    hack.fails_from, hack.passes_at = 257, 256
    out = io.StringIO()
    report.summary(out, PATHGAME, [hack])
    assert "fails from 257 columns (passes at 256)" in out.getvalue()
    doc = report.document(PATHGAME, 1, Budget(60, 1000, 1000), [hack])
    (entry,) = doc["contestants"]
    assert (entry["fails_from"], entry["passes_at"]) == (257, 256)
    (back,) = report.hacks_of(PATHGAME, json.loads(json.dumps(doc)))
    assert (back.fails_from, back.passes_at, back.case) == (257, 256, hack.case)
    hack.fails_from = hack.passes_at = 0  # not bisected: nothing said, null in the JSON
    out = io.StringIO()
    report.summary(out, PATHGAME, [hack])
    assert "fails from" not in out.getvalue()
    assert (
        report.document(PATHGAME, 1, Budget(60, 1000), [hack])["contestants"][0]["fails_from"]
        is None
    )


@pytest.mark.parametrize("problem", [STRGAME, PATHGAME], ids=lambda p: p.name)
def test_mutants_of_the_contests_cases_are_valid_distinct_and_the_same_for_a_seed(
    problem: Any,
) -> None:
    rng = random.Random(2)
    seeds = [problem.generate(rng, shape, 12) for shape in problem.shapes]
    found = plan.mutants(problem, seeds, random.Random(8), 40)
    assert found == plan.mutants(problem, seeds, random.Random(8), 40)
    texts = [problem.format_case(c) for c in found]
    assert len(found) == 40 and len(set(texts)) == 40
    assert all(is_valid(problem, c) and problem.contest_limits(c) is None for c in found)
    assert set(texts) - {problem.format_case(c) for c in seeds}  # something new


def test_mutation_rounds_come_between_the_later_rounds_only_with_seeds() -> None:
    seeds = [STRGAME.generate(random.Random(1), "random", 30)]
    with_seeds = list(itertools.islice(plan.rounds(STRGAME, 3, 200, seeds), plan.DENSE + 5))
    assert [r.size for r in with_seeds[: plan.DENSE]] == list(range(1, plan.DENSE + 1))
    assert [r.size for r in with_seeds[plan.DENSE :]] == [20, 0, 25, 0, 31]
    assert with_seeds[plan.DENSE + 1].label == "mutated from the tests"
    without = list(itertools.islice(plan.rounds(STRGAME, 3, 200), plan.DENSE + 2))
    assert [r.size for r in without[plan.DENSE :]] == [20, 25]


def test_strgame_mutations_drop_repeat_cut_merge_take_and_change_k() -> None:
    rng, case = random.Random(4), STRGAME.generate(random.Random(5), "random", 40)
    other = [7, "zz yy"]
    seen = {tuple(STRGAME.mutate(rng, case, other)[1].split()) for _ in range(300)}
    words = tuple(case[1].split())
    assert any(len(w) == len(words) - 1 for w in seen)  # dropped (or merged)
    assert any(len(w) == len(words) + 1 and set(w) == set(words) for w in seen)  # repeated
    assert any({"zz", "yy"} & set(w) for w in seen)  # taken from another case
    ks = {STRGAME.mutate(rng, case, other)[0] for _ in range(300)}
    assert {1, 10**9} <= ks


def test_rounds_at_the_largest_size_again_grow_to_their_cap() -> None:
    shapes = len(STRGAME.shapes)

    def at_largest(largest: int, count: int) -> list[int]:
        found = (len(r.cases) for r in plan.rounds(STRGAME, 1, largest) if r.size == largest)
        return list(itertools.islice(found, count))

    # doubling, to 8,192 letters a shape
    assert at_largest(200, 8) == [shapes * n for n in (2, 4, 8, 16, 32, 40, 40, 40)]
    assert at_largest(plan.largest_size(STRGAME, None), 7)[1:] == [
        shapes * n for n in (1, 2, 4, 8, 16, 16)
    ]  # the first one is the max tests
