"""Grading over HTTP: an archive in the bulk layout becomes a grading, run by a runner through
the same workflows as `gamebatch grade`; its reports are files of the spool."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from pipeline.app.grade import GradeRequest, Reporting, grade
from pipeline.app.judge import JudgeLimits, JudgeRequest, judge, prepare
from pipeline.config import Settings
from pipeline.errors import UsageError
from pipeline.games import toolkit
from pipeline.games.problem import Problem
from pipeline.games.registry import get_problem
from pipeline.grading import layout
from pipeline.grading.report_files import ReportFiles
from pipeline.grading.rules import Scoring
from pipeline.grading.scoring import load_scoring
from pipeline.server.archives import ArchiveRefused, Limits, unpack
from pipeline.server.auth import Caller
from pipeline.server.context import ApiError, ServerState, needs
from pipeline.server.lifecycle import run_recorded
from pipeline.server.spool import Spool, SpoolFile
from pipeline.server.uploads import receive
from pipeline.store.jobstate import JobState
from pipeline.store.records import Records

log = logging.getLogger("gamebatch.server")
ID = re.compile(r"[A-Za-z0-9_.]+(-[A-Za-z0-9_.]+)*-[0-9a-f]{24}(-ignore-case)?(-keep-going)?")
LIMITS = ("time_limit", "memory_limit", "output_limit")  # a judged program's, as parameters
_PARAMS = ("problem", "ignore_case", "keep_going", *LIMITS)
_CASE = re.compile(r"[0-9]{1,12}")  # a case number of a test
REPORTS = {  # route -> (file in the grading's folder, media type)
    "report.json": ("report.json", "application/json"),
    "junit": ("junit.xml", "application/xml"),
    "scoreboard.csv": ("scoreboard.csv", "text/csv; charset=utf-8"),
    "scoreboard.json": ("scoreboard.json", "application/json"),
}


@dataclass(frozen=True)
class GradingTask:
    """A grading handed to a runner."""

    grading_id: str
    problem: str
    ignore_case: bool
    keep_going: bool = False  # an invalid test marks its submissions, the rest is graded
    limits: str = "{}"  # judged programs' limits (JSON of judge settings) given with it

    @classmethod
    def of_record(cls, grading_id: str, record: dict[str, str]) -> GradingTask:
        """The task of a recorded grading (one to resume)."""
        return cls(
            grading_id,
            record["problem"],
            record.get("ignore_case") == "1",
            record.get("keep_going") == "1",
            record.get("limits", "{}"),
        )

    def run(self, settings: Settings, records: Records, spool: Spool) -> None:
        """What a runner does with it."""
        run_grading(settings, records, spool, self)


def folder(spool: Spool, grading_id: str) -> Path:
    """A grading's folder: `files/` (the unpacked archive) and its reports."""
    return spool.root / "gradings" / grading_id


# ---- routes


async def admit(
    service: ServerState, request: Request, known: tuple[str, ...]
) -> tuple[dict[str, str], Problem, Records]:
    """What an archive's upload (a grading's, a hack search's) checks before its body is
    read: only `known` parameters, a known problem, room among the unfinished gradings.
    Its parameters, problem and the gradings' records."""
    params = dict(request.query_params)
    unknown = sorted(set(params) - set(known))
    if unknown:
        raise ApiError(400, f"unknown parameter {unknown[0]!r} (known: {', '.join(known)})")
    try:
        problem = get_problem(params.get("problem", ""))
    except UsageError as exc:
        raise ApiError(400, str(exc)) from None
    return params, problem, await room(service)


async def room(service: ServerState) -> Records:
    """The gradings' records, once there is room among the unfinished ones (503 otherwise)."""
    records = service.records.of_kind("grading")
    if await run_in_threadpool(records.pending_count) >= service.settings.server.max_pending_jobs:
        raise ApiError(503, "too many unfinished gradings; try again later", {"Retry-After": "5"})
    return records


@needs("submit")
async def create(service: ServerState, request: Request, caller: Caller) -> Response:
    """POST /v1/gradings: the archive as the body."""
    params, problem, gradings = await admit(service, request, _PARAMS)
    ignore_case = params.get("ignore_case", "0") in ("1", "true")
    keep_going = params.get("keep_going", "0") in ("1", "true")
    limits = json.dumps(limits_of(params), sort_keys=True)
    received = await receive(service, request, raw_only=True)  # streamed and hashed, as jobs
    try:
        named = received.sha256  # the archive, and the programs' limits when given
        if limits != "{}":
            named = hashlib.sha256(f"{named}:{limits}".encode()).hexdigest()
        grading_id = (
            f"{problem.name}-{named[:24]}"
            + ("-ignore-case" if ignore_case else "")
            + ("-keep-going" if keep_going else "")
        )
        existing = await run_in_threadpool(gradings.get, grading_id)
        if existing and existing.get("state") not in ("failed", "cancelled"):
            return JSONResponse(view(existing), 200)
        await run_in_threadpool(unpack_into, service, received.path, grading_id, _check)
    finally:
        service.spool.discard(received.path)
    fields = {
        "problem": problem.name,
        "ignore_case": str(int(ignore_case)),
        "keep_going": str(int(keep_going)),
        "owner": caller.name,
        "size": str(received.size),
        "limits": limits,
    }
    if not await run_in_threadpool(gradings.open, grading_id, fields):
        return JSONResponse(view(await _record(service, grading_id)), 200)
    await run_in_threadpool(gradings.event, "grading.created", grading_id, {})
    task = GradingTask(grading_id, problem.name, ignore_case, keep_going, limits)
    service.runners.submit(task)
    record = await _record(service, grading_id)
    return JSONResponse(view(record), 201, headers={"Location": f"/v1/gradings/{grading_id}"})


