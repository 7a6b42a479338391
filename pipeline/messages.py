"""What crosses Redis between producer and workers: chunk payloads, as JSON."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

INVALID_DIGIT = "-"  # a worker's answer for a case that --keep-going let through

# Bumped whenever the payload or a game's case encoding changes, so that a worker of another
# gamebatch version fails the chunk with a clear reason instead of misreading it.
# 2: strgame strings are joined by spaces (they were joined by newlines).
FORMAT = 2


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
        doc = {"format": FORMAT, "problem": self.problem, "first": self.first, "cases": self.cases}
        return json.dumps(doc, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, data: bytes) -> ChunkPayload:
        """Parse and check the shape; raise BadPayload otherwise."""
        try:
            doc = json.loads(data)
            version = doc.get("format", 1)
            payload = cls(str(doc["problem"]), int(doc["first"]), list(doc["cases"]))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise BadPayload(f"malformed chunk payload: {exc}") from None
        if version != FORMAT:
            raise BadPayload(
                f"chunk payload of format {version} where this worker reads format {FORMAT}:"
                " run the same gamebatch version on every machine"
            )
        return payload
