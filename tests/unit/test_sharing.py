"""How a command with local workers shares a big input's chunks with them: each chunk is
either queued for the workers or solved by the command, never both."""

from __future__ import annotations

from pipeline.local.sharing import Alone, Sharing

JOB = "strgame-" + "b" * 24


class _Queue:
    """Messages as a broker's list: pushed at the front, taken by workers from the back."""

    def __init__(self) -> None:
        self.messages: list[str] = []

    def push(self, job_id: str, index: int) -> str:
        self.messages.insert(0, f"task-{index}")
        return self.messages[0]

    def take_newest(self, ids: list[str]) -> str | None:
        if self.messages and self.messages[0] in ids:
            return self.messages.pop(0)
        return None


def test_chunks_run_here_while_messages_wait_and_are_queued_otherwise() -> None:
    queue, ran = _Queue(), []
    waiting = iter([0, 1, 3, 0])  # the workers take the first message late, then catch up
    share = Sharing(
        queue.push, lambda j, i: ran.append(i), lambda: next(waiting), queue.take_newest
    )
    for index in range(4):
        share.send(JOB, index)
    assert (queue.messages, ran) == (["task-3", "task-0"], [1, 2])


def test_waiting_messages_are_taken_back_newest_first_until_a_worker_has_one() -> None:
    queue, ran = _Queue(), []
    share = Sharing(queue.push, lambda j, i: ran.append(i), lambda: 0, queue.take_newest)
    for index in range(4):
        share.send(JOB, index)
    queue.messages.pop()  # a worker takes chunk 0's message
    assert share.take_back(JOB) and share.take_back(JOB)
    assert ran == [3, 2] and queue.messages == ["task-1"]
    queue.messages.pop()  # and chunk 1's, before the command looks again
    assert not share.take_back(JOB)
    assert not share.take_back(JOB) and not share.take_back("other-job")
    assert ran == [3, 2]


def test_a_job_solved_alone_runs_each_chunk_once_on_its_threads() -> None:
    import threading
    import time

    ran: list[int] = []
    running, most, lock = [0], [0], threading.Lock()

    def run(job_id: str, index: int) -> None:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.01)
        with lock:
            running[0] -= 1
            ran.append(index)

    with Alone(run, 3) as send:
        for index in range(20):
            send(JOB, index)
    assert sorted(ran) == list(range(20))  # every run ended before leaving
    assert 1 < most[0] <= 3  # on the threads, never more at once


def test_a_failed_run_of_a_job_solved_alone_is_raised_once_the_others_end() -> None:
    import pytest

    ran: list[int] = []

    def run(job_id: str, index: int) -> None:
        if index == 2:
            raise RuntimeError("Redis went away")
        ran.append(index)

    with pytest.raises(RuntimeError, match="Redis went away"), Alone(run, 2) as send:
        for index in range(6):
            send(JOB, index)
    assert 2 not in ran
    one = Alone(run, 1)  # one thread: the run is the caller's own
    with pytest.raises(RuntimeError):
        one(JOB, 2)
