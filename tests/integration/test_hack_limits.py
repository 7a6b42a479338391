"""`gamebatch hack` at the contest's limits, on real workers and the sandbox: programs whose bug
needs size (a recursion too deep for Python, a fixed trie table, a quadratic build, a board
table too narrow) are hacked through the max tests, and each counterexample is bisected to
within 2x of where the bug starts; a correct program is not hacked."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pipeline.games.reader import read_cases
from pipeline.games.registry import get_problem
from pipeline.games.strgame import words_of
from pipeline.games.tokens import TokenReader
from tests.conftest import SHARED
from tests.helpers import command_env
from tests.integration.test_judge import GOOD

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="the sandbox runs programs as other uids: it needs root"
)
CRASH = "{ volatile int *p = nullptr; *p = 1; }"
SIZE_FAULTS = {  # planted where the answer is known, with the trie built (`next`)
    "good": "",
    "table": f"if (next.size() > 50001) {CRASH}",  # a trie table of 50,000 nodes
    "quadratic": "{ volatile long s = 0; for (size_t i = 0; i < next.size(); i++)"
    " for (size_t j = 0; j < next.size(); j++) s += j; }",  # TLE from ~40,000 letters
}
RECURSIVE = """
import sys


def walk(node):  # (whether the player to move can win, can lose) below this node
    if not node:
        return False, True
    win = lose = False
    for child in node.values():
        w, l = walk(child)
        win, lose = win or not w, lose or not l
    return win, lose


data = sys.stdin.buffer.read().split()
t, at, out = int(data[0]), 1, []
for _ in range(t):
    n, k = int(data[at]), int(data[at + 1])
    words, at = data[at + 2 : at + 2 + n], at + 2 + n
    root = {}
    for word in words:
        node = root
        for c in word:
            node = node.setdefault(c, {})
    win, lose = walk(root)
    out.append("Pure" if win and (lose or k % 2 == 1) else "Dirty")
print("\\n".join(out))
"""


def _hack(
    root: Path, game: str, out: str
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """A search with the default options but a bound on the correct program's cases."""
    command = [sys.executable, "-m", "pipeline.cli", "hack", "-q", "-p", game,
               "--programs", str(root / "progs"), "--out", str(root / out),
               "--json", str(root / f"{out}.json"), "--cases", "2500"]  # fmt: skip
    done = subprocess.run(
        command, capture_output=True, text=True, env=command_env(), check=False, timeout=400
    )
    assert done.returncode == 1, done.stderr
    doc = json.loads((root / f"{out}.json").read_text())
    return done, {e["contestant"]: e for e in doc["contestants"]}


def _within_twice(entry: dict[str, Any]) -> None:
    """A bisected counterexample: its threshold found, at most twice where it passes."""
    assert entry["passes_at"] and entry["fails_from"] <= 2 * entry["passes_at"], entry


def _case(text: str) -> Any:
    """The one strgame case of a counterexample."""
    stream = io.BytesIO(text.encode())
    (numbered,) = list(read_cases(get_problem("strgame"), TokenReader(stream, "<hack>")))
    return numbered.case


@pytest.mark.slow
def test_size_bugs_in_strgame_programs_are_hacked_near_where_they_start(tmp_path: Path) -> None:
    mark = f"// {tmp_path.name} {os.getpid()}\n"  # this run's own sources (verdicts are kept)
    for name, fault in SIZE_FAULTS.items():
        (tmp_path / "progs" / name).mkdir(parents=True)
        (tmp_path / "progs" / name / "main.cpp").write_text(GOOD.replace("// FAULT", fault) + mark)
    (tmp_path / "progs" / "recursive").mkdir(parents=True)
    (tmp_path / "progs" / "recursive" / "main.py").write_text(RECURSIVE + f"# {mark}")
    done, found = _hack(tmp_path, "strgame", "strgame")
    assert "3 of 4 programs hacked" in done.stdout, done.stdout
    assert not found["good"]["hacked"] and found["good"]["cases_tried"] == 2500
    verdicts = {n: found[n]["verdict"] for n in ("table", "quadratic", "recursive")}
    assert verdicts == {"table": "RE", "quadratic": "TLE", "recursive": "RE"}
    for name in ("table", "quadratic", "recursive"):
        _within_twice(found[name])
        words = words_of(_case(found[name]["input"]))
        assert sum(map(len, words)) == found[name]["fails_from"]  # the case is the threshold's
    deepest = max(map(len, words_of(_case(found["recursive"]["input"]))))
    assert 900 <= deepest <= 2000  # Python's recursion limit is 1000 frames
    assert found["table"]["fails_from"] >= 50_000  # a trie of over 50,001 nodes
    assert "fails from" in done.stdout and "letters" in done.stdout


@pytest.mark.skipif(not (SHARED / "reference" / "pathgame.cpp").is_file(), reason="no reference")
def test_a_board_table_too_narrow_is_hacked_at_its_width(tmp_path: Path) -> None:
    source = (SHARED / "reference" / "pathgame.cpp").read_text()
    read = "vector<string> d; d.push_back(r0); d.push_back(r1);"
    assert read in source
    narrow = source.replace(read, f"{read} if (strlen(r0) > 256) {CRASH}")  # a 256-column table
    mark = f"// {tmp_path.name} {os.getpid()}\n"
    for name, text in (("good", source), ("narrow", narrow)):
        (tmp_path / "progs" / name).mkdir(parents=True)
        (tmp_path / "progs" / name / "main.cpp").write_text(text + mark)
    done, found = _hack(tmp_path, "pathgame", "pathgame")
    assert "1 of 2 programs hacked" in done.stdout, done.stdout
    assert found["narrow"]["verdict"] == "RE" and not found["good"]["hacked"]
    assert (found["narrow"]["fails_from"], found["narrow"]["passes_at"]) == (257, 256)
    (board,) = found["narrow"]["input"].split("\n")[1:2]
    assert len(board.split()[0]) == 257
    assert "fails from 257 columns (passes at 256)" in done.stdout
