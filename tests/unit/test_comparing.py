"""Comparison chunks: cut by the producer, compared by the runner, gathered per file, and held
against the in-process reference (`grading.compare`, `Scoring.score`) on random contests."""

from __future__ import annotations

import io
import json
import random
from pathlib import Path

import pytest

from pipeline.data.messages import (
    BadPayload,
    ComparePayload,
    Segment,
    decode_payload,
    encode_answer,
)
from pipeline.data.producer import Queuer
from pipeline.games.registry import get_problem
from pipeline.grading import comparing, verdicts
from pipeline.grading.reports import diff_reports
from pipeline.grading.rules import CaseResult, Group, Scoring, Verdict, compare
from pipeline.progress import ProgressBar
from pipeline.store.memstore import MemoryStore
from tests.helpers import answers, input_text, random_cases
from workers.runner import Outcome, run_chunk

STRGAME = get_problem("strgame")
WORDS = STRGAME.answers


def random_output(rng: random.Random, expected: list[str]) -> str:
    """An output a careless contestant could write: right, wrong, sloppy, short or long."""
    lines = []
    for word in expected[: rng.randint(max(len(expected) - 3, 0), len(expected))]:
        roll = rng.random()
        if roll < 0.6:
            lines.append(word)
        elif roll < 0.7:
            lines.append(rng.choice(WORDS))
        elif roll < 0.75:
            lines.append(word.upper())
        elif roll < 0.8:
            lines.append(f"  {word} {rng.choice(WORDS)} ")
        elif roll < 0.85:
            lines.extend(["", " \t", word])  # blank lines do not count
        elif roll < 0.9:
            lines.append("x" * rng.choice((1, 250, 5000)))
        else:
            lines.append(f"{word}\r")
    if rng.random() < 0.2:
        lines += [rng.choice(WORDS) for _ in range(rng.randint(1, 3))]  # extra output
    return "\n".join(lines) + ("\n" if rng.random() < 0.5 else "")


def cut(line: str) -> str:
    """A line as the grader holds it: at most MAX_LINE bytes, then "..." (ASCII here)."""
    return line[: comparing.MAX_LINE] + "..." if len(line) > comparing.MAX_LINE else line


def distributed(
    store: MemoryStore, job_id: str, outputs: list[comparing.Output], ignore_case: bool
) -> list[verdicts.FileVerdicts]:
    """Produce the job, run every chunk through the runner, gather the files' verdicts."""
    queued: list[int] = []
    comparing.open_job(store, job_id, "strgame", len(outputs), 5)  # tiny chunks: many cuts
    chunks, cases = comparing.produce(
        Queuer(store, lambda job, index: queued.append(index), job_id),
        outputs,
        problem="strgame",
        ignore_case=ignore_case,
        on_cases=lambda n: None,
    )
    assert queued == list(range(chunks)) and chunks > len(outputs) // 5
    store.finish_production(job_id, chunks, cases)
    assert all(run_chunk(store, job_id, i) == Outcome.SOLVED for i in queued)
    assert run_chunk(store, job_id, 0) in (Outcome.DUPLICATE, Outcome.GONE)
    return list(comparing.gather(store, job_id, outputs))


