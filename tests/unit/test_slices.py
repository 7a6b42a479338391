"""The producer's C path (pipeline/data/slices.py and the games' C kernels) held against the Python
reader, chunker and solvers: the same chunks, the same cases, the same answers, and every
invalid input left to the Python reader."""

from __future__ import annotations

import io
import json
import mmap
import os
import random
from pathlib import Path
from typing import Any

import pytest

from pipeline.config import load_settings
from pipeline.data import producer, slices
from pipeline.data.chunking import chunk_cases, place_cut
from pipeline.data.messages import BadPayload, FilePayload, SlicePayload, decode_payload
from pipeline.data.producer import Production, _first_reading, submit
from pipeline.errors import InputError
from pipeline.games.reader import read_batches, read_cases
from pipeline.games.registry import get_problem
from pipeline.games.tokens import TokenReader
from pipeline.store.memstore import MemoryStore
from tests.helpers import input_text, parse, random_cases
from tests.unit.test_input_errors import CORPUS
from workers.runner import Outcome, Policy, cases_of_slice, run_chunk

GAMES = ("strgame", "pathgame")
SHAPES = {
    "strgame": ("random", "small", "singles", "long", "wide", "chain", "extreme-k"),
    "pathgame": ("random", "small", "white", "alternating", "sparse", "width1"),
}


def _problem(game: str) -> Any:
    problem = get_problem(game)
    if getattr(problem, "scan_chunk", None) is None:
        pytest.skip(f"the C kernels of {game} were not built")
    problem.prepare(None)
    return problem


def _messy(text: str, rng: random.Random) -> bytes:
    """The same tokens with other whitespace between them (and leading zeros on numbers)."""
    out = []
    for token in text.split():
        zeros = "0" * rng.randint(1, 3) if token.isdigit() and rng.random() < 0.2 else ""
        out.append(zeros + token)
        out.append(rng.choice([" ", "\n", "\t", "\r\n", "  \x0b", "\x0c\n"]))
    return ("\n" * rng.randint(0, 2) + "".join(out)).encode()


def _python_chunks(problem: Any, data: bytes, target: int, most: int) -> list[tuple[int, list]]:
    batches = read_batches(problem, TokenReader(io.BytesIO(data), "in"))
    return [
        (chunk.first, chunk.cases) for chunk in chunk_cases(batches, problem.work, target, most)
    ]


def _c_chunks(problem: Any, data: bytes, target: int, most: int) -> list[slices.SliceChunk]:
    limits = slices.Limits(target, most, 1 << 26, 0)
    return list(slices.slice_chunks(problem.scan_chunk, io.BytesIO(data), limits))


