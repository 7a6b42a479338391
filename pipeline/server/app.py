"""The `/v1` HTTP API as a Starlette app: routes check, answer and hand work to the runners;
they never read an input themselves."""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
import uuid
from importlib import resources
from typing import Any

import redis
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from pipeline.config import LANES, lane_queue
from pipeline.games.registry import registry
from pipeline.server import gradings, hacks, metrics, openapi, packages
from pipeline.server.auth import Caller, TokenBackend
from pipeline.server.context import (
    ApiError,
    ServerState,
    job_id_of,
    job_view,
    job_views,
    needs,
    query,
    record_of,
)
from pipeline.server.runners import deliver_batch
from pipeline.server.spool import BodyStalled, SpoolFile, TooLarge
from pipeline.server.uploads import upload
from pipeline.server.webhooks import CallbackRefused, check_callback
from pipeline.store.jobstate import FINISHED, is_job_id
from pipeline.store.records import is_event_token, newest_event, read_events

log = logging.getLogger("gamebatch.server")
EVENT_WAIT_MS = 5_000  # one blocking read of the event stream, at most
MAX_BATCH_BYTES = 1 << 20  # the JSON body of POST /v1/batches


def create_app(service: ServerState) -> Starlette:
    """The ASGI app of `gamebatch serve`."""
    routes = [
        Route("/", _page, methods=["GET"]),
        Route("/static/{name}", _static, methods=["GET"]),
        Route("/healthz", _healthz, methods=["GET"]),
        Route("/v1/problems", _problems, methods=["GET"]),
        Route("/metrics", _metrics, methods=["GET"]),
        Route("/v1/openapi.json", _openapi, methods=["GET"]),
        Route("/v1/jobs", upload, methods=["PUT", "POST"]),
        Route("/v1/jobs", _list, methods=["GET"]),
        Route("/v1/jobs/{job}", _show, methods=["GET"]),
        Route("/v1/jobs/{job}", _cancel, methods=["DELETE"]),
        Route("/v1/jobs/{job}/result", _result, methods=["GET"]),
        Route("/v1/jobs/{job}/errors", _errors, methods=["GET"]),
        Route("/v1/batches", _open_batch, methods=["POST"]),
        Route("/v1/batches/{batch}", _show_batch, methods=["GET"]),
        Route("/v1/events", _events, methods=["GET"]),
        Route("/v1/gradings", gradings.create, methods=["POST"]),
        Route("/v1/gradings", _list_gradings, methods=["GET"]),
        Route("/v1/gradings/{grading}", gradings.show, methods=["GET"]),
        Route("/v1/gradings/{grading}", gradings.cancel, methods=["DELETE"]),
        Route("/v1/gradings/{grading}/cases/{test}/{number}", gradings.case_input, methods=["GET"]),
        Route("/v1/gradings/{grading}/{report}", gradings.report, methods=["GET"]),
        Route("/v1/hacks", hacks.create, methods=["POST"]),
        Route("/v1/hacks/{hack}", hacks.show, methods=["GET"]),
        Route("/v1/hacks/{grading}", gradings.cancel, methods=["DELETE"]),
        Route("/v1/hacks/{hack}/{report}", hacks.report, methods=["GET"]),
        Route("/v1/verifications", packages.create_verification, methods=["POST"]),
        Route("/v1/package-gradings", packages.create_grading, methods=["POST"]),
        *(
            Route(f"/v1/{route}/{{grading}}", handler, methods=[method])
            for route in packages.ROUTES.values()
            for handler, method in (
                (packages.show, "GET"),
                (gradings.cancel, "DELETE"),
            )
        ),
        *(
            Route(f"/v1/{route}/{{grading}}/{{report}}", packages.report, methods=["GET"])
            for route in packages.ROUTES.values()
        ),
    ]
    handlers = {HTTPException: _http_error, BodyStalled: _stalled, Exception: _internal_error}
    middleware = [Middleware(AuthenticationMiddleware, backend=TokenBackend(service.tokens))]
    app = Starlette(routes=routes, exception_handlers=handlers, middleware=middleware)
    app.state.service = service  # what the routes share (see context.needs)
    app.add_middleware(metrics.Timing)
    return app


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return JSONResponse({"error": exc.detail}, exc.status_code, headers=exc.headers)