UNPACKING = ".unpack-"  # a folder of gradings/ an archive is unpacked into, then renamed


def unpack_into(
    service: ServerState,
    archive: Path,
    grading_id: str,
    check: Callable[[Path, Settings], None],
) -> None:
    """Unpack and `check` the layout in a private folder, then rename it into place; refused
    archives leave nothing behind."""
    limits = service.settings.limits
    where = folder(service.spool, grading_id)
    where.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    private = Path(tempfile.mkdtemp(prefix=UNPACKING, dir=where.parent))
    try:
        unpacked = unpack(
            archive, private / "files", Limits(limits.max_archive_files, limits.max_archive_bytes)
        )
        check(unpacked.root, service.settings)
        (private / "notes.json").write_text(json.dumps(unpacked.notes))
        try:
            os.rename(private, where)
        except OSError:  # there already (the same archive at once, or an earlier try): the
            # id names the archive's content, so it holds the same files and this copy goes
            if not where.is_dir():
                raise
    except ArchiveRefused as exc:
        raise ApiError(exc.status, str(exc)) from None
    except UsageError as exc:
        raise ApiError(422, str(exc)) from None
    finally:
        shutil.rmtree(private, ignore_errors=True)  # what was not moved into place


def _check(root: Path, settings: Settings) -> None:
    """A grading's archive: tests/, and subs/ or progs/."""
    if not (root / "tests").is_dir() or (root / "subs").is_dir() == (root / "progs").is_dir():
        raise ArchiveRefused("the archive needs a tests/ folder, and subs/ or progs/")
    if (root / "subs").is_dir():
        layout.bulk_layout(root / "tests", root / "subs")
    else:
        prepare(settings, JudgeLimits(), root / "tests", root / "progs", quiet, sandbox=False)


def quiet(line: str) -> None:
    """The notes of an archive's check (its grading records them)."""
    del line


def limits_of(params: dict[str, str]) -> dict[str, float]:
    """Judged programs' limits given as parameters, as the judge settings they set (400
    unless positive numbers under a million)."""
    found: dict[str, float] = {}
    for name in LIMITS:
        if name in params:
            try:
                value = float(params[name])
            except ValueError:
                value = 0
            if not 0 < value < 1e6:
                raise ApiError(400, f"{name} must be a positive number")
            found[name] = value if name == "time_limit" else int(value)
    return JudgeLimits(found.get("time_limit"), *(_whole(found, n) for n in LIMITS[1:])).given()


def _whole(found: dict[str, float], name: str) -> int | None:
    value = found.get(name)
    return None if value is None else int(value)


def view(record: dict[str, str]) -> dict[str, Any]:
    """A grading as clients see it."""
    grading_id = record.get("id", "")
    shown: dict[str, Any] = {
        k: record[k] for k in ("id", "problem", "state", "error") if k in record
    }
    for key in ("created", "finished"):
        if key in record:
            shown[key] = float(record[key])
    for key in ("summary", "notes"):
        if key in record:
            shown[key] = json.loads(record[key])
    base = f"/v1/gradings/{grading_id}"
    shown["links"] = {"self": base, **{name: f"{base}/{name}" for name in REPORTS}}
    return shown


def _grading_id(request: Request) -> str:
    grading_id = str(request.path_params["grading"])
    if ID.fullmatch(grading_id) is None:
        raise ApiError(404, "not a grading id")
    return grading_id


async def _record(service: ServerState, grading_id: str) -> dict[str, str]:
    record = await run_in_threadpool(service.records.of_kind("grading").get, grading_id)
    if record is None:
        raise ApiError(404, f"no grading {grading_id}")
    return record


@needs("read")
async def show(service: ServerState, request: Request, caller: Caller) -> Response:
    """GET /v1/gradings/{id}: its state, then its summary (the report is a link away)."""
    return JSONResponse(view(await _record(service, _grading_id(request))))


@needs("read")
async def report(service: ServerState, request: Request, caller: Caller) -> Response:
    """GET /v1/gradings/{id}/{report}: one of the report files, once the grading is done."""
    grading_id = _grading_id(request)
    record = await _record(service, grading_id)
    path, media = report_file(service, record, str(request.path_params["report"]), REPORTS)
    return SpoolFile(path, media_type=media)


