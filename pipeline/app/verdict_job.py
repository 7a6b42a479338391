"""One verdict job's life, for comparing outputs, judging programs and hacking alike: named by
its files, opened (or found produced), produced within a window (possibly ahead of time),
waited for, its verdicts gathered per file, then kept a short while."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from pipeline.app.cluster import Cluster
from pipeline.app.collect import wait
from pipeline.data.producer import Queuer, Send, Window
from pipeline.errors import UsageError
from pipeline.grading import comparing
from pipeline.grading.verdicts import FileVerdicts
from pipeline.progress import ProgressBar
from pipeline.store.jobstate import JobCounters

KEPT_SECONDS = 600  # a gathered verdict job, for gradings of the same files

Produce = Callable[[Queuer], tuple[int, int]]
"""Queue the job's chunks without verdicts through the queuer: (chunks, cases)."""


@dataclass(frozen=True)
class VerdictJob:
    """What kind of verdict job, of which game, and how its chunks are cut."""

    kind: str  # "compare" or "judge"
    problem: str
    max_cases: int  # cases of a chunk at most
    programs: int = 0  # a judging's programs


def verdicts(
    c: Cluster,
    job: VerdictJob,
    todo: Sequence[comparing.Output],
    produce: Produce,
    progress: ProgressBar,
    *,
    send: Send | None = None,
    done: Callable[[JobCounters], None] = lambda counters: None,
) -> Iterator[FileVerdicts]:
    """The verdicts of `todo`, in order, from one job on the cluster; `send` queues its chunks
    (default: to the workers), and `done` hears the job's counters once every chunk is done."""
    job_id = start(c, job, todo, produce, send=send)
    done(wait(c, job_id, timeout=None, progress=progress))
    yield from comparing.gather(c.store, job_id, todo)
    # the files' verdicts are kept by their keys now: the job is needed only by another
    # grading of the same files that waits on it too, so it expires soon (were the last
    # verdicts not stored after all, a re-run compares just those again)
    c.store.finish(job_id, KEPT_SECONDS)


def start(
    c: Cluster,
    job: VerdictJob,
    todo: Sequence[comparing.Output],
    produce: Produce,
    *,
    send: Send | None = None,
) -> str:
    """Open the job of `todo` and queue its chunks, unless its production was finished
    already (by another grading of the same files, or ahead of time); its id."""
    job_id = comparing.job_id_for(job.problem, todo, kind=job.kind)
    s, store = c.settings, c.store
    produced = comparing.open_job(
        store, job_id, job.problem, len(todo), job.max_cases, kind=job.kind, programs=job.programs
    )
    if not produced:
        window = Window(store, job_id, s, lambda p: c.check(), chunks=s.chunk.window)
        try:
            queue = Queuer(store, send or c.send, job_id, window if s.chunk.window else None)
            chunks, cases = produce(queue)
        except UsageError:
            store.delete(job_id)
            raise
        comparing.finish_production(store, job_id, chunks, cases)
    return job_id