async def _stalled(request: Request, exc: Exception) -> Response:
    return JSONResponse({"error": str(exc)}, 408, headers={"Connection": "close"})


async def _internal_error(request: Request, exc: Exception) -> Response:
    log.exception("%s %s", request.method, request.url.path)
    return JSONResponse(
        {"error": f"internal error ({type(exc).__name__}); see the server log"}, 500
    )


# ---- the web page (static: it holds no data, and talks to the API with the user's token)

_STATIC = resources.files("pipeline.server") / "static"
_ASSETS = {"app.js": "text/javascript", "app.css": "text/css"}
_PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self';"
    " img-src 'self' blob: data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


async def _page(request: Request) -> Response:
    body = (_STATIC / "index.html").read_bytes()
    return Response(body, media_type="text/html; charset=utf-8", headers=_PAGE_HEADERS)


async def _static(request: Request) -> Response:
    name = str(request.path_params["name"])
    if name not in _ASSETS:
        raise ApiError(404, f"no file {name[:40]!r}")
    return Response(
        (_STATIC / name).read_bytes(),
        media_type=f"{_ASSETS[name]}; charset=utf-8",
        headers=_PAGE_HEADERS,
    )


# ---- health, metrics, schema


@needs(None)
async def _healthz(service: ServerState, request: Request, caller: Caller) -> Response:
    try:
        await service.events.ping()
    except redis.RedisError as exc:
        return JSONResponse({"redis": f"unreachable: {type(exc).__name__}"}, 503)
    alive = await run_in_threadpool(service.workers)
    body = {"redis": "ok", "workers": len(alive), "runners": service.runners.alive()}
    healthy = bool(alive) and service.runners.alive()
    return JSONResponse(body, 200 if healthy else 503)


@needs("admin")
async def _metrics(service: ServerState, request: Request, caller: Caller) -> Response:
    body = await run_in_threadpool(
        metrics.render,
        service.records,
        service.jobs.store,
        [lane_queue(service.settings, lane) for lane in LANES],
    )
    return Response(body, media_type=metrics.CONTENT_TYPE)


@needs("read")
async def _problems(service: ServerState, request: Request, caller: Caller) -> Response:
    return JSONResponse({"problems": sorted(registry())})


@needs("read")
async def _openapi(service: ServerState, request: Request, caller: Caller) -> Response:
    return JSONResponse(openapi.DOCUMENT)


# ---- jobs


@needs("read")
async def _show(service: ServerState, request: Request, caller: Caller) -> Response:
    job_id = job_id_of(request)

    def show() -> dict[str, Any]:
        since = service.records.last_event()  # read first: later changes come after it
        return {**job_view(service, record_of(service, job_id)), "events_since": since}

    return JSONResponse(await run_in_threadpool(show))


def _paging(request: Request) -> tuple[int, float | None]:
    """A list's `limit` (1 to 500) and `cursor` (where the previous page ended), checked."""
    params = query(request, ("limit", "cursor"))
    limit = params.get("limit", "50")
    if not (limit.isascii() and limit.isdigit() and len(limit) <= 3 and 1 <= int(limit) <= 500):
        raise ApiError(400, "limit must be a whole number from 1 to 500")
    cursor = params.get("cursor")
    if not cursor:
        return int(limit), None
    try:
        before = float(cursor) if len(cursor) <= 40 else math.nan
    except ValueError:
        before = math.nan
    if not math.isfinite(before):
        raise ApiError(400, "cursor must be the number a previous page's `next` gave")
    return int(limit), before


