"""What a hack search leaves: per hacked contestant its one-case input and answer, every
counterexample in one multi-case test (`hacks.in`, `hacks.ans`), a text summary and a
versioned JSON report."""

from __future__ import annotations

import io
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TextIO

from pipeline import escape
from pipeline.data.files import atomic_write
from pipeline.errors import GamebatchError, UsageError
from pipeline.games.problem import Problem, limits_of
from pipeline.games.reader import read_cases
from pipeline.games.tokens import TokenReader
from pipeline.grading.rules import Verdict
from pipeline.hacking.hacks import Budget, Hack

FORMAT = "gamebatch-hacks"
VERSION = 1
ALL = "hacks"  # OUT/hacks.in and OUT/hacks.ans: every counterexample


def check_names(contestants: Iterable[str]) -> None:
    """Refuse a contestant whose files would be the combined test's."""
    if ALL in contestants:
        raise UsageError(f"a contestant named {ALL!r} would overwrite {ALL}.in: rename it")


def write_files(out: Path, problem: Problem, hacks: list[Hack]) -> None:
    """OUT/CONTESTANT.in and .ans for each hack, and OUT/hacks.in and .ans with them all."""
    found = [h for h in hacks if h.hacked]
    out.mkdir(parents=True, exist_ok=True)
    for hack in found:
        atomic_write(out / f"{hack.contestant}.in", _input(problem, [hack]))
        atomic_write(out / f"{hack.contestant}.ans", f"{hack.expected}\n")
    if found:
        atomic_write(out / f"{ALL}.in", _input(problem, found))
        atomic_write(out / f"{ALL}.ans", "".join(f"{h.expected}\n" for h in found))


def _input(problem: Problem, hacks: list[Hack]) -> str:
    return f"{len(hacks)}\n" + "".join(problem.format_case(h.case) for h in hacks)


def summary(out: TextIO, problem: Problem, hacks: list[Hack]) -> None:
    """One line per contestant, then the count."""
    width = max((len(escape.terminal(h.contestant)) for h in hacks), default=0)
    for hack in hacks:
        name = escape.terminal(hack.contestant).ljust(width)
        effort = f"{hack.cases_tried} cases, {hack.seconds:.1f} s"
        if hack.skipped:
            out.write(f"{name}  not searched: {escape.terminal(hack.skipped)}\n")
        elif hack.hacked:
            found = f"{_what(hack)}{_threshold(problem, hack)}"
            out.write(f"{name}  HACKED {hack.verdict}: {found} ({effort})\n")
        else:
            out.write(f"{name}  not hacked ({effort})\n")
    hacked = sum(h.hacked for h in hacks)
    out.write(f"{hacked} of {len(hacks)} programs hacked\n")


def _threshold(problem: Problem, hack: Hack) -> str:
    """Where a bisected failure starts: "; fails from 257 columns (passes at 256)"."""
    limits = limits_of(problem)
    if not hack.fails_from or limits is None:
        return ""
    passes = f" (passes at {hack.passes_at})" if hack.passes_at else ""
    return f"; fails from {hack.fails_from} {limits.size_unit}{passes}"


def _what(hack: Hack) -> str:
    """What the program did on its counterexample."""
    steps = hack.shrink_steps
    shrunk = f", shrunk in {steps} step{'s' if steps > 1 else ''}" if steps else ""
    found = escape.terminal(hack.found) if hack.found is not None else "nothing"
    if hack.verdict is not None and hack.verdict.value in ("WA", "PE", "MISSING"):
        return f"expected {hack.expected}, found {found}{shrunk}"
    return f"{found} (expected {hack.expected}){shrunk}"


def document(problem: Problem, seed: int, budget: Budget, hacks: list[Hack]) -> dict[str, Any]:
    """The JSON report."""
    return {
        "format": FORMAT,
        "version": VERSION,
        "problem": problem.name,
        "seed": seed,
        "budget": {"seconds": budget.seconds, "cases": budget.cases, "largest": budget.largest},
        "hacked": sum(h.hacked for h in hacks),
        "contestants": [_entry(problem, h) for h in hacks],
    }


def _entry(problem: Problem, hack: Hack) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "contestant": hack.contestant,
        "hacked": hack.hacked,
        "cases_tried": hack.cases_tried,
        "seconds": round(hack.seconds, 3),
        "skipped": hack.skipped,
    }
    if hack.hacked:
        entry |= {
            "verdict": hack.verdict.value if hack.verdict else None,
            "expected": hack.expected,
            "found": hack.found,
            "input": _input(problem, [hack]),
            "shrink_steps": hack.shrink_steps,
            "fails_from": hack.fails_from or None,  # the bisection's sizes (None: not bisected)
            "passes_at": hack.passes_at or None,
        }
    return entry


def hacks_of(problem: Problem, doc: dict[str, Any]) -> list[Hack]:
    """The hacks a JSON report describes (a server's, in client mode)."""
    if doc.get("format") != FORMAT or doc.get("version") != VERSION:
        raise GamebatchError("the server sent a hack report of another format")
    found = []
    for entry in doc["contestants"]:
        hack = Hack(entry["contestant"], int(entry["cases_tried"]), float(entry["seconds"]))
        hack.skipped = entry.get("skipped")
        if entry["hacked"]:
            text = entry["input"].encode()
            (numbered,) = read_cases(problem, TokenReader(io.BytesIO(text), "<report>"))
            hack.case, hack.verdict = numbered.case, Verdict(entry["verdict"])
            hack.expected, hack.found = entry["expected"], entry["found"]
            hack.shrink_steps = int(entry["shrink_steps"])
            hack.fails_from = int(entry.get("fails_from") or 0)
            hack.passes_at = int(entry.get("passes_at") or 0)
        found.append(hack)
    return found


def write_json(path: Path, doc: dict[str, Any]) -> None:
    """The report, whole or not at all."""
    atomic_write(path, json.dumps(doc, indent=2) + "\n")
