"""Hack searches over HTTP: an archive of `progs/` (and `tests/`, optional) becomes a search
run by a runner through the same search as `gamebatch hack`. A search is a grading record
(`hack` set to its parameters), so that gradings' events, cancel, resume and retention hold
for it; its reports are files of its folder."""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from pipeline.app.hack import HackRequest, hack
from pipeline.app.judge import JudgeLimits
from pipeline.config import Settings
from pipeline.errors import UsageError
from pipeline.games.problem import Problem
from pipeline.games.registry import get_problem
from pipeline.hacking.hacks import Budget
from pipeline.hacking.plan import largest_size
from pipeline.server import gradings
from pipeline.server.auth import Caller
from pipeline.server.context import ApiError, ServerState, needs
from pipeline.server.lifecycle import run_recorded
from pipeline.server.spool import Spool, SpoolFile
from pipeline.server.uploads import receive
from pipeline.store.jobstate import JobState
from pipeline.store.records import Records

log = logging.getLogger("gamebatch.server")

# a search's parameters -> (type, default, lowest, highest)
_SEARCH: dict[str, tuple[type, float, float, float]] = {
    "seed": (int, 1, 0, 2**62),
    "budget": (float, 120, 1, 3600),
    "cases": (int, 10_000, 1, 10**7),
    "largest": (int, 0, 1, 10**6),  # default: the game's limit (plan.largest_size)
}
_PARAMS = ("problem", *_SEARCH, *gradings.LIMITS)
REPORTS = {  # route -> (file in the search's folder, media type)
    "report.json": ("report.json", "application/json"),
    "hacks.in": ("out/hacks.in", "text/plain; charset=utf-8"),
    "hacks.ans": ("out/hacks.ans", "text/plain; charset=utf-8"),
}


@needs("submit")
async def create(service: ServerState, request: Request, caller: Caller) -> Response:
    """POST /v1/hacks: the archive (progs/, and tests/ to search only what they accept)."""
    params, problem, records = await gradings.admit(service, request, _PARAMS)
    search = json.dumps(_search(params, problem), sort_keys=True)
    limits = json.dumps(gradings.limits_of(params), sort_keys=True)
    received = await receive(service, request, raw_only=True)
    try:
        named = hashlib.sha256(f"{received.sha256}:{search}:{limits}".encode()).hexdigest()
        hack_id = f"hack.{problem.name}-{named[:24]}"
        existing = await run_in_threadpool(records.get, hack_id)
        if existing and existing.get("state") not in ("failed", "cancelled"):
            return JSONResponse(view(existing), 200)
        check = lambda root, settings: _check(problem, root, settings)  # noqa: E731
        await run_in_threadpool(gradings.unpack_into, service, received.path, hack_id, check)
    finally:
        service.spool.discard(received.path)
    fields = {"problem": problem.name, "owner": caller.name, "size": str(received.size)}
    if not await run_in_threadpool(
        records.open, hack_id, {**fields, "limits": limits, "hack": search}
    ):
        return JSONResponse(view(await _record(service, hack_id)), 200)
    await run_in_threadpool(records.event, "grading.created", hack_id, {})
    service.runners.submit(HackTask(hack_id, problem.name, search, limits))
    record = await _record(service, hack_id)
    return JSONResponse(view(record), 201, headers={"Location": f"/v1/hacks/{hack_id}"})


def _search(params: dict[str, str], problem: Problem) -> dict[str, float]:
    """The search's parameters (400 unless numbers in range); `largest` defaults to the
    game's limit."""
    found: dict[str, float] = {}
    for name, (kind, given, low, high) in _SEARCH.items():
        default = largest_size(problem, None) if name == "largest" else given
        try:
            value = kind(params.get(name, default))
        except ValueError:
            value = low - 1
        if not low <= value <= high:
            raise ApiError(400, f"{name} must be a number from {low:g} to {high:g}")
        found[name] = value
    return found


def _check(problem: Problem, root: Path, settings: Settings) -> None:
    """An archive to search: progs/ and, when given, tests/."""
    if not (root / "progs").is_dir():
        raise UsageError("the archive needs a progs/ folder (and tests/, optional)")
    tests = root / "tests" if (root / "tests").exists() else None
    request = HackRequest(problem, root / "progs", tests)
    request.prepare(settings, gradings.quiet, sandbox=False)


def view(record: dict[str, str]) -> dict[str, Any]:
    """A search as clients see it: a grading's view, its parameters and its reports."""
    shown = gradings.view(record)
    base = f"/v1/hacks/{record.get('id', '')}"
    shown["kind"] = "hack"
    shown["search"] = json.loads(record.get("hack", "{}"))
    shown["links"] = {"self": base, **{name: f"{base}/{name}" for name in REPORTS}}
    return shown


async def _record(service: ServerState, hack_id: str) -> dict[str, str]:
    record = await run_in_threadpool(service.records.of_kind("grading").get, hack_id)
    if record is None or "hack" not in record:
        raise ApiError(404, f"no hack search {hack_id}")
    return record


def _hack_id(request: Request) -> str:
    hack_id = str(request.path_params["hack"])
    if not hack_id.startswith("hack.") or gradings.ID.fullmatch(hack_id) is None:
        raise ApiError(404, "not a hack search's id")
    return hack_id


@needs("read")
async def show(service: ServerState, request: Request, caller: Caller) -> Response:
    """GET /v1/hacks/{id}: its state, then its summary."""
    return JSONResponse(view(await _record(service, _hack_id(request))))


@needs("read")
async def report(service: ServerState, request: Request, caller: Caller) -> Response:
    """GET /v1/hacks/{id}/{report}: the JSON report, or every counterexample as one test."""
    record = await _record(service, _hack_id(request))
    path, media = gradings.report_file(service, record, str(request.path_params["report"]), REPORTS)
    if not path.is_file():
        raise ApiError(404, "no program was hacked: there is no counterexample")
    return SpoolFile(path, media_type=media)


class HackTask:
    """A search handed to a runner."""

    def __init__(self, hack_id: str, problem: str, search: str, limits: str) -> None:
        self.grading_id, self.problem, self.search, self.limits = hack_id, problem, search, limits

    @classmethod
    def of_record(cls, hack_id: str, record: dict[str, str]) -> HackTask:
        """The task of a recorded search (one to resume)."""
        return cls(hack_id, record["problem"], record["hack"], record.get("limits", "{}"))

    def run(self, settings: Settings, records: Records, spool: Spool) -> None:
        """Search, and write the reports (never raises)."""
        run_recorded(
            records.of_kind("grading"),
            self.grading_id,
            lambda: ("done", self._search(settings, spool)),
            begun={"state": JobState.RUNNING.value},
            events="grading.",
            shown=lambda text: gradings.in_archive(text, spool, self.grading_id),
        )

    def _search(self, settings: Settings, spool: Spool) -> dict[str, str]:
        where = gradings.folder(spool, self.grading_id)
        root = where / "files"
        given = json.loads(self.search)
        request = HackRequest(
            get_problem(self.problem),
            root / "progs",
            root / "tests" if (root / "tests").is_dir() else None,
            int(given["seed"]),
            Budget(float(given["budget"]), int(given["cases"]), int(given["largest"])),
            JudgeLimits.of(json.loads(self.limits)),
            where / "out",
            where / "report.json",
            quiet=True,
        )
        found = hack(settings, request, lambda line: log.info("%s: %s", self.grading_id, line))
        summary = {"programs": len(found.hacks), "hacked": sum(h.hacked for h in found.hacks)}
        return {"summary": json.dumps(summary)}