@needs("read")
async def _list(service: ServerState, request: Request, caller: Caller) -> Response:
    limit, before = _paging(request)
    since = await run_in_threadpool(service.records.last_event)  # first: later changes follow
    records, after = await run_in_threadpool(service.records.page, limit, before)
    jobs = await run_in_threadpool(job_views, service, records)
    body: dict[str, Any] = {"jobs": jobs, "events_since": since}
    body["next"] = f"/v1/jobs?limit={limit}&cursor={after!r}" if after is not None else None
    body["finished_states"] = sorted(FINISHED)  # the states a job never leaves
    return JSONResponse(body)


@needs("read")
async def _list_gradings(service: ServerState, request: Request, caller: Caller) -> Response:
    limit, before = _paging(request)
    records = service.records.of_kind("grading")
    since = await run_in_threadpool(records.last_event)
    found, after = await run_in_threadpool(records.page, limit, before)
    shown = [_view(r) for r in found]
    body: dict[str, Any] = {"gradings": shown, "events_since": since}
    body["next"] = f"/v1/gradings?limit={limit}&cursor={after!r}" if after is not None else None
    return JSONResponse(body)


def _view(record: dict[str, str]) -> dict[str, Any]:
    """A grading record as its kind shows it: a hack search, a package's, or a grading."""
    if "hack" in record:
        return hacks.view(record)
    return packages.view(record) if "package" in record else gradings.view(record)


@needs("submit")
async def _cancel(service: ServerState, request: Request, caller: Caller) -> Response:
    job_id = job_id_of(request)

    def cancel() -> dict[str, Any]:
        record = record_of(service, job_id)
        if "admin" not in caller.scopes and record.get("owner") != caller.name:
            raise ApiError(403, "only the job's owner or an admin token may cancel it")
        cancel = service.jobs.cancel(job_id)
        if not cancel.found or cancel.ended:
            raise ApiError(409, f"job {job_id} has already ended ({cancel.ended or 'expired'})")
        return job_view(service, record_of(service, job_id))

    return JSONResponse(await run_in_threadpool(cancel))


@needs("read")
async def _result(service: ServerState, request: Request, caller: Caller) -> Response:
    job_id = job_id_of(request)
    record = await run_in_threadpool(record_of, service, job_id)
    path = service.spool.result(job_id)
    if record.get("state") != "done" or not path.exists():
        state = record.get("state") if record.get("state") != "done" else "expired"
        raise ApiError(409, f"job {job_id} has no result ({state})", {"X-Job-State": str(state)})
    etag = f'"{record.get("result_sha256", "")}"'
    if request.headers.get("if-none-match") == etag:
        return Response(status_code=304, headers={"ETag": etag})
    return SpoolFile(
        path,
        media_type="text/plain; charset=utf-8",
        filename=f"{record.get('name', job_id)}.out",
        headers={"ETag": etag},
    )


@needs("read")
async def _errors(service: ServerState, request: Request, caller: Caller) -> Response:
    job_id = job_id_of(request)
    record = await run_in_threadpool(record_of, service, job_id)
    if record.get("keep_going") != "1":
        raise ApiError(404, f"job {job_id} is not a keep-going job")
    if record.get("state") != "done":
        raise ApiError(409, f"job {job_id} has not ended well ({record.get('state')})")
    path = service.spool.errors(job_id)
    if not path.exists():
        return Response(b"", media_type="text/plain; charset=utf-8")
    return SpoolFile(path, media_type="text/plain; charset=utf-8")


# ---- batches


