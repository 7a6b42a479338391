"""Scoring files: YAML groups (subtasks) of tests and case ranges, read into a Scoring."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from msgspec import Meta, field

from pipeline.config import Section, SettingError, read_yaml, validated
from pipeline.errors import UsageError
from pipeline.grading.rules import Group, Scoring


class _GroupSpec(Section, frozen=True, kw_only=True):
    name: str
    points: Annotated[float, Meta(gt=0)]
    tests: list[str] = field(default_factory=lambda: ["*"])
    cases: str | None = None  # "1-3,7"


class _ScoringSpec(Section, frozen=True):
    groups: Annotated[list[_GroupSpec], Meta(min_length=1)]


def load_scoring(path: str) -> Scoring:
    """A scoring file: groups of cases or tests, each worth points if all are accepted."""
    data = read_yaml(Path(path))
    try:
        spec = validated(data, _ScoringSpec)
        groups = tuple(
            Group(g.name, g.points, tuple(g.tests), _ranges(g.cases, f"groups.{g.name}.cases"))
            for g in spec.groups
        )
    except SettingError as exc:
        raise UsageError(f"scoring {path}: {'.'.join(exc.loc)!r}: {exc.message}") from None
    except ValueError as exc:
        raise UsageError(f"scoring {path}: {exc}") from None
    return Scoring(groups)


def _ranges(text: str | None, key: str) -> tuple[tuple[int, int], ...]:
    """'1-3,7' as ((1, 3), (7, 7))."""
    if not text:
        return ()
    ranges = []
    for part in str(text).split(","):
        low, _, high = part.strip().partition("-")
        if not low.isdigit() or not (high or low).isdigit() or int(low) > int(high or low):
            raise ValueError(f"{key!r}: {part.strip()!r} is not a case number or range like 3-7")
        ranges.append((int(low), int(high or low)))
    return tuple(ranges)
