"""How a command with local workers shares a big input's chunks with them: each chunk is
either queued for the workers or solved by the command, never both."""

from __future__ import annotations

from pipeline.sharing import Sharing

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