@needs("submit")
async def _open_batch(service: ServerState, request: Request, caller: Caller) -> Response:
    try:
        body = await service.spool.read_small(request.stream(), MAX_BATCH_BYTES)
    except TooLarge:
        raise ApiError(413, f"a batch is at most {MAX_BATCH_BYTES} bytes of JSON") from None
    except ClientDisconnect:
        raise ApiError(400, "the client went away during the request") from None
    try:
        doc = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ApiError(400, 'the body must be JSON: {"jobs": [...], "callback_url": ...}') from None
    jobs, url = (doc.get("jobs"), doc.get("callback_url")) if isinstance(doc, dict) else (0, 0)
    if not isinstance(jobs, list) or not jobs or not all(isinstance(j, str) for j in jobs):
        raise ApiError(400, "jobs must be a non-empty list of job ids")
    if not isinstance(url, str):
        raise ApiError(400, "callback_url is required")
    try:
        check_callback(url, service.settings.server)
    except CallbackRefused as exc:
        raise ApiError(422, str(exc)) from None

    def open_batch() -> dict[str, Any]:
        for job_id in jobs:  # a job the caller may not see is answered as one that is not
            record = service.records.get(job_id) if is_job_id(job_id) else None
            if record is None or not caller.may_read(record):
                raise ApiError(404, f"no job {job_id}")
        batch_id = uuid.uuid4().hex
        service.records.open_batch(batch_id, jobs, url)
        return {"id": batch_id, "jobs": jobs, "links": {"self": f"/v1/batches/{batch_id}"}}

    opened = await run_in_threadpool(open_batch)
    # all may have ended already (queued: this does not wait for the receiver)
    await run_in_threadpool(deliver_batch, service.settings, service.records, opened["id"])
    return JSONResponse(opened, 201)


@needs("read")
async def _show_batch(service: ServerState, request: Request, caller: Caller) -> Response:
    batch_id = str(request.path_params["batch"])
    if len(batch_id) != 32 or not all(c in "0123456789abcdef" for c in batch_id):
        raise ApiError(404, "not a batch id")
    batch = await run_in_threadpool(service.records.batch, batch_id)
    if batch is None:
        raise ApiError(404, f"no batch {batch_id}")
    return JSONResponse(
        {"id": batch_id, "jobs": json.loads(batch["jobs"]), "webhook": json.loads(batch["webhook"])}
    )


# ---- events


@needs("read")
async def _events(service: ServerState, request: Request, caller: Caller) -> Response:
    since = request.query_params.get("since") or request.headers.get("last-event-id")
    if since is None:  # from now on
        since = await _newest(service)
    if not is_event_token(str(since)):
        raise ApiError(400, "since must be an event id (as sent in the stream) or 0")
    job = request.query_params.get("job")
    if job is not None and not is_job_id(job):
        raise ApiError(400, "job must be a job id")
    return StreamingResponse(
        _stream(service, request, str(since), job),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


async def _newest(service: ServerState) -> str:
    return await newest_event(service.events)


def _block_ms(client: Any) -> int:
    """How long one read of the event stream may block: within the client's socket timeout."""
    options = getattr(getattr(client, "connection_pool", None), "connection_kwargs", {})
    timeout = options.get("socket_timeout")
    return EVENT_WAIT_MS if not timeout else max(50, min(EVENT_WAIT_MS, int(timeout * 500)))


async def _stream(service: ServerState, request: Request, since: str, job: str | None) -> Any:
    yield b"retry: 2000\n\n"
    keep_alive = service.settings.server.keep_alive
    block = min(_block_ms(service.events), max(50, int(keep_alive * 1000)))
    written = time.monotonic()
    while not await request.is_disconnected():
        try:
            found = await read_events(service.events, since, block)
        except redis.ResponseError as exc:
            log.warning("event stream after %s ended: %s", since, exc)
            return
        except redis.RedisError as exc:  # Redis away: read again (the client reconnects)
            log.warning("event stream: %s: %s", type(exc).__name__, exc)
            found = []
            await asyncio.sleep(1.0)
        for token, data in found:
            since = token
            if job is None or json.loads(data).get("job") == job:
                kind = json.loads(data)["type"]
                yield f"id: {token}\nevent: {kind}\ndata: {data}\n\n".encode()
                written = time.monotonic()
        if time.monotonic() - written >= keep_alive:
            yield b": keep-alive\n\n"
            written = time.monotonic()
