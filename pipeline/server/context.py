"""What the routes of the HTTP service share: the service's parts, API errors, and a job
as clients see it."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from pipeline.config import Settings
from pipeline.jobs.control import Jobs
from pipeline.server.auth import EVERYONE, Caller, Tokens
from pipeline.server.runners import RunnerPool
from pipeline.server.spool import Spool
from pipeline.store.jobstate import is_job_id
from pipeline.store.records import Records


class ApiError(HTTPException):
    """An error answered as `{"error": ...}` with its status."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(status, message, headers)


@dataclass
class ServerState:
    """What the routes share: settings, stores, spool and runners."""

    settings: Settings
    tokens: Tokens
    records: Records
    jobs: Jobs
    events: Any  # a redis.asyncio client (event stream reads block, off the event loop)
    spool: Spool
    runners: RunnerPool
    workers: Any  # () -> names of live workers (cached by the caller)


Handler = Callable[[ServerState, Request, Caller], Awaitable[Response]]


def needs(scope: str | None) -> Callable[[Handler], Callable[[Request], Awaitable[Response]]]:
    """A route's endpoint for a handler that needs `scope` (None: anyone): 401 without a
    valid token, 403 without the scope. The token was read by the authentication
    middleware (auth.TokenBackend); the service is the app's state."""

    def wrap(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
        @functools.wraps(handler)
        async def endpoint(request: Request) -> Response:
            caller = request.user if request.user.is_authenticated else None
            if scope is not None and caller is None:
                raise ApiError(
                    401,
                    "a valid token is needed (Authorization: Bearer TOKEN)",
                    {"WWW-Authenticate": "Bearer"},
                )
            if scope is not None and scope not in request.auth.scopes:
                raise ApiError(403, f"this token lacks the {scope!r} scope")
            return await handler(request.app.state.service, request, caller or EVERYONE)

        return endpoint

    return wrap


def query(request: Request, known: tuple[str, ...]) -> dict[str, str]:
    """The query's parameters, each at most once and each one of `known` (400 otherwise)."""
    found: dict[str, str] = {}
    for name, value in request.query_params.multi_items():
        if name not in known:
            raise ApiError(400, f"unknown parameter {name[:40]!r} (known: {', '.join(known)})")
        if name in found:
            raise ApiError(400, f"the parameter {name!r} is given twice")
        found[name] = value
    return found


def job_view(service: ServerState, record: dict[str, str]) -> dict[str, Any]:
    """A job as clients see it (`jobview.view`), with its links."""
    return job_views(service, [record])[0]


def job_views(service: ServerState, records: list[dict[str, str]]) -> list[dict[str, Any]]:
    """job_view() of several jobs, in two round trips."""
    ids = [record.get("id", "") for record in records]
    found = service.jobs.views_of(ids, list(records), [_links(record) for record in records])
    return [view or {} for view in found]


def _links(record: dict[str, str]) -> dict[str, str]:
    base = f"/v1/jobs/{record.get('id', '')}"
    links = {"self": base, "result": f"{base}/result", "events": "/v1/events"}
    if record.get("keep_going") == "1":
        links["errors"] = f"{base}/errors"
    return links


def job_id_of(request: Request) -> str:
    job_id = str(request.path_params["job"])
    if not is_job_id(job_id):
        raise ApiError(404, "not a job id (they look like strgame-<24 hex digits>)")
    return job_id


def record_of(service: ServerState, job_id: str) -> dict[str, str]:
    record = service.records.get(job_id)
    if record is None:
        raise ApiError(404, f"no job {job_id}")
    return record
