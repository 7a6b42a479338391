"""Client mode (`--server URL`): the workflows run by a `gamebatch serve` over HTTP, behind
the same interface as a cluster (`pipeline.app.backend`)."""

from __future__ import annotations

import io
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

import httpx

from pipeline import escape
from pipeline.app.backend import Concluded
from pipeline.app.collect import Collected, CollectRequest
from pipeline.app.grade import Graded, GradeRequest, grade
from pipeline.app.hack import Hacked, HackRequest
from pipeline.app.jobs import JobsView, Queued, SubmitRequest
from pipeline.app.judge import JudgeLimits, JudgeRequest
from pipeline.app.package_grade import PackageGradeRequest
from pipeline.app.solve import Report, Solved, SolveRequest
from pipeline.app.verify import VerifyRequest
from pipeline.client.http import Client, RemoteInputError, ended_well
from pipeline.config import Settings
from pipeline.data.files import atomic_write
from pipeline.data.objects import ObjectUrl, Place
from pipeline.errors import GamebatchError, UsageError
from pipeline.grading.answers import Answers, Solver
from pipeline.grading.report_files import ReportFiles
from pipeline.grading.reports import REPORT_VERSION
from pipeline.grading.rules import Test
from pipeline.hacking.report import hacks_of
from pipeline.jobs.view import EXTRAS, FIELDS
from pipeline.packages import package as packages
from pipeline.progress import ProgressBar
from pipeline.store.jobstate import FINISHED


