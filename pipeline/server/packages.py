"""Problem packages over HTTP: an archive holding `package/` (and `progs/` or `subs/` for a
grading) becomes a verification or a package grading, run by a runner through the same
workflows as `gamebatch verify` and `grade -p PACKAGE`. Each is a grading record (`package`
set to its kind), so that gradings' events, cancel, resume and retention hold for it; its
reports are files of its folder."""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from pipeline.app.judge import JudgeLimits
from pipeline.config import Settings
from pipeline.errors import UsageError
from pipeline.server import gradings
from pipeline.server.auth import Caller
from pipeline.server.context import ApiError, ServerState, needs, query
from pipeline.server.lifecycle import run_recorded
from pipeline.server.spool import Spool, SpoolFile
from pipeline.server.uploads import receive
from pipeline.store.jobstate import JobState
from pipeline.store.records import Records

log = logging.getLogger("gamebatch.server")

VERIFY, GRADE = "verify", "grade"
ROUTES = {VERIFY: "verifications", GRADE: "package-gradings"}
REPORTS = {  # kind -> route -> (file in the record's folder, media type)
    VERIFY: {"report.json": ("report.json", "application/json")},
    GRADE: {
        "report.json": ("report.json", "application/json"),
        "junit": ("junit.xml", "application/xml"),
        "scoreboard.csv": ("scoreboard.csv", "text/csv; charset=utf-8"),
    },
}
_PARAMS = {VERIFY: ("max_time",), GRADE: ("max_time", *gradings.LIMITS)}
MAX_TIME = 60.0  # seconds: the highest cap on accepted runs where a package states no limit


@needs("submit")
async def create_verification(service: ServerState, request: Request, caller: Caller) -> Response:
    """POST /v1/verifications: an archive of `package/` (`max_time`: accepted runs' cap)."""
    return await _create(service, request, caller, VERIFY)


@needs("submit")
async def create_grading(service: ServerState, request: Request, caller: Caller) -> Response:
    """POST /v1/package-gradings: an archive of `package/` and `progs/` or `subs/`."""
    return await _create(service, request, caller, GRADE)


async def _create(service: ServerState, request: Request, caller: Caller, kind: str) -> Response:
    params = _params(query(request, _PARAMS[kind]))
    records = await gradings.room(service)
    received = await receive(service, request, raw_only=True)
    try:
        given = json.dumps(params, sort_keys=True)
        named = hashlib.sha256(f"{received.sha256}:{kind}:{given}".encode()).hexdigest()
        record_id = f"{kind}.package-{named[:24]}"
        existing = await run_in_threadpool(records.get, record_id)
        if existing and existing.get("state") not in ("failed", "cancelled"):
            return JSONResponse(view(existing), 200)
        check = lambda root, settings: _check(kind, root, settings)  # noqa: E731
        await run_in_threadpool(gradings.unpack_into, service, received.path, record_id, check)
    finally:
        service.spool.discard(received.path)
    root = gradings.folder(service.spool, record_id) / "files" / "package"
    fields = {
        "problem": await run_in_threadpool(_name, root, service.settings),
        "owner": caller.name,
        "size": str(received.size),
        "package": kind,
        "params": given,
    }
    if not await run_in_threadpool(records.open, record_id, fields):
        return JSONResponse(view(await _record(service, record_id)), 200)
    await run_in_threadpool(records.event, "grading.created", record_id, {})
    service.runners.submit(PackageTask(record_id, kind, given))
    record = await _record(service, record_id)
    where = f"/v1/{ROUTES[kind]}/{record_id}"
    return JSONResponse(view(record), 201, headers={"Location": where})


def _params(found: dict[str, str]) -> dict[str, float]:
    """`max_time` (400 unless from 0.1 to MAX_TIME seconds) and the programs' limits."""
    params: dict[str, float] = gradings.limits_of(found)
    if "max_time" in found:
        try:
            seconds = float(found["max_time"])
        except ValueError:
            seconds = 0.0
        if not 0.1 <= seconds <= MAX_TIME:
            raise ApiError(400, f"max_time must be a number of seconds from 0.1 to {MAX_TIME:g}")
        params["max_time"] = seconds
    return params


def _check(kind: str, root: Path, settings: Settings) -> None:
    """An archive of a package (and, to grade, progs/ or subs/): the package is read."""
    from pipeline.packages import package as packages

    if not (root / "package").is_dir():
        raise UsageError("the archive needs a package/ folder (the problem package)")
    if kind == GRADE and (root / "progs").is_dir() == (root / "subs").is_dir():
        raise UsageError("the archive needs progs/ (programs) or subs/ (output files)")
    packages.read(root / "package", settings.judge.languages)


