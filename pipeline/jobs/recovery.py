"""Re-queueing chunks whose worker vanished: by every waiting collector, and by workers."""

from __future__ import annotations

import time
from collections.abc import Callable

from pipeline.config import LANES, Settings, lane_queue
from pipeline.data.producer import Send
from pipeline.store.jobstate import JobCounters, JobState
from pipeline.store.protocol import Store


def queued_messages(store: Store, settings: Settings) -> int:
    """Messages waiting in every lane."""
    return sum(store.queue_length(lane_queue(settings, lane)) for lane in LANES)


class Recovery:
    """Called on every poll; re-queues abandoned chunks at most every `lease/3` seconds.

    - A started chunk whose lease expired without answers lost its worker (a whole machine,
      or a task that failed on a Redis outage): it is queued again, once per start.
    - When the job made no progress for `stall_seconds`, no message is left in the queue and
      no worker holds any chunk, the remaining chunks' messages were lost: queue them again.
    Duplicates are harmless: answers are stored once.
    """

    def __init__(
        self,
        store: Store,
        send: Send,
        queued: Callable[[], int],
        *,
        lease: float,
        stall: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.send = send
        self.queued = queued  # messages waiting in the broker
        self.every = lease / 3
        self.stall = stall
        self.requeued = 0
        self.clock = clock
        self._next = clock() + self.every
        self._last_done = -1
        self._last_change = clock()

    def tick(self, progress: JobCounters) -> None:
        """Look for abandoned chunks when it is time."""
        now = self.clock()
        if progress.done_chunks != self._last_done:
            self._last_done, self._last_change = progress.done_chunks, now
        if now < self._next or progress.chunks is None:
            return
        self._next = now + self.every
        indexes = set(self.store.abandoned(progress.job_id))
        if now - self._last_change > self.stall and self.queued() == 0:
            if not self.store.leased(progress.job_id):
                indexes.update(self.store.unleased(progress.job_id))
            self._last_change = now
        for index in sorted(indexes):
            self.send(progress.job_id, index)
        self.requeued += len(indexes)


def sweep(store: Store, send: Send, settings: Settings) -> int:
    """One pass over the unfinished jobs, needing no state of its own (workers run it); the
    finished ones are not read again at each round (see JobStore.sweep_candidates).

    Re-queues the chunks whose lease expired without answers and, in a job with no answers
    for `stall_seconds` while no message waits and no worker holds any of its chunks, every
    chunk still waiting; removes a job idle that long while still producing with no producer
    holding it (its producer died: no collector could finish it). Returns how many chunks
    were queued.
    """
    sent, now = 0, store.now()
    candidates = store.sweep_candidates()
    unfinished, finished = [], []
    for job_id, progress in zip(candidates, store.progress_of(candidates), strict=True):
        if progress is None or progress.state not in (JobState.PRODUCING, JobState.RUNNING):
            finished.append(job_id)
            continue
        last = progress.answered or progress.started or progress.created
        idle = last is not None and now - last > settings.stall_seconds
        if progress.state == JobState.PRODUCING and idle and store.abandon_production(job_id, ""):
            finished.append(job_id)  # an orphan: its producer died; a re-run produces it anew
            continue
        unfinished.append(job_id)
        indexes = set(store.abandoned(job_id))
        if idle and queued_messages(store, settings) == 0 and not store.leased(job_id):
            indexes.update(store.unleased(job_id))
        for index in sorted(indexes):
            send(job_id, index)
        sent += len(indexes)
    store.note_swept(unfinished, finished)
    return sent