class OverHttp:
    """The workflows in client mode: run by a `gamebatch serve` at `url` (the backend the CLI
    chooses for --server URL). `report` hears the lines for the user."""

    def __init__(
        self, url: str, token_file: Path | None, settings: Callable[[], Settings], report: Report
    ) -> None:
        self.url, self.token_file, self.report = url, token_file, report
        self._settings = settings  # loaded only by the workflows that read them

    def _client(self) -> Client:
        return Client(self.url, self.token_file)

    def submit(self, request: SubmitRequest) -> Queued:
        path = _file(request.input)
        client = self._client()
        try:
            name = request.problem.name
            job = client.upload(path, name, lane=request.lane, keep_going=False)
        finally:
            client.close()
        summary = f"uploaded {request.input} ({job.get('size', 0)} bytes): {job['state']}"
        return Queued(job["id"], summary)

    def status(self, job: str | None) -> JobsView:
        client = self._client()
        try:
            jobs = [client.job(job)] if job else client.call("GET", "/v1/jobs")["jobs"]
        finally:
            client.close()
        # the job views alone, as a cluster has them
        return JobsView([{k: v for k, v in j.items() if k in FIELDS or k in EXTRAS} for j in jobs])

    def cancel(self, job: str) -> None:
        client = self._client()
        try:
            client.call("DELETE", f"/v1/jobs/{job}")
        finally:
            client.close()

    def collect(self, request: CollectRequest) -> Collected:
        client = self._client()
        output = _file(request.output)
        progress = ProgressBar("collect", enabled=not request.quiet)
        try:
            job = ended_well(client.follow(client.job(request.job), progress))
            client.download(job, output)
        finally:
            progress.close()
            client.close()
        return _invalid(job)

    def solve(self, request: SolveRequest) -> Solved:
        """Upload every input, follow each job's events with one progress bar, download each."""
        targets = [(_file(t.input), _result(t.output)) for t in request.targets()]
        client = self._client()
        progress = ProgressBar("solve", enabled=not request.quiet)
        status = 0
        problem, lane, keep_going = request.problem.name, request.lane, request.keep_going
        try:
            uploaded = [
                (path, output, client.upload(path, problem, lane=lane, keep_going=keep_going))
                for path, output in targets
            ]
            for path, output, job in uploaded:
                try:
                    ended = ended_well(client.follow(job, progress), path)
                except RemoteInputError as exc:
                    self.report(f"error: {exc}")
                    status = 2
                    continue
                client.download(ended, output)
                invalid = _invalid(ended)
                if invalid.error:
                    self.report(f"error: {invalid.error}")
                status = max(status, invalid.status)
        finally:
            progress.close()
            client.close()
        return Solved(status)

    def grade(self, request: GradeRequest) -> Graded:
        """The answers from the server, the files compared here."""
        return grade(self._settings(), request, self.report, self._answers(request))

    def _answers(self, request: GradeRequest) -> Solver:
        """The answers of the tests without answer files from the server: each test input
        uploaded (a known one is answered from its earlier job) and its result downloaded;
        a refused input as its error line."""

        def solve(tests: list[Test]) -> list[Answers]:
            client = self._client()
            progress = ProgressBar("answers", enabled=not request.quiet)
            found: list[Answers] = []
            try:
                for test in tests:
                    try:
                        job = client.upload(
                            test.input, request.problem.name, lane="auto", keep_going=False
                        )
                        computed = job["state"] != "done"
                        text = io.StringIO()
                        client.download(ended_well(client.follow(job, progress), test.input), text)
                    except RemoteInputError as exc:
                        found.append(f"error: {exc}")
                        continue
                    found.append((text.getvalue().splitlines(), computed))
            finally:
                progress.close()
                client.close()
            return found

        return solve

    def judge(self, request: JudgeRequest) -> Graded:
        """The tests and programs sent as one archive, judged by the server's workers; its
        reports written where asked, its summary printed."""
        prepared = request.prepare(self._settings(), self.report, sandbox=False)
        if request.lazy:
            raise UsageError("--lazy judges on a cluster (--broker or the embedded default)")
        if any(files.version != REPORT_VERSION for files in request.reporting.files):
            raise UsageError("--server writes the server's JSON report (version 2)")
        params: dict[str, Any] = {
            "problem": request.problem.name,
            "keep_going": int(request.keep_going),
            **_limits(request.limits),
        }
        client = self._client()
        try:
            tests = prepared.tests or []
            grading = _run_archive(client, "gradings", params, tests, prepared.programs)
            report = client.call("GET", f"/v1/gradings/{grading['id']}/report.json")
            for files in request.reporting.files:
                _write_reports(client, grading["id"], files)
        finally:
            client.close()
        return _graded(report, request.reporting.summary, prepared.notes)

    def verify(self, request: VerifyRequest) -> Concluded:
        """The package sent as one archive and verified by the server's workers; its JSON
        report written where asked."""
        with packages.opened(request.package) as root:
            packages.read(root, self._settings().judge.languages)  # refused here, not there
            params = {"max_time": request.max_seconds}
            return self._package_run(
                "verifications", params, root, {}, {"report.json": request.json}
            )

    def grade_package(self, request: PackageGradeRequest) -> Concluded:
        """The package and the programs (or output files) sent as one archive, graded by the
        server's workers; its reports written where asked."""
        folders = {"progs": request.programs} if request.programs else {}
        if request.submissions is not None:
            folders["subs"] = request.submissions
        params = {"max_time": request.max_seconds, **_limits(request.limits)}
        reports = {
            "report.json": request.json,
            "scoreboard.csv": request.scoreboard,
            "junit": request.junit,
        }
        with packages.opened(request.package) as root:
            packages.read(root, self._settings().judge.languages)
            return self._package_run("package-gradings", params, root, folders, reports)

    def _package_run(
        self,
        route: str,
        params: dict[str, Any],
        root: Path,
        folders: dict[str, Path],
        reports: dict[str, Path | None],
    ) -> Concluded:
        client = self._client()
        try:
            fill = lambda tar: _pack_package(tar, root, folders)  # noqa: E731
            found = _posted(client, route, params, fill)
            for name, target in reports.items():
                if target is not None:
                    response = client.http.get(f"/v1/{route}/{found['id']}/{name}")
                    response.raise_for_status()
                    atomic_write(target, response.text)
        finally:
            client.close()
        summary = found.get("summary") or {}
        return Concluded(list(summary.get("lines", [])), 0 if summary.get("ok") else 1)

    def hack(self, request: HackRequest) -> Hacked:
        """The programs (and tests) sent as one archive and searched by the server's
        workers; its JSON report, and the hacks it describes, written as a search here would."""
        prepared = request.prepare(self._settings(), self.report, sandbox=False)
        budget = request.budget
        params: dict[str, Any] = {
            "problem": request.problem.name,
            "seed": request.seed,
            "budget": budget.seconds,
            "cases": budget.cases,
            "largest": budget.largest,
            **_limits(request.limits),
        }
        client = self._client()
        try:
            tests = prepared.tests or []
            search = _run_archive(client, "hacks", params, tests, prepared.programs)
            doc: dict[str, Any] = client.call("GET", f"/v1/hacks/{search['id']}/report.json")
        finally:
            client.close()
        hacks = hacks_of(request.problem, doc)
        request.write(hacks, doc)
        return Hacked(doc, hacks)


def _file(place: Place) -> Path:
    """Client mode uploads files and downloads into files: object URLs are the cluster's."""
    if isinstance(place, ObjectUrl):
        raise UsageError("--server takes files; object URLs are read by a cluster (--broker)")
    return place


def _result(output: Place | TextIO | None) -> Path | TextIO | None:
    return _file(output) if isinstance(output, Path | ObjectUrl) else output


def _invalid(job: dict[str, Any]) -> Collected:
    """What a finished job says of its invalid cases."""
    invalid = int(str(job.get("invalid") or 0))
    if not invalid:
        return Collected()
    where = job["links"]["errors"]
    return Collected(invalid, f"{invalid} invalid cases marked INVALID (their errors: GET {where})")


