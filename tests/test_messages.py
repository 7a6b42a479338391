"""Chunk payloads: what crosses Redis, and what a worker refuses."""

from __future__ import annotations

import json

import pytest

from games.strgame import make_case
from pipeline.messages import FORMAT, BadPayload, ChunkPayload


def test_a_payload_survives_the_round_trip() -> None:
    payload = ChunkPayload("strgame", 41, [make_case(3, ["ab", "c"]), None])
    raw = payload.encode()
    assert json.loads(raw)["format"] == FORMAT
    assert ChunkPayload.decode(raw) == payload


@pytest.mark.parametrize(
    "raw",
    [b"", b"not json", b"[1, 2]", b'{"format": 2, "problem": "strgame", "first": 1}',
     b'{"format": 2, "problem": "strgame", "first": "x", "cases": []}'],
)  # fmt: skip
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
