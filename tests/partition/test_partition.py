"""The partition bench (bench.py): short in the default run (one run of a partition and one of
a paused primary, side by side), every fault GAMEBATCH_PARTITION_RUNS times when that is set
(the long mode: 20 runs of each fault, about an hour)."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.partition.bench import FAULTS, bench, table
from tests.partition.net import Net

RUNS = int(os.environ.pop("GAMEBATCH_PARTITION_RUNS", "0"))  # not a setting: out of the way

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not Net.available(), reason="needs root and network namespaces"),
]


def test_nothing_acknowledged_is_lost_through_partitions_and_pauses(tmp_path: Path) -> None:
    if RUNS:
        tallies = bench(tmp_path, RUNS, FAULTS, seed=4300)
    else:  # one run of each, side by side on hosts of their own: one run's time
        with ThreadPoolExecutor(2) as pool:
            runs = pool.map(lambda f: bench(tmp_path / f, 1, (f,), 4300), ("partition", "pause"))
            tallies = {fault: tally for found in runs for fault, tally in found.items()}
    lines = table(tallies) + [f"{f}: {n}" for f, t in tallies.items() for n in t.notes]
    print("\n" + "\n".join(lines))
    for fault, tally in tallies.items():
        assert tally.acknowledged >= 2 * tally.runs, lines  # the clients got work done
        assert tally.clean, lines  # nothing lost, wrong or stuck
        if fault == "two failovers":
            assert tally.longest <= 40, lines  # collected within 40 s of the first pause