def _limits(limits: JudgeLimits) -> dict[str, Any]:
    """The limits as a grading's (or search's) parameters."""
    given = {
        "time_limit": limits.time_limit,
        "memory_limit": limits.memory_limit,
        "output_limit": limits.output_limit,
    }
    return {k: v for k, v in given.items() if v is not None}


def _run_archive(
    client: Client, route: str, params: dict[str, Any], tests: list[Any], programs: list[Any]
) -> dict[str, Any]:
    """POST the tests and programs as one archive to /v1/ROUTE, and the grading (or hack
    search) once it is done (else one line saying how it ended)."""
    return _posted(client, route, params, lambda tar: _pack(tar, tests, programs))


def _posted(
    client: Client, route: str, params: dict[str, Any], fill: Callable[[tarfile.TarFile], None]
) -> dict[str, Any]:
    """POST an archive that `fill` writes to /v1/ROUTE, and what it made once it is done
    (else one line saying how it ended)."""
    with tempfile.TemporaryFile() as archive:
        with tarfile.open(fileobj=archive, mode="w:gz") as tar:
            fill(tar)
        archive.seek(0)
        found: dict[str, Any] = client.call(
            "POST",
            f"/v1/{route}",
            params=params,
            content=archive.read(),
            timeout=httpx.Timeout(30.0, write=None),
        )
    found = _until_ended(client, found)
    if found["state"] != "done":
        what = {"hacks": "hack search", "verifications": "verification"}.get(route, "grading")
        raise GamebatchError(f"the {what} {found['state']}: {found.get('error', '')}")
    return found


def _pack(tar: tarfile.TarFile, tests: list[Any], programs: list[Any]) -> None:
    """The bulk layout with progs/: tests/NAME.in (.ans), a problem package's as
    tests/sample/... and tests/secret/..., each program's files under progs/."""
    for test in tests:
        stem = test.name if "/" in test.name else test.input.stem  # a package's keep
        tar.add(test.input, f"tests/{stem}.in")  # their folders: names may repeat
        if test.answers is not None:
            tar.add(test.answers, f"tests/{stem}.ans")
    for program in programs:
        for path, name in program.files():
            tar.add(path, f"progs/{name}")


def _pack_package(tar: tarfile.TarFile, root: Path, folders: dict[str, Path]) -> None:
    """A package's regular files under package/, and each of `folders` (progs/, subs/)'s
    under its name: links are not followed, hidden files left out."""
    for name, where in {"package": root, **folders}.items():
        for path in sorted(where.rglob("*")):
            relative = path.relative_to(where)
            if path.is_symlink() or not path.is_file():
                continue
            if not any(part.startswith(".") for part in relative.parts):
                tar.add(path, f"{name}/{relative.as_posix()}", recursive=False)


def _until_ended(client: Client, grading: dict[str, Any]) -> dict[str, Any]:
    while grading["state"] not in FINISHED:
        time.sleep(0.3)
        grading = client.call("GET", f"/v1/gradings/{grading['id']}")
    return grading


def _write_reports(client: Client, grading_id: str, files: ReportFiles) -> None:
    routes = {"json": "report.json", "junit": "junit"}
    if files.scoreboard is not None:
        routes["scoreboard"] = (
            "scoreboard.json" if files.scoreboard.suffix == ".json" else "scoreboard.csv"
        )
    for kind, route in routes.items():
        target = getattr(files, kind)
        if target is None:
            continue
        try:
            response = client.http.get(f"/v1/gradings/{grading_id}/{route}")
        except httpx.HTTPError as exc:
            raise GamebatchError(f"cannot reach {client.url}: {exc}") from None
        response.raise_for_status()
        atomic_write(target, response.text)


def _graded(report: dict[str, Any], out: TextIO | None, notes: list[str]) -> Graded:
    """The server's verdicts as `grade` prints them (on `out`); wrong unless all accepted."""
    wrong = False
    for sub in report["submissions"]:
        wrong = wrong or sub["accepted"] < sub["total"]
        if out is None:
            continue
        out.write(f"{escape.terminal(sub['path'])}: {sub['accepted']}/{sub['total']} accepted\n")
        for case in sub.get("mismatches", [])[:3]:
            found = escape.terminal(str(case.get("found")))
            out.write(f"  case {case['index']}: {case['verdict']} ({found})\n")
    board = report.get("scoreboard", [])
    for rank, row in enumerate(board, 1):
        score = f"{row['score']:g}/{row['max_score']:g}"
        if out is not None:
            out.write(f"{rank:>4}. {escape.terminal(row['contestant'])}: {score}\n")
    cases_wrong = sum(s["total"] - s["accepted"] for s in report["submissions"])
    tests = len({s.get("test") for s in report["submissions"]})
    return Graded(
        int(wrong), not wrong, tests, len(report["submissions"]), len(board), cases_wrong, {}, notes
    )
