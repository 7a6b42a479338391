"""The collector: waits for a job's answers and writes them, in input order, to a result file."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO, TextIO, cast

from pipeline.data import files, objects
from pipeline.data.messages import answer_lines
from pipeline.data.objects import ObjectUrl
from pipeline.errors import JobCancelled, JobFailed, JobLost
from pipeline.games.problem import Problem
from pipeline.store.jobstate import JobCounters, JobState
from pipeline.store.protocol import Store

INVALID_WORD = "INVALID"  # the result line of a case that --keep-going let through
FIRST_POLL = 0.002  # seconds before the second look at a job; then 1.5 times longer each time


class CollectTimeout(JobFailed):
    """The job did not finish in time."""


def wait_for(
    store: Store,
    job_id: str,
    *,
    poll: float,
    timeout: float | None = None,
    on_progress: Callable[[JobCounters], None] = lambda p: None,
    idle: Callable[[], bool] = lambda: False,
) -> JobCounters:
    """Poll until every chunk has answers; raise JobFailed on failure, loss or timeout.

    The first polls come quickly and slow down to `poll`: a one-case job is seen done within
    milliseconds, a long one costs no more round trips than before. Between two polls
    `idle` may do some of the work: when it did (True), the next poll comes at once."""
    deadline = None if timeout is None else time.monotonic() + timeout
    pause = FIRST_POLL
    while True:
        progress = store.progress(job_id)
        if progress is None:
            raise JobLost(f"job {job_id} does not exist (finished long ago, or Redis lost it)")
        on_progress(progress)
        if progress.state in (JobState.COMPLETE, JobState.DONE):
            return progress
        if progress.state == JobState.CANCELLED:
            raise JobCancelled(f"job {job_id} was cancelled")
        if progress.state == JobState.FAILED:
            first = min(progress.failures)
            raise JobFailed(f"job {job_id} failed: {progress.failures[first]}")
        if deadline is not None and time.monotonic() >= deadline:
            raise CollectTimeout(
                f"job {job_id} not finished after {timeout:g} s"
                f" ({progress.done} of {progress.total or '?'} cases)"
            )
        if not idle():
            time.sleep(min(pause, poll))
            pause *= 1.5


def write_result(
    store: Store, job_id: str, problem: Problem, progress: JobCounters, out: TextIO
) -> None:
    """Write one answer word per case, in input order."""
    words = answer_lines(problem.answers, INVALID_WORD)
    written = 0
    for digits in store.iter_answers(job_id, progress.chunks or 0):
        out.write(digits.translate(words))
        written += len(digits)
    if written != progress.total:
        raise JobFailed(f"job {job_id} has {written} answers for {progress.total} cases")


def write_result_file(
    store: Store, job_id: str, problem: Problem, progress: JobCounters, path: Path | ObjectUrl
) -> None:
    """The result file (or object), complete or not at all."""
    write_whole(path, lambda out: write_result(store, job_id, problem, progress, out))


def write_text(path: Path | ObjectUrl, text: str) -> None:
    """A file (or object) of this text, complete or not at all."""
    write_whole(path, lambda out: out.write(text))


def write_whole(path: Path | ObjectUrl, fill: Callable[[TextIO], object]) -> None:
    """A file (or object) filled as text, complete or not at all."""
    if not isinstance(path, ObjectUrl):
        files.write_atomically(path, fill)
        return
    with objects.write_whole(path) as raw:
        fill(cast(TextIO, _Utf8(raw)))  # what results are written with: write()


class _Utf8:
    """A text stream over a binary one (what writers of results call: write)."""

    def __init__(self, raw: BinaryIO) -> None:
        self.raw = raw

    def write(self, text: str) -> int:
        self.raw.write(text.encode())
        return len(text)