@pytest.mark.parametrize("game", GAMES)
@pytest.mark.parametrize("block", [3, 64, 1 << 20])
def test_the_c_path_cuts_the_chunks_of_the_python_path(
    game: str, block: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    problem = _problem(game)
    monkeypatch.setattr(slices, "BLOCK", block)  # cases and tokens cut across blocks
    rng = random.Random(block)
    for seed in range(12):
        shape = rng.choice(SHAPES[game])
        cases = random_cases(problem, shape, rng.randint(1, 60), rng.choice((3, 40, 300)), seed)
        data = _messy(input_text(problem, cases), rng)
        target, most = rng.choice((1, 50, 500, 10**6)), rng.choice((1, 3, 1000))
        expected = _python_chunks(problem, data, target, most)
        found = _c_chunks(problem, data, target, most)
        assert [(c.index, c.first, c.count) for c in found] == [
            (i, first, len(chunk)) for i, (first, chunk) in enumerate(expected)
        ]
        for piece, (first, chunk) in zip(found, expected, strict=True):
            payload = SlicePayload(game, first, piece.count, piece.data)
            decoded = decode_payload(payload.encode())
            assert decoded == SlicePayload(game, first, piece.count, bytes(piece.data))
            assert isinstance(decoded, SlicePayload)
            assert cases_of_slice(problem, decoded) == chunk
            codes = problem.solve_slice(decoded.data, decoded.count)
            assert codes.decode() == "".join(str(problem.solve(case)) for case in chunk)


def _long_strgame_input(rng: random.Random) -> bytes:
    """strgame cases of many strings (the block scan's work), some of them longer than a
    block, with any whitespace, and now and then one byte that is not allowed."""
    spaces = [b" ", b"\n", b"\t", b"\r\n", b"\x0b", b"\x0c", b"  \n"]
    cases = []
    for _ in range(rng.randint(1, 4)):
        words = [
            bytes(rng.choices(b"abz", k=rng.choice((1, 2, 5, 63, 64, 65, 130))))
            for _ in range(rng.randint(1, 300))
        ]
        body = b"".join(word + rng.choice(spaces) for word in words)
        cases.append(b"%d %d\n" % (len(words), rng.randint(1, 9)) + body)
    data = bytearray(b"%d\n" % len(cases) + b"".join(cases))
    if rng.random() < 0.3:
        data[rng.randrange(3, len(data))] = rng.choice(b"A0#\x00\xff")
    return bytes(data)


def test_the_block_scan_reads_long_cases_like_the_python_reader() -> None:
    problem = _problem("strgame")
    rng = random.Random(29)
    for _ in range(300):
        data = _long_strgame_input(rng)
        max_token = rng.choice((64, 65, 100, 1 << 26))
        try:
            tokens = TokenReader(io.BytesIO(data), "in", max_token=max_token)
            expected = [found.case for found in read_cases(problem, tokens)]
        except InputError as exc:
            with pytest.raises(slices.Deferred):
                list(
                    slices.slice_chunks(
                        problem.scan_chunk,
                        io.BytesIO(data),
                        slices.Limits(10**9, 10**6, max_token, 0),
                    )
                )
            if "longer than the limit" not in str(exc):  # workers read slices without one
                head, body = data.split(b"\n", 1)
                with pytest.raises(ValueError, match="malformed"):
                    problem.solve_slice(body, int(head))
            continue
        start = data.index(b"\n")  # the work the scan counts is the reader's
        _, _, cases, work = problem.scan_chunk(
            data, start, len(expected), 1 << 60, 1 << 30, max_token, True, 0, 0
        )
        assert (cases, work) == (len(expected), sum(map(problem.work, expected)))
        target = rng.choice((50, 300, 3000))  # chunks cut by the strings' work
        found = list(
            slices.slice_chunks(
                problem.scan_chunk, io.BytesIO(data), slices.Limits(target, 10**6, max_token, 0)
            )
        )
        chunks = _python_chunks(problem, data, target, 10**6)
        assert [(c.first, c.count) for c in found] == [(f, len(c)) for f, c in chunks]
        codes = b"".join(problem.solve_slice(c.data, c.count) for c in found)
        assert codes.decode() == "".join(str(problem.solve(case)) for case in expected)


WIDE = (15, 16, 17, 31, 32, 33, 48, 100, 257)
SPACES = (b" ", b"\n", b"\t", b"\r\n", b"  ", b"\x0b", b"\x0c", b"\n\n")


def _wide_boards(rng: random.Random, widths: tuple[int, ...] = WIDE, most: int = 5) -> bytes:
    """pathgame boards read 16 columns at a time, and now and then one defect in one: a bad
    byte, a column black in both rows, two blacks of different rows side by side (across a
    block of 16 too), or rows of different lengths."""
    boards = []
    for _ in range(rng.randint(1, most)):
        shape = rng.choice(("random", "white", "alternating", "sparse"))
        top, bottom = (
            bytearray(row.encode()) for row in PATHGAME.generate(rng, shape, rng.choice(widths))
        )
        if len(top) < 2:
            boards.append(bytes(top) + rng.choice(SPACES) + bytes(bottom) + b"\n")
            continue
        j = rng.randrange(len(top) - 1)
        defect = rng.randrange(8 * max(1, most // 5))  # one in 8 wide boards
        if defect == 0:
            rng.choice((top, bottom))[j] = rng.choice(b"x0-\x00")
        elif defect == 1:
            top[j] = bottom[j] = ord("#")
        elif defect == 2:
            top[j], bottom[j + 1] = ord("#"), ord("#")
        elif defect == 3:
            bottom[j], top[j + 1] = ord("#"), ord("#")
        elif defect == 4:
            top.append(ord("."))
        boards.append(bytes(top) + rng.choice(SPACES) + bytes(bottom) + rng.choice(SPACES))
    return b"%d\n" % len(boards) + b"".join(boards)


PATHGAME = get_problem("pathgame")


@pytest.mark.parametrize(("widths", "most"), [(WIDE, 5), (tuple(range(1, 19)), 40)])
def test_the_block_scan_reads_boards_like_the_python_reader(
    widths: tuple[int, ...], most: int
) -> None:
    """Wide boards, and runs of tiny ones (found and checked by bit masks 64 bytes at a
    time), with a defect now and then, between all kinds of whitespace."""
    problem = _problem("pathgame")
    rng = random.Random(31)
    defects = 0
    for _ in range(400):
        data = _wide_boards(rng, widths, most)
        head, body = data.split(b"\n", 1)
        try:
            expected = [f.case for f in read_cases(problem, TokenReader(io.BytesIO(data), "in"))]
        except InputError:
            with pytest.raises(slices.Deferred):
                _c_chunks(problem, data, 10**9, 10**6)
            with pytest.raises(ValueError, match="malformed"):
                problem.solve_slice(body, int(head))
            defects += 1
            continue
        (piece,) = _c_chunks(problem, data, 10**9, 10**6)
        assert piece.count == len(expected)
        codes = problem.solve_slice(piece.data, piece.count)
        assert codes.decode() == "".join(str(problem.solve(case)) for case in expected)
    assert 50 < defects < 350  # both kinds of input were seen


@pytest.mark.parametrize("game", GAMES)
def test_the_c_solvers_agree_with_the_exhaustive_ones(game: str) -> None:
    problem = _problem(game)
    rng = random.Random(17)
    cases = [problem.generate(rng, "small", rng.randint(1, 6)) for _ in range(600)]
    data = input_text(problem, cases).encode().split(b"\n", 1)[1]
    codes = problem.solve_slice(data, len(cases))
    assert codes.decode() == "".join(str(problem.exhaustive(case)) for case in cases)


def test_wide_boards_use_the_closed_form_past_the_tables() -> None:
    problem = _problem("pathgame")
    rng = random.Random(5)
    cases = [
        problem.generate(rng, rng.choice(SHAPES["pathgame"][:5]), width)
        for width in (1023, 1024, 1025, 1026, 5000, 70000)
        for _ in range(6)
    ]
    data = input_text(problem, cases).encode().split(b"\n", 1)[1]
    assert problem.solve_slice(data, len(cases)).decode() == "".join(
        str(problem.solve(case)) for case in cases
    )


@pytest.mark.parametrize(("game", "data"), [(game, data) for game, data, *_ in CORPUS])
def test_every_invalid_input_is_left_to_the_python_reader(game: str, data: bytes) -> None:
    problem = _problem(game)
    with pytest.raises(slices.Deferred):
        _c_chunks(problem, data, 100, 10)


@pytest.mark.parametrize(
    ("game", "data", "limits"),
    [
        ("strgame", b"1\n1 1\n" + b"a" * 200 + b"\n", slices.Limits(10, 10, 100, 0)),  # token
        ("strgame", b"1\n1 1\n" + b"a" * 200 + b"\n", slices.Limits(10, 10, 1000, 50)),  # file
        ("strgame", b"1\n1 +1\na\n", slices.Limits(10, 10, 100, 0)),
        ("strgame", b"1\n1 1000000001\na\n", slices.Limits(10, 10, 100, 0)),
        ("strgame", b"1\n1000000000001 1\na\n", slices.Limits(10, 10, 100, 0)),
        ("pathgame", b"1\n" + b"." * 200 + b" " + b"." * 200, slices.Limits(10, 10, 100, 0)),
    ],
)
def test_limits_and_unusual_numbers_are_left_to_the_python_reader(
    game: str, data: bytes, limits: slices.Limits
) -> None:
    problem = _problem(game)
    with pytest.raises(slices.Deferred):
        list(slices.slice_chunks(problem.scan_chunk, io.BytesIO(data), limits))


@pytest.mark.parametrize("game", GAMES)
def test_a_malformed_slice_fails_its_chunk_with_one_reason(game: str) -> None:
    problem = _problem(game)
    good = b"1 1\na\n" if game == "strgame" else b"... ...\n"
    for data, count in [
        (good, 2),
        (good + good, 1),
        (b"x y\n", 1),
        (b"", 1),
        (b"5 1\nab\n", 1),
        (b"...\n", 1),
        (b"#. .#\n", 1),
    ]:
        with pytest.raises(ValueError, match="chunk"):
            problem.solve_slice(data, count)
        store = MemoryStore()
        job = f"{game}-" + "b" * 24
        store.open_job(job, {"problem": game})
        store.put_chunk(job, 0, SlicePayload(game, 1, count, data).encode())
        store.finish_production(job, 1, count)
        assert run_chunk(store, job, 0, Policy(holder="t")) == Outcome.FAILED
        progress = store.progress(job)
        assert progress is not None
        assert [reason for reason in progress.failures] != [], data


@pytest.mark.parametrize("game", GAMES)
def test_a_retried_slice_is_solved_case_by_case_with_the_same_answers(game: str) -> None:
    problem = _problem(game)
    cases = random_cases(problem, "random", 30, 40, seed=3)
    data = input_text(problem, cases).encode().split(b"\n", 1)[1]
    store = MemoryStore()
    job = f"{game}-" + "c" * 24
    store.open_job(job, {"problem": game})
    store.put_chunk(job, 0, SlicePayload(game, 1, len(cases), data).encode())
    store.finish_production(job, 1, len(cases))
    store.begin_chunk(job, 0, "dead", 30)  # a first run died: the next one is careful
    assert run_chunk(store, job, 0, Policy(holder="t")) == Outcome.SOLVED
    assert list(store.iter_answers(job, 1)) == ["".join(str(problem.solve(c)) for c in cases)]


@pytest.mark.parametrize("game", GAMES)
def test_submit_queues_slices_and_names_errors_like_the_python_reader(
    game: str, tmp_path: Path
) -> None:
    problem = _problem(game)
    settings = load_settings(chunk={"target_work": 300})
    cases = random_cases(problem, "random", 40, 30, seed=9)
    path = tmp_path / "in.txt"
    path.write_text(input_text(problem, cases))
    store, sent = MemoryStore(), []
    done = submit(problem, path, store, lambda job, i: sent.append(i), settings)
    payloads = [decode_payload(store.chunk_payload(done.job_id, i) or b"") for i in sent]
    assert payloads and all(isinstance(p, SlicePayload) for p in payloads)
    cut = _python_chunks(problem, path.read_bytes(), 300, settings.chunk.max_cases)
    assert (done.total, done.chunks) == (40, len(cut))
    bad = path.read_bytes().rstrip() + b" extra\n"  # an error after every case was queued
    path.write_bytes(bad)
    with pytest.raises(InputError) as caught:
        submit(problem, path, MemoryStore(), lambda job, i: None, settings)
    with pytest.raises(InputError) as python:
        parse(problem, bad, name=str(path))
    assert str(caught.value) == str(python.value)


def _input(tmp_path: Path, problem: Any, count: int) -> Path:
    path = tmp_path / "in.txt"
    path.write_text(input_text(problem, random_cases(problem, "random", count, 30, seed=11)))
    return path


def _submitted_by_reference(problem: Any, path: Path) -> tuple[MemoryStore, str, list[int]]:
    """The input queued as file references (cut as chunks of bytes would be): the store,
    the job and the chunks sent."""
    settings = load_settings(chunk={"target_work": 300, "place_scale": 1}, file_payloads=True)
    store, sent = MemoryStore(), []
    done = submit(problem, path, store, lambda job, i: sent.append(i), settings)
    return store, done.job_id, sent


@pytest.mark.parametrize("game", ["strgame", "pathgame"])
def test_a_file_whose_workers_read_it_is_read_once(
    tmp_path: Path, game: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hashed and cut in one reading, its chunks queued as places in it; a job whose chunks
    were cut otherwise (other chunk settings) is read again with its own."""
    problem = _problem(game)
    path = _input(tmp_path, problem, 60)
    real_read_all = producer._read_all
    readings: list[str] = []
    monkeypatch.setattr(
        producer, "_read_all", lambda *a: readings.append("again") or real_read_all(*a)
    )
    store, job, sent = _submitted_by_reference(problem, path)
    assert readings == [] and len(sent) > 2
    reader = Policy(holder="t", file_payloads=True)
    assert {run_chunk(store, job, i, reader) for i in sent} == {Outcome.SOLVED}
    expected = "".join(str(problem.solve(case)) for case in parse(problem, path.read_bytes()))
    assert "".join(store.iter_answers(job, len(sent))) == expected
    other = load_settings(chunk={"target_work": 900}, file_payloads=True)
    fresh = MemoryStore()
    fresh.open_job(job, {"problem": game, "target_work": 300, "max_cases": 200_000})
    again = submit(problem, path, fresh, lambda j, i: None, other)
    assert readings == ["again"] and again.chunks == len(sent)  # the job's own cut


def test_places_grow_with_the_input_up_to_their_scale() -> None:
    assert place_cut(300, 10, 64 * 300 - 1, 10, 64) == (300, 10)  # too few chunks to grow
    assert place_cut(300, 10, 3 * 64 * 300, 10, 64) == (900, 30)
    assert place_cut(300, 10, 10**12, 10, 64) == (3000, 100)  # never past the scale
    assert place_cut(300, 10, 10**12, 1, 64) == (300, 10)


def test_ranges_of_an_object_are_larger_and_places_in_a_file_stay_small(tmp_path: Path) -> None:
    """Fewer, larger chunks where each costs a request (ranges of an object); a file's
    places keep the byte chunks' cut (an open and a map are cheap, and small chunks keep
    the workers' memory and the pipeline's tail small); the job's manifest holds the cut
    (a second producer cuts the same); chunks that carry bytes keep the settings' cut."""
    problem = _problem("strgame")
    path = _input(tmp_path, problem, 300)
    _, _, small = _submitted_by_reference(problem, path)
    grow = {"target_work": 300, "place_spread": 2, "place_scale": 3}
    settings = load_settings(chunk=grow, file_payloads=True)
    ranged, _ = _first_reading(problem, path, settings, None, False, store=MemoryStore(), copy=True)
    assert ranged is not None and ranged.pieces is not None
    assert ranged.cut[0] == 900 and 1 < len(ranged.pieces) < len(small) / 2
    store, sent = MemoryStore(), []
    job = submit(problem, path, store, lambda j, i: sent.append(i), settings).job_id
    assert len(sent) == len(small) and (store.manifest(job) or {})["target_work"] == "300"
    reader = Policy(holder="t", file_payloads=True)
    assert {run_chunk(store, job, i, reader) for i in sent} == {Outcome.SOLVED}
    expected = "".join(str(problem.solve(case)) for case in parse(problem, path.read_bytes()))
    assert "".join(store.iter_answers(job, len(sent))) == expected
    carried = MemoryStore()
    settings = load_settings(chunk=grow, file_payloads=False)
    job = submit(problem, path, carried, lambda j, i: None, settings).job_id
    assert (carried.manifest(job) or {})["target_work"] == "300"


def test_the_live_workers_set_how_many_chunks_a_reference_input_makes_at_least(
    tmp_path: Path,
) -> None:
    """With place_spread 0, twice the pool processes of the workers alive (and at least
    16): a cluster that grew cuts the same input into more, smaller chunks."""
    problem = _problem("strgame")
    path = _input(tmp_path, problem, 300)
    size = path.stat().st_size
    grow = load_settings(chunk={"target_work": 30, "place_scale": 10}, file_payloads=True)
    cuts = {}
    for processes in (0, 4, 40):
        store = MemoryStore()
        store.note_capacity("w@host", processes, keep=60)
        plan, _ = _first_reading(problem, path, grow, None, False, store=store, copy=True)
        assert plan is not None
        cuts[processes] = plan.cut[0]
    assert cuts[0] == cuts[4] == place_cut(30, 1, size, 10, 16)[0]  # 16 at least
    assert cuts[40] == place_cut(30, 1, size, 10, 80)[0] < cuts[0]


def test_chunks_name_their_place_in_the_file_when_workers_read_it(tmp_path: Path) -> None:
    problem = _problem("pathgame")
    path = _input(tmp_path, problem, 50)
    store, job, sent = _submitted_by_reference(problem, path)
    payloads = [decode_payload(store.chunk_payload(job, i) or b"") for i in sent]
    assert len(payloads) > 2 and all(isinstance(p, FilePayload) for p in payloads)
    assert all(len(store.chunk_payload(job, i) or b"") < 300 for i in sent)
    reader = Policy(holder="t", file_payloads=True)
    for i in sent[:-1]:
        assert run_chunk(store, job, i, reader) == Outcome.SOLVED
    # a worker that does not read files refuses the last chunk, with one reason
    assert run_chunk(store, job, sent[-1], Policy(holder="t")) == Outcome.FAILED
    progress = store.progress(job)
    assert progress is not None and "setting file_payloads" in str(progress.failures)
    cases = parse(problem, path.read_bytes())
    expected = "".join(str(problem.solve(case)) for case in cases)
    got = "".join(store.iter_answers(job, len(sent) - 1))
    assert got == expected[: len(got)] and len(got) > 0


def test_a_file_changed_after_it_was_queued_fails_its_chunks(tmp_path: Path) -> None:
    """Through a shared mapping, as a write to pages already dirty: no stat field changes,
    only the bytes do, and those are what the worker checks."""
    problem = _problem("strgame")
    path = _input(tmp_path, problem, 20)
    store, job, sent = _submitted_by_reference(problem, path)
    before = os.stat(path)
    with path.open("r+b") as file, mmap.mmap(file.fileno(), 0) as mapped:
        mapped[:] = bytes(mapped).replace(b"a", b"b")  # same size, other answers
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert run_chunk(store, job, sent[0], Policy(file_payloads=True)) == Outcome.FAILED
    progress = store.progress(job)
    assert progress is not None and "changed after it was queued" in str(progress.failures)
    fresh = load_settings(chunk={"target_work": 300}, file_payloads=True)
    again = submit(problem, path, MemoryStore(), lambda job, i: None, fresh)
    assert again.job_id != job  # other bytes, another job


def test_a_spooled_input_is_named_by_place_while_it_grows(tmp_path: Path) -> None:
    """An upload in the server's spool is only ever appended to: its chunks name their place
    in it (with the digest of their bytes) before it is whole. Bytes appended later do not
    matter; a byte changed in a chunk, or another file in its place, fails that chunk."""
    problem = _problem("strgame")
    path = tmp_path / "in.txt"
    path.write_text(input_text(problem, random_cases(problem, "random", 40, 30, seed=21)))
    settings = load_settings(chunk={"target_work": 300}, file_payloads=True)
    store, sent = MemoryStore(), []
    done = submit(
        problem, path, store, lambda job, i: sent.append(i), settings, how=Production(spooled=True)
    )
    payloads = [decode_payload(store.chunk_payload(done.job_id, i) or b"") for i in sent]
    assert len(payloads) > 3 and all(isinstance(p, FilePayload) for p in payloads)
    reader = Policy(holder="t", file_payloads=True)
    with path.open("ab") as grow:
        grow.write(b"\n" * 100)  # the file grows (size, mtime and ctime change)
    assert run_chunk(store, done.job_id, sent[0], reader) == Outcome.SOLVED
    first = payloads[1]
    assert isinstance(first, FilePayload)
    data = bytearray(path.read_bytes())
    data[first.offset] ^= 1  # one bit of chunk 1, in place
    with path.open("r+b") as edit:
        edit.write(data)
    assert run_chunk(store, done.job_id, sent[1], reader) == Outcome.FAILED
    path.unlink()  # another file of the same name, chunk 2 changed (its inode may be reused)
    second = payloads[2]
    assert isinstance(second, FilePayload)
    data[second.offset] ^= 1
    path.write_bytes(bytes(data))
    assert run_chunk(store, done.job_id, sent[2], reader) == Outcome.FAILED
    failures = store.progress(done.job_id).failures  # type: ignore[union-attr]
    assert sorted(failures) == [1, 2]
    assert all("changed after it was queued" in why for why in failures.values())
    cases = parse(problem, path.read_bytes())
    first_chunk = "".join(str(problem.solve(case)) for case in cases[: payloads[0].count])
    assert next(store.iter_answers(done.job_id, 1)) == first_chunk


@pytest.mark.parametrize(
    "doc",
    [
        {"path": "relative/in.txt"},
        {"offset": -1},
        {"path": 7},
        {"digest": None},
        {"digest": "ab"},
        {"digest": 12},
    ],
)
def test_malformed_file_references_are_bad_payloads(doc: dict[str, Any]) -> None:
    good = FilePayload("strgame", 1, 1, "/in.txt", 0, 5, "0" * 64)
    assert decode_payload(good.encode()) == good
    raw = json.loads(good.encode())
    raw.update(doc)
    with pytest.raises(BadPayload):
        decode_payload(json.dumps(raw).encode())


def test_chunks_queued_before_the_c_path_defers_are_queued_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The C scanner defers after it queued some chunks (today only inputs that then fail
    do that, but nothing says so): the Python reader queues only the chunks after those,
    and the progress counts every case once."""
    problem = _problem("strgame")
    settings = load_settings(chunk={"target_work": 300})
    path = tmp_path / "in.txt"
    path.write_text(input_text(problem, random_cases(problem, "random", 40, 30, seed=13)))
    real = slices.slice_chunks

    def deferring(*args: Any) -> Any:
        for n, piece in enumerate(real(*args)):
            if n == 3:
                raise slices.Deferred
            yield piece

    monkeypatch.setattr(producer, "slice_chunks", deferring)
    store, sent, counted = MemoryStore(), [], []
    done = submit(
        problem,
        path,
        store,
        lambda job, i: sent.append(i),
        settings,
        how=Production(on_cases=counted.append),
    )
    assert sent == list(range(done.chunks)) and done.chunks > 4 and done.queued == done.chunks
    assert sum(counted) == done.total == 40
    payloads = [decode_payload(store.chunk_payload(done.job_id, i) or b"") for i in sent]
    assert [isinstance(p, SlicePayload) for p in payloads[2:5]] == [True, False, False]
