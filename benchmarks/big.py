"""Big inputs end to end (issue 17's targets): a 110 MB strgame file against the reference
program, a 1 GB pathgame file in MB/s with the peak RSS of every process, tiny boards in cases
per second after start-up."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from benchmarks.common import (
    Row,
    fresh_state,
    random_word_games,
    run_reference,
    solve_tree,
    stop_warm,
    tiny_boards,
    wait_warm,
    wide_boards,
)


def big_inputs(data: Path, ref: dict[str, Path] | None, quick: bool) -> list[Row]:
    """The issue's end-to-end figures, fresh state each run."""
    rows = []
    games = 100 if quick else 1000
    words = random_word_games(data / f"words-{games}.in", games, 10**5, seed=5)
    mb = words.stat().st_size / 1e6
    out = Path(tempfile.mkdtemp(prefix="gamebatch-big-")) / "words.out"
    took = min(solve_tree("strgame", words, fresh_state(), out)[0] for _ in range(2))
    warm = _warm_time(words, out)
    if ref is not None:
        start = time.perf_counter()
        expected = run_reference(ref["strgame"], words)
        base = time.perf_counter() - start
        assert out.read_bytes() == expected, "strgame: answers differ from the reference"
        name = f"{mb:.0f} MB strgame ({games} games of 10^5 letters, random words), end to end"
        rows += [
            Row("big inputs", f"{name}, fresh state", took, base, "s", took / base, "<= 0.3x",
                took / base <= 0.3, "the reference program alone, single-threaded"),
            Row("big inputs", f"{name}, with the warm service", warm, base, "s", warm / base,
                "", None, "a command before left the service (and its workers) running"),
        ]  # fmt: skip
    boards = 100 if quick else 1000
    wide = wide_boards(data / f"wide-{boards}.in", boards, 5 * 10**5, seed=7)
    mb = wide.stat().st_size / 1e6
    took, peak = min(solve_tree("pathgame", wide, fresh_state(), out) for _ in range(2))
    rate = mb / took
    name = f"{mb:.0f} MB pathgame ({boards} boards of width 5*10^5), end to end, fresh state"
    rows += [
        Row("big inputs", name, rate, None, "MB/s", rate, ">= 250 MB/s", rate >= 250,
            f"{took:.2f} s"),
        Row("big inputs", f"{name}: peak RSS of the largest process", peak, None, "MiB", peak,
            "< 256 MiB", peak < 256, "the command, its Redis and every worker process"),
    ]  # fmt: skip
    small, large = (10**5, 4 * 10**5) if quick else (10**6, 4 * 10**6)
    times = {n: min(solve_tree("pathgame", tiny_boards(data / f"tiny-boards-{n}.in", n, seed=n),
                               fresh_state(), out)[0] for _ in range(2))
             for n in (small, large)}  # fmt: skip
    steady = (large - small) / (times[large] - times[small])
    rows.append(Row("big inputs", f"tiny pathgame boards (width 1-8), steady state: {large} "
                    f"less {small} boards", steady, None, "cases/s", steady, ">= 5000000 cases/s",
                    steady >= 5e6, f"{small} in {times[small]:.2f} s, {large} in "
                    f"{times[large]:.2f} s"))  # fmt: skip
    return rows


def _warm_time(path: Path, out: Path) -> float:
    """`solve` of `path` on a state folder whose warm service (with its workers) the solve of
    a smaller input left."""
    env = fresh_state(warm=60)
    first = path.with_name("warm-first.in")  # over chunk.local_bytes: it needs the workers
    first.write_text("1\n1 1\n" + "ab" * (400 << 10) + "\n")
    try:
        solve_tree("strgame", first, env, out)
        wait_warm(env)
        return solve_tree("strgame", path, env, out)[0]
    finally:
        stop_warm(env)
