"""The watch that says when no worker takes a command's chunks, on a clock of the test's."""

from __future__ import annotations

from typing import Any

import pytest

from pipeline.jobs.worker_watch import LOOK_EVERY, WARN_AFTER, NoWorkers, WorkerWatch
from tests.helpers import FakeClock


class Said:
    def __init__(self) -> None:
        self.lines: list[tuple[str, bool]] = []

    def __call__(self, line: str, **kw: Any) -> None:
        self.lines.append((line, kw.get("lasting", True)))


def _watch(workers: list[int], give_up: float | None = None) -> tuple[WorkerWatch, FakeClock, Said]:
    clock, said = FakeClock(), Said()
    looks = iter(workers)
    return WorkerWatch(lambda: next(looks) > 0, said, give_up=give_up, clock=clock), clock, said


def test_it_warns_once_after_five_seconds_without_a_worker_then_when_one_comes() -> None:
    watch, clock, said = _watch([0] * 20 + [2, 2])
    for _ in range(int(WARN_AFTER / LOOK_EVERY)):  # 0 s .. 4 s: nothing yet
        watch()
        clock.advance(LOOK_EVERY)
    assert said.lines == []
    watch()  # 5 s
    assert said.lines == [
        (
            "no worker has been seen on this broker in 5 s; start one with"
            " `gamebatch worker` (still waiting)",
            True,
        )
    ]
    for _ in range(5):  # no second warning while it keeps waiting
        clock.advance(LOOK_EVERY)
        watch()
    assert len(said.lines) == 1
    while said.lines[-1][1]:  # a worker comes: said once, and not lasting
        clock.advance(LOOK_EVERY)
        watch()
    assert said.lines[-1] == ("a worker is here now: the job goes on", False)


def test_it_looks_at_most_once_a_second() -> None:
    watch, clock, said = _watch([0, 0])  # a third look would run out of answers
    watch()
    for _ in range(50):
        clock.advance(LOOK_EVERY / 50)
        watch()
    watch()
    assert said.lines == []


def test_with_workers_it_says_nothing() -> None:
    watch, clock, said = _watch([1] * 100, give_up=2)
    for _ in range(60):
        watch()
        clock.advance(LOOK_EVERY)
    assert said.lines == []


def test_wait_for_workers_gives_up_with_exit_status_3() -> None:
    watch, clock, _ = _watch([0] * 10, give_up=3)
    for _ in range(3):
        watch()
        clock.advance(LOOK_EVERY)
    with pytest.raises(NoWorkers, match=r"in 3 s; .* \(--wait-for-workers 3\)") as raised:
        watch()
    assert raised.value.exit_code == 3 and "\n" not in str(raised.value)


def test_a_worker_seen_restarts_the_count() -> None:
    watch, clock, said = _watch([0, 0, 1, 0, 0, 0], give_up=3)
    for _ in range(6):  # 0, 1: none; 2: one; 3, 4, 5: none for 2 s only
        watch()
        clock.advance(LOOK_EVERY)
    assert said.lines == []
