"""`gamebatch verify` against problemtools' `verifyproblem` on the same packages, side by side,
each run cold: a fresh state folder, and sources that neither has compiled before."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.common import ROOT, Row, fresh_state, stop_warm

PROGRAMS = ROOT / "tests" / "programs" / "strgame"
# strgame's wrong and failing submissions: a parity bug, a recursive walk (Python's recursion
# limit on a deep trie)
WRONG = ("k % 2 == 1", "k % 2 == 0")
RECURSIVE = """import sys
def main():
    data = sys.stdin.read().split()
    t, at = int(data[0]), 1
    for _ in range(t):
        n, k = int(data[at]), int(data[at + 1])
        words, at = data[at + 2 : at + 2 + n], at + 2 + n
        trie = {}
        for w in words:
            node = trie
            for c in w:
                node = node.setdefault(c, {})
        def play(node):
            if not node:
                return False, True
            kids = [play(child) for child in node.values()]
            return any(not w for w, _ in kids), any(not l for _, l in kids)
        win, lose = play(trie)
        print("Pure" if win and (lose or k % 2 == 1) else "Dirty")
main()
"""
# the accepted solution, then a pass over every pair of letters: quadratic in the letters
QUADRATIC = ("        bool pure =", "        volatile long sink = 0;\n"
             "        for (long i = 0; i < (long)nodes * nodes; i++) sink = sink + i;\n"
             "        bool pure =")  # fmt: skip


def packages(data: Path, quick: bool) -> list[Row]:
    """verify's time against verifyproblem's on an exported strgame package with submissions
    of every verdict in three languages (full mode only), and on a package with a custom
    output validator. Only languages both run alike: problemtools runs `.py` on PyPy, and
    builds Java for release 21 (Debian 12 has 17) and Go with gccgo."""
    theirs = os.environ.get("VERIFYPROBLEM") or shutil.which("verifyproblem")
    if theirs is None:
        print("note: no verifyproblem (pip install problemtools, or VERIFYPROBLEM=path): skipped")
        return []
    rows = []
    built = {"any-sum package (custom validator, 5 submissions)": _any_sum}
    if not quick:
        built["strgame package (exported, max tests, 5 submissions)"] = _strgame
    examples = os.environ.get("PROBLEMTOOLS_EXAMPLES")  # problemtools' examples/, not ours
    if examples and not quick:
        built["problemtools' own `different` (custom validator, 10 submissions)"] = lambda root: (
            _different(Path(examples), root)
        )
    for name, build in built.items():
        root = build(Path(tempfile.mkdtemp(dir=data)))
        ours = _best(1 if quick else 3, root, _ours)
        base = _best(1 if quick else 3, root, lambda where: _theirs(theirs, where))
        note = "wall seconds, cold: a fresh state folder and sources compiled for the first time"
        rows.append(Row("packages", f"verify vs problemtools' verifyproblem: {name}", ours, base,
                        "s", ours / base, "<= 0.5", ours <= 0.5 * base, note))  # fmt: skip
        shutil.rmtree(root)
    return rows


def _best(runs: int, root: Path, run: Callable[[Path], None]) -> float:
    """The fastest of `runs` runs, each on a copy whose sources are new to every cache."""
    times = []
    for n in range(runs):
        copy = root.with_name(f"{root.name}{n}{time.time_ns()}")  # the format: [a-z0-9]+
        shutil.copytree(root, copy)
        for source in copy.rglob("*"):
            if source.suffix in (".cpp", ".cc", ".rs", ".py", ".c", ".cs", ".js"):
                mark = "#" if source.suffix == ".py" else "//"
                source.write_text(source.read_text() + f"\n{mark} {copy.name}\n")
        start = time.perf_counter()
        run(copy)
        times.append(time.perf_counter() - start)
        shutil.rmtree(copy)
    return min(times)


def _ours(root: Path) -> None:
    env = fresh_state()
    try:
        done = subprocess.run([sys.executable, "-m", "pipeline.cli", "verify", "-q", str(root)],
                              capture_output=True, text=True, env=env, check=False)  # fmt: skip
    finally:
        stop_warm(env)
    if done.returncode != 0:
        raise RuntimeError(f"verify failed: {done.stdout[-2000:]}{done.stderr[-2000:]}")


def _theirs(command: str, root: Path) -> None:
    parts = ["config", "data", "submissions", "validators"]  # not the statement (no LaTeX here)
    done = subprocess.run([command, str(root), "-p", *parts], capture_output=True, text=True,
                          check=False)  # fmt: skip
    if " 0 errors" not in done.stdout + done.stderr:
        raise RuntimeError(f"verifyproblem failed: {(done.stdout + done.stderr)[-2000:]}")


# what both run alike here: problemtools builds Java for release 21 and Go with gccgo, and the
# rest of `different`'s languages have no compiler on this machine
BOTH_RUN = (".c", ".cc", ".cs", ".js", ".rs")


def _different(examples: Path, root: Path) -> Path:
    """problemtools' example `different`, its submissions in languages both run alike (and
    its py3 one), read from a problemtools checkout at run time: nothing of it is kept here."""
    package = root / "different"
    shutil.copytree(examples / "different", package)
    shutil.rmtree(package / "submissions" / "slow_accepted", ignore_errors=True)  # not legacy
    for source in list((package / "submissions").rglob("*")):
        keep = source.suffix in BOTH_RUN or source.name.endswith("_py3.py")
        if source.is_file() and not keep:
            source.unlink()
    shutil.rmtree(package / "submissions" / "accepted" / "prolog", ignore_errors=True)
    return package


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def _strgame(root: Path) -> Path:
    package = root / "strgame"
    subprocess.run([sys.executable, "-m", "pipeline.cli", "package", "-p", "strgame",
                    str(package)], check=True, capture_output=True)  # fmt: skip
    accepted = (package / "submissions" / "accepted" / "strgame.cpp").read_text()
    return _write(
        package,
        {
            "submissions/accepted/strgame.rs": (PROGRAMS / "strgame.rs").read_text(),
            "submissions/wrong_answer/parity.cpp": accepted.replace(*WRONG),
            "submissions/run_time_error/recursive.py": RECURSIVE,
            "submissions/time_limit_exceeded/quadratic.cpp": accepted.replace(*QUADRATIC),
        },
    )


CHECKER = """import sys
n = int(open(sys.argv[1]).read())
words = sys.stdin.buffer.read().split()
ok = len(words) == 2 and all(w.isdigit() for w in words) and sum(map(int, words)) == n
sys.exit(42 if ok else 43)
"""


def _any_sum(root: Path) -> Path:
    """Print two non-negative integers that sum to n: many right answers, one validator."""
    files = {
        "problem.yaml": "name: Any Sum\nsource: gamebatch\nlicense: cc0\nvalidation: custom\n",
        "problem_statement/problem.en.tex": "\\problemname{Any Sum}\nPrint two numbers.\n",
        "input_validators/check.py": "import re, sys\n"
        "sys.exit(42 if re.fullmatch(r'(0|[1-9][0-9]{0,9})\\n', sys.stdin.read()) else 1)\n",
        "output_validators/sum/validate.py": CHECKER,
        "submissions/accepted/half.py": "n = int(input())\nprint(n // 2, n - n // 2)\n",
        "submissions/accepted/zero.cpp": "#include <cstdio>\nint main() { long n;"
        ' scanf("%ld", &n); printf("%ld 0\\n", n); }\n',
        "submissions/accepted/ones.rs": "use std::io::Read;\nfn main() { let mut s = String::new();"
        " std::io::stdin().read_to_string(&mut s).unwrap(); let n: u64 = s.trim().parse()"
        '.unwrap(); if n > 0 { println!("1 {}", n - 1) } else { println!("0 0") } }\n',
        "submissions/wrong_answer/plus_one.py": "n = int(input())\nprint(n, 1)\n",
        "submissions/time_limit_exceeded/spin.cpp": "int main() { volatile long x = 0;"
        " for (;;) x++; }\n",
    }
    for n in range(1, 21):
        value = n * 37_000_003 % 1_000_000_007
        files[f"data/secret/{n:02}.in"] = f"{value}\n"
        files[f"data/secret/{n:02}.ans"] = f"0 {value}\n"
    files["data/sample/1.in"], files["data/sample/1.ans"] = "4\n", "0 4\n"
    return _write(root / "anysum", files)
