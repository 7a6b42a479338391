"""The chaos soak's figures (tests/soak/soak.py): faults injected, the longest stall, answers
lost and processes left behind, with its seed."""

from __future__ import annotations

import shutil
from pathlib import Path

from benchmarks.common import Row
from tests.soak.soak import FAULTS, run


def soak(data: Path, quick: bool) -> list[Row]:
    """The chaos soak's figures (tests/soak/soak.py), with its seed."""
    seed, seconds = 20261201, 20 if quick else 120
    shutil.rmtree(data / "soak", ignore_errors=True)
    got = run(data / "soak", seconds, seed, jobs=6, scale=1.0 if quick else 4.0)
    note = f"seed {seed}, {got.seconds:.0f} s, {got.jobs} jobs, {got.cases} cases"
    faults = ", ".join(f"{kind} {got.faults[kind]}" for kind in FAULTS)
    return [
        Row("soak", f"faults injected ({faults})", sum(got.faults.values()), None, "faults",
            None, "", None, note),
        Row("soak", "longest stall", got.longest_stall, None, "s", None, "", None, note),
        Row("soak", "lost answers (result files not byte-identical, jobs not done)", got.lost,
            None, "", got.lost, "0", got.lost == 0, note),
        Row("soak", "processes left behind", got.left, None, "", got.left, "0", got.left == 0,
            note),
    ]  # fmt: skip
