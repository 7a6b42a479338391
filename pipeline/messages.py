"""What crosses Redis between producer and workers: chunk payloads, as JSON."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

INVALID_DIGIT = "-"  # a worker's answer for a case that --keep-going let through


class BadPayload(ValueError):
    """A chunk payload that is not what a producer writes."""


@dataclass(frozen=True)
class ChunkPayload:
    """The cases of one chunk, with the game's name and the number of the first case."""

    problem: str
    first: int
    cases: list[Any]

    def encode(self) -> bytes:
        """Compact JSON."""
        doc = {"problem": self.problem, "first": self.first, "cases": self.cases}
        return json.dumps(doc, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, data: bytes) -> ChunkPayload:
        """Parse and check the shape; raise BadPayload otherwise."""
        try:
            doc = json.loads(data)
            payload = cls(str(doc["problem"]), int(doc["first"]), list(doc["cases"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise BadPayload(f"malformed chunk payload: {exc}") from None
        return payload
