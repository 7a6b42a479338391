"""The chaos soak: short in the default test run, as long as GAMEBATCH_SOAK_SECONDS says."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import compile_reference
from tests.soak.soak import WorkerHost, run

# taken out of the environment: what the soak's processes read as settings must be settings
SECONDS = float(os.environ.pop("GAMEBATCH_SOAK_SECONDS", "10"))
SEED = int(os.environ.pop("GAMEBATCH_SOAK_SEED", "20261201"))


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path] | None:
    """The reference programs, which give the answers; else expected.json holds theirs."""
    return compile_reference(tmp_path_factory.mktemp("reference"))


@pytest.mark.integration
def test_every_answer_is_exact_after_continuous_faults(
    tmp_path: Path, reference: dict[str, Path] | None
) -> None:
    scale = 1.0 if SECONDS <= 60 else 4.0
    figures = run(tmp_path, SECONDS, SEED, jobs=6, scale=scale, reference=reference)
    print("\n" + "\n".join(figures.lines()))  # replay a failure with the same seed
    assert figures.lost == 0 and figures.unfinished == 0, figures.lines()
    assert figures.failed_solves == [], figures.lines()
    assert figures.left == 0, figures.lines()
    assert sum(figures.faults.values()) >= SECONDS / 4, figures.lines()
    assert figures.faults["redis"] >= 1 and figures.faults["worker"] >= 1, figures.lines()
    assert figures.faults["failover"] == 0
    if WorkerHost.available():  # a worker host's network was cut (and restored) too
        assert figures.faults["network"] >= 1, figures.lines()


@pytest.mark.integration
def test_every_answer_is_exact_after_failovers_between_primary_and_replica(
    tmp_path: Path, reference: dict[str, Path] | None
) -> None:
    scale = 1.0 if SECONDS <= 60 else 4.0
    figures = run(
        tmp_path, SECONDS, SEED + 1, jobs=6, scale=scale, sentinel=True, reference=reference
    )
    print("\n" + "\n".join(figures.lines()))
    assert figures.lost == 0 and figures.unfinished == 0, figures.lines()
    assert figures.failed_solves == [], figures.lines()
    assert figures.left == 0, figures.lines()
    assert figures.faults["failover"] >= 1 and figures.faults["redis"] == 0, figures.lines()
