"""The registry of games: every `gamebatch.problems` entry point, found once per process."""

from __future__ import annotations

from functools import cache
from importlib.metadata import entry_points

from pipeline.errors import UsageError
from pipeline.messages import MAX_ANSWERS
from pipeline.problem import Problem

ENTRY_POINT_GROUP = "gamebatch.problems"


@cache
def registry() -> dict[str, Problem]:
    """All games registered under the entry point group."""
    found: dict[str, Problem] = {}
    for point in entry_points(group=ENTRY_POINT_GROUP):
        game = point.load()
        if not 2 <= len(game.answers) <= MAX_ANSWERS:
            raise UsageError(
                f"game {point.name!r} ({point.value}) has {len(game.answers)} answer words:"
                f" a game needs 2 to {MAX_ANSWERS}"
            )
        found[point.name] = game
    if not found:  # running from a source tree that was never installed
        from pipeline.games import pathgame, strgame

        found = {"strgame": strgame.PROBLEM, "pathgame": pathgame.PROBLEM}
    return found


def get_problem(name: str) -> Problem:
    """The game called `name`, or a UsageError listing the known ones."""
    known = registry()
    if name not in known:
        raise UsageError(f"unknown problem {name!r}; known: {', '.join(sorted(known))}")
    return known[name]
