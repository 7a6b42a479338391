"""The workflows on jobs as a whole: `submit` one input without waiting, `status` of one job
or of every job, `cancel`."""

from __future__ import annotations

from typing import Any

import msgspec

from pipeline.app.cluster import cluster, workers_alive
from pipeline.app.collect import check_job_id
from pipeline.app.solve import check_readable
from pipeline.config import Settings
from pipeline.data import producer
from pipeline.data.objects import Place
from pipeline.errors import GamebatchError, UnknownJob
from pipeline.games.problem import Problem


class SubmitRequest(msgspec.Struct, frozen=True):
    """`submit`: one input to queue, in a lane."""

    problem: Problem
    input: Place
    lane: str = "auto"


class Queued(msgspec.Struct, frozen=True):
    """A queued job: its id, and one line on what was queued."""

    job_id: str
    summary: str


class JobsView(msgspec.Struct, frozen=True):
    """Job views, oldest first, and the live workers' names (None: not known here)."""

    rows: list[dict[str, Any]]
    workers: list[str] | None = None


def submit(settings: Settings, request: SubmitRequest) -> Queued:
    """Queue every chunk of one input (no worker started here) and say what was queued."""
    check_readable(request.input)
    with cluster(settings, workers=False) as c:
        lane = producer.choose_lane(request.input, c.settings, request.lane)
        how = producer.Production(lane=lane)
        job = producer.submit(request.problem, request.input, c.store, c.send, c.settings, how=how)
    return Queued(job.job_id, f"{job.total} cases in {job.chunks} chunks ({job.queued} queued)")


def status(settings: Settings, job: str | None) -> JobsView:
    """One job's view, or every job's with the live workers."""
    if job:
        check_job_id(job)
    with cluster(settings, workers=False) as c:
        found = c.jobs.views([job] if job else None)
        alive = None if job else workers_alive(c)
    if job and found[0] is None:
        raise UnknownJob(f"job {job} does not exist")
    return JobsView([row for row in found if row is not None], alive)


def cancel(settings: Settings, job: str) -> None:
    """Stop a job that has not ended: its queued chunks and answers dropped."""
    check_job_id(job)
    with cluster(settings, workers=False) as c:
        cancelled = c.jobs.cancel(job)
    if not cancelled.found:
        raise UnknownJob(f"job {job} does not exist")
    if cancelled.ended:
        raise GamebatchError(f"job {job} has already ended ({cancelled.ended})")
