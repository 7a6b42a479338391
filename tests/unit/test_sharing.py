"""How a command with local workers shares a big input's chunks with them: each chunk is
either queued for the workers or solved by the command, never both."""

from __future__ import annotations

from pipeline.config import Settings
from pipeline.memstore import MemoryStore
from pipeline.messages import ChunkPayload
from pipeline.service import Cluster

JOB = "strgame-" + "b" * 24


def test_chunks_are_solved_here_while_messages_wait_and_queued_otherwise() -> None:
    store = MemoryStore()
    store.open_job(JOB, {"problem": "strgame"})
    for index in range(4):
        store.put_chunk(JOB, index, ChunkPayload("strgame", index + 1, [[1, "a"]]).encode())
    store.finish_production(JOB, 4, 4)
    c = Cluster(Settings(), store, lambda: None, local_workers=2)
    waiting = iter([0, 1, 3, 0])  # the workers take the first message late, then catch up
    queued: list[int] = []
    c.queued_messages = lambda: next(waiting)  # type: ignore[method-assign]
    c.send = lambda job_id, index: queued.append(index)  # type: ignore[method-assign]
    share = c.run_when_busy()
    for index in range(4):
        share(JOB, index)
    assert queued == [0, 3]
    assert store.answered(JOB) == {1, 2}  # by this process, through the runner's records
    store.save_answers(JOB, 0, "1")  # as if the workers had answered the queued ones
    store.save_answers(JOB, 3, "1")
    assert list(store.iter_answers(JOB, 4)) == ["1", "0", "0", "1"]  # here: "a" is Pure