def _name(root: Path, settings: Settings) -> str:
    from pipeline.packages import package as packages

    return packages.read(root, settings.judge.languages).name


def view(record: dict[str, str]) -> dict[str, Any]:
    """A verification or package grading as clients see it: a grading's view, its kind, its
    parameters and its reports."""
    shown = gradings.view(record)
    kind = record.get("package", VERIFY)
    base = f"/v1/{ROUTES.get(kind, ROUTES[VERIFY])}/{record.get('id', '')}"
    shown["kind"] = "verification" if kind == VERIFY else "package-grading"
    shown["params"] = json.loads(record.get("params", "{}"))
    shown["links"] = {"self": base, **{name: f"{base}/{name}" for name in REPORTS.get(kind, {})}}
    return shown


async def _record(service: ServerState, record_id: str) -> dict[str, str]:
    record = await run_in_threadpool(service.records.of_kind("grading").get, record_id)
    if record is None or "package" not in record:
        raise ApiError(404, f"no verification or package grading {record_id}")
    return record


def _record_id(request: Request) -> str:
    record_id = str(request.path_params["grading"])
    if not record_id.startswith((f"{VERIFY}.", f"{GRADE}.")):
        raise ApiError(404, "not a verification's or a package grading's id")
    if gradings.ID.fullmatch(record_id) is None:
        raise ApiError(404, "not a verification's or a package grading's id")
    return record_id


@needs("read")
async def show(service: ServerState, request: Request, caller: Caller) -> Response:
    """GET /v1/verifications/{id} (or /v1/package-gradings/{id}): its state, then its
    summary."""
    return JSONResponse(view(await _record(service, _record_id(request))))


@needs("read")
async def report(service: ServerState, request: Request, caller: Caller) -> Response:
    """GET /v1/verifications/{id}/{report} (or a package grading's): a report file."""
    record = await _record(service, _record_id(request))
    reports = REPORTS[record["package"]]
    name = str(request.path_params["report"])
    path, media = gradings.report_file(service, record, name, reports)
    return SpoolFile(path, media_type=media)


class PackageTask:
    """A verification or package grading handed to a runner."""

    def __init__(self, record_id: str, kind: str, params: str) -> None:
        self.grading_id, self.kind, self.params = record_id, kind, params

    @classmethod
    def of_record(cls, record_id: str, record: dict[str, str]) -> PackageTask:
        """The task of a recorded one (to resume)."""
        return cls(record_id, record["package"], record.get("params", "{}"))

    def run(self, settings: Settings, records: Records, spool: Spool) -> None:
        """Verify or grade, and write the reports (never raises)."""
        run_recorded(
            records.of_kind("grading"),
            self.grading_id,
            lambda: ("done", self._summary(settings, spool)),
            begun={"state": JobState.RUNNING.value},
            events="grading.",
            shown=lambda text: gradings.in_archive(text, spool, self.grading_id),
        )

    def _summary(self, settings: Settings, spool: Spool) -> dict[str, str]:
        where = gradings.folder(spool, self.grading_id)
        files = where / "files"
        params = json.loads(self.params)
        said = lambda line: log.info("%s: %s", self.grading_id, line)  # noqa: E731
        if self.kind == VERIFY:
            from pipeline.app.verify import VerifyRequest, summary, verify

            asked = VerifyRequest(files / "package", where / "report.json", quiet=True)
            if "max_time" in params:
                asked = VerifyRequest(asked.package, asked.json, True, params["max_time"])
            verified = verify(settings, asked, said)
            lines, ok = summary(verified), verified.ok
        else:
            from pipeline.app.package_grade import PackageGradeRequest, grade_package
            from pipeline.app.package_grade import summary as graded_summary

            programs = files / "progs" if (files / "progs").is_dir() else None
            request = PackageGradeRequest(
                files / "package",
                programs,
                JudgeLimits.of(params),
                where / "report.json",
                where / "scoreboard.csv",
                where / "junit.xml",
                quiet=True,
                max_seconds=params.get("max_time", 10.0),
                submissions=None if programs else files / "subs",
            )
            graded = grade_package(settings, request, said)
            lines, ok = graded_summary(graded), graded.status == 0
        shown = gradings.in_archive(json.dumps({"ok": ok, "lines": lines}), spool, self.grading_id)
        return {"summary": shown}
