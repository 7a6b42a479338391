"""Client mode writes a downloaded result only when it is the one the server described."""

from __future__ import annotations

import hashlib
from pathlib import Path

import httpx
import pytest

from pipeline.client.http import Client
from pipeline.errors import GamebatchError

RESULT = b"Pure\nDirty\n" * 1000


def _client(body: bytes) -> Client:
    client = Client("http://gamebatch.test")
    transport = httpx.MockTransport(lambda request: httpx.Response(200, content=body))
    client.http = httpx.Client(base_url=client.url, transport=transport)
    return client


def _job(**fields: object) -> dict[str, object]:
    return {"id": "strgame-" + "a" * 24, "links": {"result": "/r"}, **fields}


GOOD = {"result_sha256": hashlib.sha256(RESULT).hexdigest(), "result_bytes": len(RESULT)}


@pytest.mark.parametrize(
    ("body", "fields", "words"),
    [
        (RESULT[:-5], GOOD, "arrived damaged"),  # truncated
        (RESULT.replace(b"Pure", b"Purf", 1), GOOD, "arrived damaged"),  # corrupted
        (RESULT, {"result_bytes": len(RESULT)}, "no checksum"),  # nothing to check it by
        (RESULT, {**GOOD, "result_sha256": "short"}, "no checksum"),
    ],
)
def test_a_result_that_is_not_the_described_one_is_not_written(
    tmp_path: Path, body: bytes, fields: dict[str, object], words: str
) -> None:
    out = tmp_path / "r.out"
    with pytest.raises(GamebatchError, match=words):
        _client(body).download(_job(**fields), out)
    assert not out.exists()


def test_the_described_result_is_written(tmp_path: Path) -> None:
    out = tmp_path / "r.out"
    _client(RESULT).download(_job(**GOOD), out)
    assert out.read_bytes() == RESULT
