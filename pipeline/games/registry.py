"""The registry of games: the built-in ones, and every `gamebatch.problems` entry point,
found once per process."""

from __future__ import annotations

from functools import cache
from importlib import import_module

from pipeline.errors import UsageError
from pipeline.games.problem import MAX_ANSWERS, Problem

ENTRY_POINT_GROUP = "gamebatch.problems"
# the built-in games by module: asked for by name, they are found without reading every
# installed package's entry points (16-18 ms of a one-case solve); a plugin cannot take
# their names
BUILT_IN = {"strgame": "pipeline.games.strgame", "pathgame": "pipeline.games.pathgame"}


@cache
def registry() -> dict[str, Problem]:
    """Every game: the built-in ones, and those registered under the entry point group."""
    from importlib.metadata import entry_points

    found = {name: built_in(name) for name in BUILT_IN}
    for point in entry_points(group=ENTRY_POINT_GROUP):
        if point.name in BUILT_IN:
            continue  # gamebatch's own entry points name them too
        game = point.load()
        if not 2 <= len(game.answers) <= MAX_ANSWERS:
            raise UsageError(
                f"game {point.name!r} ({point.value}) has {len(game.answers)} answer words:"
                f" a game needs 2 to {MAX_ANSWERS}"
            )
        found[point.name] = game
    return found


def built_in(name: str) -> Problem:
    """A built-in game."""
    game: Problem = import_module(BUILT_IN[name]).PROBLEM
    return game


def find_problem(name: str) -> Problem | None:
    """The game called `name`, or None."""
    return built_in(name) if name in BUILT_IN else registry().get(name)


def get_problem(name: str) -> Problem:
    """The game called `name`, or a UsageError listing the known ones."""
    if name in BUILT_IN:
        return built_in(name)
    known = registry()
    if name not in known:
        raise UsageError(f"unknown problem {name!r}; known: {', '.join(sorted(known))}")
    return known[name]
