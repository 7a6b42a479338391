"""The interface every front calls (the CLI, client mode's other side): one method per
workflow, a request in and a result out; `OnCluster` runs them on the configured broker or
the embedded default, and client mode's backend runs them on a server."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # each workflow is loaded when it runs: a one-case solve loads no grading
    from pipeline.app.collect import Collected, CollectRequest
    from pipeline.app.grade import Graded, GradeRequest
    from pipeline.app.hack import Hacked, HackRequest
    from pipeline.app.jobs import JobsView, Queued, SubmitRequest
    from pipeline.app.judge import JudgeRequest
    from pipeline.app.package_grade import PackageGradeRequest
    from pipeline.app.solve import Report, Solved, SolveRequest
    from pipeline.app.verify import VerifyRequest
    from pipeline.config import Settings


@dataclass(frozen=True)
class Concluded:
    """A workflow's summary, a line each, and its exit status."""

    lines: list[str]
    status: int


class Backend(Protocol):
    """Where the workflows run."""

    def solve(self, request: SolveRequest) -> Solved: ...
    def submit(self, request: SubmitRequest) -> Queued: ...
    def collect(self, request: CollectRequest) -> Collected: ...
    def status(self, job: str | None) -> JobsView: ...
    def cancel(self, job: str) -> None: ...
    def grade(self, request: GradeRequest) -> Graded: ...
    def judge(self, request: JudgeRequest) -> Graded: ...
    def hack(self, request: HackRequest) -> Hacked: ...
    def verify(self, request: VerifyRequest) -> Concluded: ...
    def grade_package(self, request: PackageGradeRequest) -> Concluded: ...


class OnCluster:
    """The workflows on a cluster: the configured broker, or the embedded default. `report`
    hears the lines for the user (errors of inputs skipped, warnings, notes)."""

    def __init__(self, settings: Settings, report: Report) -> None:
        self.settings, self.report = settings, report

    def solve(self, request: SolveRequest) -> Solved:
        from pipeline.app.solve import solve

        return solve(self.settings, request, self.report)

    def submit(self, request: SubmitRequest) -> Queued:
        from pipeline.app.jobs import submit

        return submit(self.settings, request)

    def collect(self, request: CollectRequest) -> Collected:
        from pipeline.app.cluster import cluster
        from pipeline.app.collect import collect_job

        request.check()
        with cluster(self.settings) as c:
            return collect_job(c, request)

    def status(self, job: str | None) -> JobsView:
        from pipeline.app.jobs import status

        return status(self.settings, job)

    def cancel(self, job: str) -> None:
        from pipeline.app.jobs import cancel

        cancel(self.settings, job)

    def grade(self, request: GradeRequest) -> Graded:
        from pipeline.app.grade import grade

        return grade(self.settings, request, self.report)

    def judge(self, request: JudgeRequest) -> Graded:
        from pipeline.app.judge import judge

        return judge(self.settings, request, self.report)

    def hack(self, request: HackRequest) -> Hacked:
        from pipeline.app.hack import hack

        return hack(self.settings, request, self.report)

    def verify(self, request: VerifyRequest) -> Concluded:
        from pipeline.app.verify import summary, verify

        found = verify(self.settings, request, self.report)
        return Concluded(summary(found), 0 if found.ok else 1)

    def grade_package(self, request: PackageGradeRequest) -> Concluded:
        from pipeline.app.package_grade import grade_package, summary

        found = grade_package(self.settings, request, self.report)
        return Concluded(summary(found), found.status)
