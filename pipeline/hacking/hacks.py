"""What a hack search is given and finds: its budget, and each contestant's hack."""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.games.problem import Case
from pipeline.grading.rules import Verdict


@dataclass(frozen=True)
class Budget:
    """How long the search goes on: seconds in all, cases per contestant, the largest size
    (None: the contest's limit, see plan.largest_size)."""

    seconds: float
    cases: int
    largest: int | None = None


@dataclass
class Hack:
    """What the search found for one contestant."""

    contestant: str
    cases_tried: int = 0
    seconds: float = 0.0
    verdict: Verdict | None = None  # None: not hacked
    case: Case | None = None
    expected: str | None = None
    found: str | None = None  # what the program printed (WA, PE), or how its run ended
    size: int = 0  # the size of the round that found it
    checked: bool = False  # its answer also found by exhaustive search (and its shrinks')
    shrink_steps: int = 0
    fails_from: int = 0  # the smallest size found to fail (0: not bisected)
    passes_at: int = 0  # the largest size below it found to pass (0: none)
    skipped: str | None = None  # why it was not searched (a compile error, failed tests)

    @property
    def hacked(self) -> bool:
        """Whether a failing input was found."""
        return self.verdict is not None and self.case is not None