def report_file(
    service: ServerState, record: dict[str, str], name: str, reports: dict[str, tuple[str, str]]
) -> tuple[Path, str]:
    """A done grading's (or hack search's) report file by its route name, and its type."""
    if name not in reports:
        raise ApiError(404, f"no report {name!r} (reports: {', '.join(reports)})")
    what = (
        "hack search" if "hack" in record else "verification" if "package" in record else "grading"
    )
    if record.get("state") != "done":
        raise ApiError(409, f"{what} {record.get('id')} is {record.get('state')}, not done")
    file_name, media = reports[name]
    return folder(service.spool, record.get("id", "")) / file_name, media


@needs("read")
async def case_input(service: ServerState, request: Request, caller: Caller) -> Response:
    """GET /v1/gradings/{id}/cases/{test}/{n}: the case's input, shortened (for the page)."""
    grading_id = _grading_id(request)
    record = await _record(service, grading_id)
    test, number = str(request.path_params["test"]), str(request.path_params["number"])
    path = folder(service.spool, grading_id) / "files" / "tests" / f"{test}.in"
    if "/" in test or test.startswith(".") or not _CASE.fullmatch(number) or not path.is_file():
        raise ApiError(404, "no such test or case")
    problem = get_problem(record["problem"])
    texts = await run_in_threadpool(toolkit.case_texts, problem, path, {int(number)}, 200)
    if int(number) not in texts:
        raise ApiError(404, f"test {test} has no case {number}")
    return JSONResponse({"test": test, "case": int(number), "input": texts[int(number)]})


@needs("submit")
async def cancel(service: ServerState, request: Request, caller: Caller) -> Response:
    """DELETE /v1/gradings/{id}: stop it; its answer jobs, shared by content, run on."""
    grading_id = _grading_id(request)
    record = await _record(service, grading_id)
    if "admin" not in caller.scopes and record.get("owner") != caller.name:
        raise ApiError(403, "only the grading's owner or an admin token may cancel it")
    gradings = service.records.of_kind("grading")
    if not await run_in_threadpool(gradings.finish, grading_id, "cancelled", "grading.cancelled"):
        ended = (await _record(service, grading_id)).get("state")
        raise ApiError(409, f"grading {grading_id} has already ended ({ended})")
    return JSONResponse(view(await _record(service, grading_id)))


# ---- the runner's part


def run_grading(settings: Settings, records: Records, spool: Spool, task: GradingTask) -> None:
    """Grade an unpacked archive and write its reports (never raises)."""
    run_recorded(
        records.of_kind("grading"),
        task.grading_id,
        lambda: ("done", _grade(settings, spool, task)),
        begun={"state": JobState.RUNNING.value},
        events="grading.",
        shown=lambda text: in_archive(text, spool, task.grading_id),
    )


def _grade(settings: Settings, spool: Spool, task: GradingTask) -> dict[str, str]:
    where = folder(spool, task.grading_id)
    root = where / "files"
    problem = get_problem(task.problem)
    scoring_file = root / "scoring.yaml"
    scoring = load_scoring(str(scoring_file)) if scoring_file.is_file() else Scoring()
    reporting = Reporting(
        (
            ReportFiles(where / "report.json", where / "junit.xml", where / "scoreboard.csv"),
            ReportFiles(scoreboard=where / "scoreboard.json"),
        )
    )
    report = lambda line: log.info("%s: %s", task.grading_id, line)  # noqa: E731
    if (root / "progs").is_dir():
        limits = JudgeLimits.of(json.loads(task.limits))
        request = JudgeRequest(
            problem,
            root / "tests",
            root / "progs",
            limits,
            scoring,
            task.keep_going,
            quiet=True,
            reporting=reporting,
        )
        graded = judge(settings, request, report)
    else:
        asked = GradeRequest(
            problem,
            tests=root / "tests",
            submissions=root / "subs",
            scoring=scoring,
            ignore_case=task.ignore_case,
            keep_going=task.keep_going,
            quiet=True,
            reporting=reporting,
        )
        graded = grade(settings, asked, report)
    unpacked_notes = json.loads((where / "notes.json").read_text())
    summary = {
        "tests": graded.tests,
        "submissions": graded.submissions,
        "all_accepted": graded.all_accepted,
        "contestants": graded.contestants,
        "cases_wrong": graded.cases_wrong,
        **({"invalid_tests": graded.broken} if graded.broken else {}),
    }
    shown = in_archive(json.dumps(summary), spool, task.grading_id)
    notes_shown = in_archive(json.dumps(unpacked_notes + graded.notes), spool, task.grading_id)
    return {"summary": shown, "notes": notes_shown}


def in_archive(text: str, spool: Spool, grading_id: str) -> str:
    """A message with the grading's files named as in the archive (`tests/t1.in`), never by
    their place in the server's spool."""
    root = str(folder(spool, grading_id) / "files") + os.sep
    return text.replace(json.dumps(root)[1:-1], "").replace(root, "")
