"""Chunk payloads: what crosses Redis, and what a worker refuses."""

from __future__ import annotations

import json
from types import SimpleNamespace

import msgspec
import pytest

import pipeline.games.registry as registry_module
from pipeline.data import messages
from pipeline.data.messages import (
    FORMAT,
    INVALID_CODE,
    MAX_ANSWERS,
    BadPayload,
    ChunkPayload,
    SlicePayload,
    StoredPayload,
    answer_lines,
    decode_payload,
    digest_of,
    encode_answer,
    open_payload,
    packed,
)
from pipeline.errors import UsageError
from pipeline.games.strgame import make_case


def test_a_payload_survives_the_round_trip() -> None:
    payload = ChunkPayload("strgame", 41, [make_case(3, ["ab", "c"]), None])
    raw = payload.encode()
    assert json.loads(raw)["format"] == FORMAT
    assert ChunkPayload.decode(raw) == payload


def test_a_compressed_payload_decodes_to_its_payload_and_a_bad_one_is_refused() -> None:
    data = b"3\n1 2\nab\n" * 1000
    raw = SlicePayload("strgame", 7, 3000, data).encode()
    found = decode_payload(packed(raw))
    assert len(packed(raw)) < len(raw) / 10
    assert isinstance(found, SlicePayload) and bytes(found.data) == data
    assert (found.problem, found.first, found.count) == ("strgame", 7, 3000)
    cases = ChunkPayload("strgame", 41, [make_case(3, ["ab", "c"]), None])
    assert decode_payload(packed(cases.encode())) == cases
    header, body = packed(raw).split(b"\n", 1)
    doc = json.loads(header)
    for size in (len(raw) - 1, len(raw) + 1):
        wrong = json.dumps({**doc, "size": size}).encode() + b"\n" + body
        with pytest.raises(BadPayload, match="where its header says"):
            decode_payload(wrong)
    with pytest.raises(BadPayload, match="does not decompress"):
        decode_payload(header + b"\n" + b"not zstd at all")
    with pytest.raises(BadPayload, match="malformed"):  # one layer only
        decode_payload(packed(packed(raw)))
    head, bomb = packed(b"\0" * (64 << 20)).split(b"\n", 1)
    small = json.dumps({**json.loads(head), "size": 10}).encode() + b"\n" + bomb
    with pytest.raises(BadPayload, match="of 11 bytes where its header says 10"):  # not 64 MB
        decode_payload(small)


FOLDER = f"s3://b/inputs/c/{'0' * 24}/"  # a job's folder in the payload store


def test_a_payload_kept_in_the_payload_store_is_read_from_there_and_checked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    objects: dict[str, bytes] = {}

    def read_range(url: str, offset: int, length: int) -> bytes:
        if url not in objects:
            raise UsageError(f"cannot read {url}: no such object")
        return objects[url][offset : offset + length]

    monkeypatch.setattr(messages, "read_range", read_range)

    def kept(name: str, data: bytes) -> bytes:
        url = f"{FOLDER}{name}"
        objects[url] = data
        return StoredPayload(url, len(data), digest_of(data)).encode()

    cases = ChunkPayload("strgame", 41, [make_case(3, ["ab", "c"]), None])
    assert open_payload(kept("chunk-0", cases.encode())) == cases
    data = b"3\n1 2\nab\n" * 1000
    raw = packed(SlicePayload("strgame", 7, 3000, data).encode())
    found = open_payload(kept("chunk-1", raw))  # compressed, then kept
    assert isinstance(found, SlicePayload) and bytes(found.data) == data
    assert open_payload(cases.encode()) == cases  # a payload in Redis is itself
    reference = kept("chunk-2", cases.encode())
    objects[f"{FOLDER}chunk-2"] = cases.encode().replace(b"41", b"42")  # changed since
    with pytest.raises(BadPayload, match=r"holds other bytes at s3://b/inputs/c/0+/chunk-2"):
        open_payload(reference)
    with pytest.raises(BadPayload, match="no such object"):
        open_payload(StoredPayload(f"{FOLDER}chunk-9", 3, "0" * 64).encode())
    with pytest.raises(BadPayload, match="malformed"):  # one store layer only
        open_payload(kept("chunk-3", kept("chunk-4", cases.encode())))
    for elsewhere in ("/etc/passwd", "https://intranet/admin", f"{FOLDER}x.in"):
        with pytest.raises(BadPayload, match="of another shape"):  # only a job's chunk
            open_payload(StoredPayload(elsewhere, 3, "0" * 64).encode())


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"not json",
        b"[1, 2]",
        b'{"format": 2, "problem": "strgame", "first": 1}',
        b'{"format": 2, "problem": "strgame", "first": "x", "cases": []}',
    ],
)
def test_malformed_payloads_are_refused(raw: bytes) -> None:
    with pytest.raises(BadPayload, match="malformed chunk payload"):
        ChunkPayload.decode(raw)


@pytest.mark.parametrize("version", [None, 1, FORMAT + 1])
def test_a_payload_of_another_version_is_refused_by_name(version: int | None) -> None:
    doc = {"problem": "strgame", "first": 1, "cases": [[1, "a\nb"]]}
    if version is not None:
        doc["format"] = version
    with pytest.raises(BadPayload, match=f"format {version or 1} where this worker reads"):
        ChunkPayload.decode(json.dumps(doc).encode())


def test_answer_codes_serve_any_game_up_to_the_limit() -> None:
    words = tuple(f"w{i}" for i in range(MAX_ANSWERS))
    codes = "".join(encode_answer(i) for i in range(MAX_ANSWERS)) + INVALID_CODE
    assert len(codes.encode()) == MAX_ANSWERS + 1  # one byte each: Lua counts bytes
    lines = codes.translate(answer_lines(words, "INVALID")).splitlines()
    assert lines == [*words, "INVALID"]
    assert MAX_ANSWERS >= 60


def test_a_game_with_too_many_answer_words_is_refused_when_it_registers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Point:
        name, value = "wordy", "wordy:PROBLEM"

        def load(self) -> object:
            return SimpleNamespace(answers=tuple(map(str, range(MAX_ANSWERS + 1))))

    monkeypatch.setattr("importlib.metadata.entry_points", lambda group: [Point()])
    registry_module.registry.cache_clear()
    try:
        with pytest.raises(UsageError, match=r"'wordy' .* has 63 answer words: a game needs 2"):
            registry_module.registry()
    finally:
        registry_module.registry.cache_clear()


@pytest.mark.parametrize("lazy", [False, True])
def test_a_judging_chunk_says_whether_it_stops_at_its_first_failure(lazy: bool) -> None:
    from pipeline.data.messages import JudgePayload

    sent = JudgePayload(
        "strgame", "cpp", "g++ 12", b"int main(){}", (1.0, 1 << 28, 1 << 26), 3, 11, "01",
        [b"1 1\na\n", b"2 2\na\nb\n"], "", lazy,
    )  # fmt: skip
    assert decode_payload(sent.encode()) == sent
    older = json.loads(sent.encode())
    del older["lazy"]  # a chunk queued before the flag existed judges every case
    assert decode_payload(json.dumps(older).encode()) == msgspec.structs.replace(sent, lazy=False)