@pytest.mark.parametrize("seed", range(6))
def test_distributed_verdicts_equal_the_in_process_ones(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    ignore_case = seed % 2 == 1
    outputs, wanted = [], []
    for n in range(25):
        expected = [rng.choice(WORDS) for _ in range(rng.randint(1, 12))]
        path = tmp_path / f"{n}.out"
        path.write_text(random_output(rng, expected))
        codes = "".join(encode_answer(WORDS.index(w)) for w in expected)
        outputs.append(comparing.Output(str(n), path, codes, comparing.digest_of(path)))
        lines = [cut(line) for line in path.read_text().split("\n")]
        reference = compare(expected, lines, ignore_case=ignore_case)
        wanted.append(reference)
    found = distributed(MemoryStore(), f"compare.strgame-{seed:024x}", outputs, ignore_case)
    for output, result, reference in zip(outputs, found, wanted, strict=True):
        cases = list(result.case_results(output.expected, WORDS))
        assert [c.verdict for c in cases] == [c.verdict for c in reference]
        mismatches = [c for c in reference if c.verdict != Verdict.AC][: verdicts.KEPT]
        assert result.first_mismatches(output.expected, WORDS) == mismatches
        assert result.wrong == len([c for c in reference if c.verdict != Verdict.AC])


@pytest.mark.parametrize("seed", range(4))
def test_a_whole_file_and_its_lines_get_the_same_verdicts(tmp_path: Path, seed: int) -> None:
    """Small files travel whole (the worker splits them), large ones line by line."""
    rng = random.Random(seed)
    expected = [rng.choice(WORDS) for _ in range(40)]
    path = tmp_path / "a.out"
    path.write_bytes(random_output(rng, expected).encode() + b"\xff\xfe caf\xc3\xa9\n")
    codes = "".join(encode_answer(WORDS.index(w)) for w in expected)
    output = comparing.Output("k", path, codes, comparing.digest_of(path))
    found = []
    for max_cases in (100, 7):  # whole; then cut into segments of at most 7 cases
        store = MemoryStore()
        job = f"compare.strgame-{max_cases:024x}"
        comparing.open_job(store, job, "strgame", 1, max_cases)
        chunks, cases = comparing.produce(
            Queuer(store, lambda j, i: None, job),
            [output],
            problem="strgame",
            ignore_case=False,
            on_cases=lambda n: None,
        )
        assert (chunks > 1) == (max_cases == 7)
        store.finish_production(job, chunks, cases)
        assert all(run_chunk(store, job, i) == Outcome.SOLVED for i in range(chunks))
        (result,) = comparing.gather(store, job, [output])
        found.append(result)
    assert found[0] == found[1]


def test_a_file_changed_while_it_was_read_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "a.out"
    path.write_text("Pure\n")
    output = comparing.Output("k", path, encode_answer(0), comparing.digest_of(path))
    path.write_text("Dirty\n")  # same size, other bytes: its verdicts would be stored wrongly
    store = MemoryStore()
    comparing.open_job(store, "compare.strgame-" + "0" * 24, "strgame", 1, 100)
    with pytest.raises(Exception, match="changed while it was read"):
        comparing.produce(
            Queuer(store, lambda j, i: None, "compare.strgame-" + "0" * 24),
            [output],
            problem="strgame",
            ignore_case=False,
            on_cases=lambda n: None,
        )


def test_lines_are_read_in_blocks_and_long_lines_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(comparing, "BLOCK", 7)
    data = b"Pure\n\n  Dirty  \r\n" + b"y" * 10_000 + b" tail\nlast"
    reader = comparing.LineReader(io.BytesIO(data))
    lines = [line for block in reader.blocks() for line in block]
    assert lines == ["Pure", "Dirty", "y" * comparing.MAX_LINE + "...", "last"]
    assert reader.hash.hexdigest() == __import__("hashlib").sha256(data).hexdigest()


def test_the_scoreboard_scores_letters_as_the_reference_scores_cases() -> None:
    rng = random.Random(3)
    scoring = Scoring(
        (
            Group("a", 10, ("t1",), ((1, 3),)),
            Group("b", 20, ("t*",)),
            Group("c", 5, ("t2",), ((4, 9),)),
        )
    )
    for _ in range(200):
        letters = {
            t: "".join(rng.choice("AAAW") for _ in range(rng.randint(1, 6))) for t in ("t1", "t2")
        }
        cases = {
            t: [CaseResult(i, verdicts.VERDICT_OF[c]) for i, c in enumerate(codes, 1)]
            for t, codes in letters.items()
        }
        for rules in (scoring, Scoring()):
            assert verdicts.score(rules, letters) == rules.score(cases)
            board = verdicts.Board(rules)
            for test, codes in letters.items():
                board.add("x", test, codes)
            (standing,) = board.standings()
            assert (standing.score, standing.max_score) == rules.score(cases)


def test_diff_reads_either_report_version() -> None:
    v1 = {
        "version": 1,
        "submissions": [
            {
                "path": "a/01.out",
                "cases": [{"index": 1, "verdict": "AC"}, {"index": 2, "verdict": "WA"}],
            }
        ],
    }
    v2 = {
        "version": 2,
        "submissions": [
            {"path": "a/01.out", "verdicts": "AA", "extra": {"first": "Pure", "more": 0}}
        ],
    }
    assert diff_reports(v1, v2) == ["a/01.out: case 2: WA -> AC", "a/01.out: case 3: - -> EXTRA"]


def test_comparison_payloads_round_trip_and_malformed_ones_fail_their_chunk() -> None:
    payload = ComparePayload(
        "strgame",
        True,
        [
            Segment(0, 1, "01", ["Pure", "x y"]),
            Segment(0, 3, "", [], ("Dirty", 2)),
        ],
    )
    assert decode_payload(payload.encode()) == payload
    good = json.loads(payload.encode())
    for segments in ([[0, 1, "01", "Pure", [1]]], [[0, 1, 5, "Pure", None]], [[0, 1]], 7):
        with pytest.raises(BadPayload):
            decode_payload(json.dumps({**good, "segments": segments}).encode())
    store, job = MemoryStore(), "compare.strgame-" + "1" * 24
    comparing.open_job(store, job, "strgame", 1, 100)
    bad = ComparePayload("strgame", False, [Segment(0, 1, "0z", ["Pure", "Pure"])])
    store.put_chunk(job, 0, bad.encode())
    assert run_chunk(store, job, 0) == Outcome.FAILED  # "z" is no answer code of strgame
    progress = store.progress(job)
    assert progress is not None and "not an answer code" in progress.failures[0]


def test_the_progress_line_counts_files_and_cases() -> None:
    out = io.StringIO()
    bar = ProgressBar("grade", stream=out)
    bar.add_total(3000)
    bar.set_files(2, 3)
    bar.job_done("compare.strgame-" + "2" * 24, 2000)
    assert bar.summary().startswith("grade: 2/3 files read, 2000/3000 cases, ")


def test_files_looked_up_in_batches_get_what_one_batch_gets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pipeline.app.grade import compare_here
    from pipeline.grading import answers as grading_answers
    from pipeline.grading import layout
    from pipeline.grading import run as grading_run
    from pipeline.grading.rules import Submission
    from pipeline.grading.verdict_store import MemoryVerdicts

    rng = random.Random(9)
    (tmp_path / "tests").mkdir()
    for t in ("t1", "t2"):
        text = input_text(STRGAME, random_cases(STRGAME, "random", 20, 10, seed=len(t)))
        (tmp_path / "tests" / f"{t}.in").write_text(text)
        words = answers(STRGAME, text).splitlines()
        (tmp_path / "tests" / f"{t}.ans").write_text("\n".join(words) + "\n")
        for c in range(7):
            folder = tmp_path / "subs" / f"c{c}"
            folder.mkdir(parents=True, exist_ok=True)
            if (c + len(t)) % 4:  # some files are missing
                (folder / f"{t}.out").write_text(random_output(rng, words))
    (tmp_path / "subs" / "c0" / "t2.out").unlink(missing_ok=True)
    (tmp_path / "subs" / "c0" / "t2.out").symlink_to(tmp_path / "tests" / "t1.ans")
    tests, subs, notes = layout.bulk_layout(tmp_path / "tests", tmp_path / "subs")
    assert len(subs) == 14 and notes == [
        "c0/t2.out is a symbolic link: not read, graded as missing"
    ]
    assert subs[1] == Submission("c0", "t2", None, "c0/t2.out") and subs[-1].contestant == "c6"

    def graded(batch: int) -> tuple[list[object], list[object]]:
        monkeypatch.setattr(grading_run, "LOOKUP_FILES", batch)
        found = grading_answers.expected(STRGAME, tests, lambda todo: [], keep_going=False)
        contest = grading_run.Contest(STRGAME, tests, subs, Scoring(), False)
        store = MemoryVerdicts()
        run = grading_run.grade_files(
            contest, found, store, lambda todo: compare_here(todo, contest)
        )
        return [(s.label, v.codes if v else None) for s, v in run.graded()], run.standings

    assert graded(3) == graded(1000)
    assert graded(3)[0][1] == ("c0/t2.out", "M" * 20)
