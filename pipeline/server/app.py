"""The `/v1` HTTP API as a Starlette app: routes check, answer and hand work to the runners;
they never read an input themselves."""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis
import redis.asyncio
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import FileResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from pipeline import keys
from pipeline.config import LANES, Settings, lane_queue
from pipeline.errors import UsageError
from pipeline.jobstore import JobStore
from pipeline.producer import job_id_for
from pipeline.registry import get_problem
from pipeline.server import metrics, openapi
from pipeline.server.auth import Caller, Tokens
from pipeline.server.records import FINISHED, Records, is_event_token, read_events
from pipeline.server.runners import RunnerPool, Upload, deliver_batch, public
from pipeline.server.spool import BadUpload, Received, Spool, TooLarge
from pipeline.server.webhooks import CallbackRefused, check_callback

log = logging.getLogger("gamebatch.server")
EVENT_WAIT_MS = 15_000  # a comment line keeps an idle event stream open this often
_JOB_PARAMS = ("problem", "lane", "keep_going", "callback_url", "name")
_EVERY_SCOPE = Caller("anyone", frozenset({"submit", "read", "admin"}))


class ApiError(HTTPException):
    """An error answered as `{"error": ...}` with its status."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(status, message, headers)


@dataclass
class Service:
    """What the routes share: settings, stores, spool and runners."""

    settings: Settings
    tokens: Tokens
    records: Records
    store: JobStore
    events: Any  # a redis.asyncio client (event stream reads block, off the event loop)
    spool: Spool
    runners: RunnerPool
    workers: Any  # () -> names of live workers (cached by the caller)


def create_app(service: Service) -> Starlette:
    """The ASGI app of `gamebatch serve`."""
    routes = [
        Route("/healthz", _guard(service, None, _healthz), methods=["GET"]),
        Route("/metrics", _guard(service, "admin", _metrics), methods=["GET"]),
        Route("/v1/openapi.json", _guard(service, "read", _openapi), methods=["GET"]),
        Route("/v1/jobs", _guard(service, "submit", _upload), methods=["PUT", "POST"]),
        Route("/v1/jobs", _guard(service, "read", _list), methods=["GET"]),
        Route("/v1/jobs/{job}", _guard(service, "read", _show), methods=["GET"]),
        Route("/v1/jobs/{job}", _guard(service, "submit", _cancel), methods=["DELETE"]),
        Route("/v1/jobs/{job}/result", _guard(service, "read", _result), methods=["GET"]),
        Route("/v1/jobs/{job}/errors", _guard(service, "read", _errors), methods=["GET"]),
        Route("/v1/batches", _guard(service, "submit", _open_batch), methods=["POST"]),
        Route("/v1/batches/{batch}", _guard(service, "read", _show_batch), methods=["GET"]),
        Route("/v1/events", _guard(service, "read", _events), methods=["GET"]),
    ]
    app = Starlette(
        routes=routes, exception_handlers={HTTPException: _http_error, Exception: _internal_error}
    )
    app.add_middleware(metrics.Timing)
    return app


def _guard(service: Service, scope: str | None, handler: Any) -> Any:
    """The handler behind the token check: 401 without a valid token, 403 without the scope."""

    async def endpoint(request: Request) -> Response:
        caller = _EVERY_SCOPE
        if scope is not None and service.tokens:
            found = service.tokens.caller(request.headers.get("authorization"))
            if found is None:
                raise ApiError(
                    401,
                    "a valid token is needed (Authorization: Bearer TOKEN)",
                    {"WWW-Authenticate": "Bearer"},
                )
            if scope not in found.scopes and "admin" not in found.scopes:
                raise ApiError(403, f"this token lacks the {scope!r} scope")
            caller = found
        response: Response = await handler(service, request, caller)
        return response

    return endpoint


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return JSONResponse({"error": exc.detail}, exc.status_code, headers=exc.headers)


async def _internal_error(request: Request, exc: Exception) -> Response:
    log.exception("%s %s", request.method, request.url.path)
    return JSONResponse(
        {"error": f"internal error ({type(exc).__name__}); see the server log"}, 500
    )


# ---- health, metrics, schema


async def _healthz(service: Service, request: Request, caller: Caller) -> Response:
    try:
        await service.events.ping()
    except redis.RedisError as exc:
        return JSONResponse({"redis": f"unreachable: {type(exc).__name__}"}, 503)
    alive = await run_in_threadpool(service.workers)
    body = {"redis": "ok", "workers": len(alive), "runners": service.runners.alive()}
    healthy = bool(alive) and service.runners.alive()
    return JSONResponse(body, 200 if healthy else 503)


async def _metrics(service: Service, request: Request, caller: Caller) -> Response:
    body = await run_in_threadpool(
        metrics.render,
        service.records,
        service.store,
        [lane_queue(service.settings, lane) for lane in LANES],
    )
    return Response(body, media_type=metrics.CONTENT_TYPE)


async def _openapi(service: Service, request: Request, caller: Caller) -> Response:
    return JSONResponse(openapi.DOCUMENT)


# ---- jobs


def _job_params(values: dict[str, str]) -> dict[str, str]:
    """The upload's parameters, checked before a byte of the body is read."""
    unknown = sorted(set(values) - set(_JOB_PARAMS))
    if unknown:
        raise ApiError(400, f"unknown parameter {unknown[0]!r} (known: {', '.join(_JOB_PARAMS)})")
    if "problem" not in values:
        raise ApiError(400, "the parameter 'problem' is required")
    try:
        get_problem(values["problem"])
    except UsageError as exc:
        raise ApiError(400, str(exc)) from None
    lane = values.get("lane", "auto")
    if lane not in ("auto", *LANES):
        raise ApiError(400, f"lane must be auto, {' or '.join(LANES)}")
    keep_going = values.get("keep_going", "0").lower()
    if keep_going not in ("0", "1", "true", "false"):
        raise ApiError(400, "keep_going must be 0 or 1")
    name = values.get("name", "")
    if len(name) > 255 or any(ch in name for ch in "/\0\n\r"):
        raise ApiError(400, "name must be a file name (no '/', at most 255 characters)")
    return {**values, "lane": lane, "keep_going": "1" if keep_going in ("1", "true") else "0"}


async def _upload(service: Service, request: Request, caller: Caller) -> Response:
    params = _job_params(dict(request.query_params))
    if params.get("callback_url"):
        try:
            check_callback(params["callback_url"], service.settings.server)
        except CallbackRefused as exc:
            raise ApiError(422, str(exc)) from None
    if await run_in_threadpool(service.records.pending_count) >= (
        service.settings.server.max_pending_jobs
    ):
        raise ApiError(503, "too many unfinished jobs; try again later", {"Retry-After": "5"})
    announced = _announced_digest(request.headers.get("content-digest"))
    if announced is not None and request.method == "PUT":
        return await _upload_in_place(service, request, params, announced, caller)
    received = await _receive(service, request)
    try:
        fields = {k: v for k, v in received.fields.items() if k in _JOB_PARAMS}
        params = _job_params({**fields, **params}) if fields else params
        return await run_in_threadpool(_open_job, service, params, received, caller)
    finally:
        service.spool.discard(received.path)  # kept by now, or not wanted


def _announced_digest(header: str | None) -> str | None:
    """The SHA-256 a `Content-Digest: sha-256=:BASE64:` header (RFC 9530) announces."""
    for item in (header or "").split(","):
        algorithm, _, value = item.strip().partition("=")
        if algorithm.strip().lower() != "sha-256":
            continue  # other algorithms are not used
        value = value.strip()
        try:
            digest = base64.b64decode(value[1:-1], validate=True)
        except binascii.Error:
            digest = b""
        if len(digest) != 32 or not (value.startswith(":") and value.endswith(":")):
            raise ApiError(400, "Content-Digest must be sha-256=:<base64 of 32 bytes>:")
        return digest.hex()
    return None


async def _upload_in_place(
    service: Service, request: Request, params: dict[str, str], announced: str, caller: Caller
) -> Response:
    """A raw upload that announced its SHA-256: the job is known before the body arrives, so a
    runner reads the input while it is still uploaded. A body that is not what it announced
    is refused and leaves no job."""
    limit = service.settings.limits.max_upload_bytes
    _check_length(request, limit)
    _check_raw(request)
    problem = get_problem(params["problem"])
    job_id = job_id_for(problem, announced) + ("-keep-going" if params["keep_going"] == "1" else "")
    length = request.headers.get("content-length", "")
    lane = params["lane"]
    if lane == "auto":  # decided here: the file is still growing (unknown length: bulk)
        small = length.isdigit() and int(length) <= service.settings.interactive_max_bytes
        lane = "interactive" if small else "bulk"
    name = params.get("name") or f"{job_id}.in"
    fields = _fields(problem.name, name, {**params, "lane": lane}, caller, size=length,
                     uploaded="0")  # fmt: skip
    opened, record = await run_in_threadpool(_open_record, service, job_id, fields)
    if not opened:
        async for _ in request.stream():  # the same content is known: the body is not needed
            pass
        return JSONResponse(_job_body(service, record), 200)
    spool = service.spool
    spool.discard_input(job_id)
    spool.input(job_id).touch(mode=0o600)
    token = await run_in_threadpool(service.records.event, "created", job_id,
                                    {"problem": problem.name, "name": name})  # fmt: skip
    service.runners.submit(Upload(job_id, problem.name, name, params["keep_going"] == "1", lane,
                                  params.get("callback_url") or None, announced))  # fmt: skip
    try:
        received = await _receive(service, request, into=spool.input(job_id))
        if received.sha256 != announced:
            raise ApiError(400, "the body's SHA-256 is not the one its Content-Digest announced")
    except BaseException:
        spool.mark(spool.broken(job_id))  # the runner's producer drops what it read
        await run_in_threadpool(service.records.forget, job_id)
        raise
    await run_in_threadpool(lambda: service.records.update(job_id, uploaded="1",
                                                           size=received.size))  # fmt: skip
    spool.mark(spool.arrived(job_id))
    body = _job_body(service, await run_in_threadpool(_record, service, job_id))
    body["links"]["events"] = f"/v1/events?since={token}"
    return JSONResponse(body, 201, headers={"Location": f"/v1/jobs/{job_id}"})


def _open_record(
    service: Service, job_id: str, fields: dict[str, str]
) -> tuple[bool, dict[str, str]]:
    existing = service.records.get(job_id)
    stale = existing is not None and existing.get("state") == "done" and not (
        service.spool.result(job_id).exists())  # fmt: skip
    opened = service.records.open(job_id, fields, replace_done=stale)
    return opened, service.records.get(job_id) or {}


def _fields(
    problem: str, name: str, params: dict[str, str], caller: Caller, *, size: str, uploaded: str
) -> dict[str, str]:
    return {
        "problem": problem, "name": name, "size": size, "lane": params["lane"],
        "keep_going": params["keep_going"], "callback_url": params.get("callback_url", ""),
        "owner": caller.name, "uploaded": uploaded,
    }  # fmt: skip


def _check_length(request: Request, limit: int) -> None:
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise ApiError(413, f"the upload is larger than limits.max_upload_bytes ({limit})")


def _check_raw(request: Request) -> None:
    if request.headers.get("content-type", "").startswith(("multipart/", "application/json")):
        raise ApiError(415, "PUT takes the raw file as the body (multipart: use POST)")


async def _receive(service: Service, request: Request, into: Path | None = None) -> Received:
    limit = service.settings.limits.max_upload_bytes
    _check_length(request, limit)
    content_type = request.headers.get("content-type", "")
    try:
        if request.method == "POST":
            if not content_type.startswith("multipart/form-data"):
                raise ApiError(415, "POST takes multipart/form-data (PUT takes the raw file)")
            received = await service.spool.receive_form(request.stream(), content_type, limit)
        else:
            _check_raw(request)
            received = await service.spool.receive(request.stream(), limit, into=into)
    except TooLarge as exc:
        raise ApiError(413, str(exc)) from None
    except BadUpload as exc:
        raise ApiError(400, str(exc)) from None
    except ClientDisconnect:
        raise ApiError(400, "the client went away during the upload") from None
    metrics.UPLOADED.inc(received.size)
    return received


def _open_job(
    service: Service, params: dict[str, str], received: Received, caller: Caller
) -> Response:
    problem = get_problem(params["problem"])
    keep_going = params["keep_going"] == "1"
    job_id = job_id_for(problem, received.sha256) + ("-keep-going" if keep_going else "")
    name = params.get("name") or _file_name(received.filename) or f"{job_id}.in"
    fields = _fields(problem.name, name, params, caller, size=str(received.size), uploaded="1")
    opened, record = _open_record(service, job_id, fields)
    if not opened:
        return JSONResponse(_job_body(service, record), 200)
    service.spool.keep(received, job_id)
    token = service.records.event("created", job_id, {"problem": problem.name, "name": name})
    service.runners.submit(Upload(job_id, problem.name, name, keep_going, params["lane"],
                                  params.get("callback_url") or None))  # fmt: skip
    body = _job_body(service, service.records.get(job_id) or {})
    body["links"]["events"] = f"/v1/events?since={token}"
    return JSONResponse(body, 201, headers={"Location": f"/v1/jobs/{job_id}"})


def _file_name(filename: str | None) -> str:
    """The last part of a browser's file name, if it is a usable one."""
    base = (filename or "").replace("\\", "/").rsplit("/", 1)[-1]
    return base if base and len(base) <= 255 and "\0" not in base and "\n" not in base else ""


def _job_body(service: Service, record: dict[str, str]) -> dict[str, Any]:
    """A job as clients see it: its record, live counters while it runs, and links."""
    body = public(record)
    job_id = record.get("id", "")
    body.pop("error", None)
    body["errors"] = [record["error"]] if record.get("error") else []
    if record.get("state") in ("producing", "running"):
        counters = service.store.progress(job_id)
        if counters is not None:
            live = counters.as_dict()
            body.update(done=live["done"], total=live["total"], chunks=live["chunks"])
            if live["state"] in ("running", "complete"):
                body["state"] = live["state"]
            body["errors"] += [f"chunk {k}: {v}" for k, v in live["failures"].items()][:10]
    elif record.get("state") == "done":
        body["done"] = body.get("total")
    base = f"/v1/jobs/{job_id}"
    body["links"] = {"self": base, "result": f"{base}/result", "events": "/v1/events"}
    if record.get("keep_going") == "1":
        body["links"]["errors"] = f"{base}/errors"
    return body


def _job_id(request: Request) -> str:
    job_id = str(request.path_params["job"])
    if not keys.is_job_id(job_id):
        raise ApiError(404, "not a job id (they look like strgame-<24 hex digits>)")
    return job_id


def _record(service: Service, job_id: str) -> dict[str, str]:
    record = service.records.get(job_id)
    if record is None:
        raise ApiError(404, f"no job {job_id}")
    return record


async def _show(service: Service, request: Request, caller: Caller) -> Response:
    job_id = _job_id(request)

    def show() -> dict[str, Any]:
        since = service.records.last_event()  # read first: later changes come after it
        return {**_job_body(service, _record(service, job_id)), "events_since": since}

    return JSONResponse(await run_in_threadpool(show))


async def _list(service: Service, request: Request, caller: Caller) -> Response:
    try:
        limit = int(request.query_params.get("limit", "50"))
        cursor = request.query_params.get("cursor")
        before = float(cursor) if cursor else None
    except ValueError:
        raise ApiError(400, "limit must be a whole number and cursor a number") from None
    if not 1 <= limit <= 500:
        raise ApiError(400, "limit must be from 1 to 500")
    records, after = await run_in_threadpool(service.records.page, limit, before)
    body: dict[str, Any] = {"jobs": [_job_body(service, r) for r in records]}
    body["next"] = f"/v1/jobs?limit={limit}&cursor={after!r}" if after is not None else None
    return JSONResponse(body)


async def _cancel(service: Service, request: Request, caller: Caller) -> Response:
    job_id = _job_id(request)

    def cancel() -> dict[str, Any]:
        record = _record(service, job_id)
        if "admin" not in caller.scopes and record.get("owner") != caller.name:
            raise ApiError(403, "only the job's owner or an admin token may cancel it")
        if record.get("state") in FINISHED:
            raise ApiError(409, f"job {job_id} has already ended ({record['state']})")
        service.records.finish(job_id, "cancelled")
        service.store.cancel(job_id, service.settings.result_ttl)
        service.records.event("cancelled", job_id, {})
        return _job_body(service, _record(service, job_id))

    return JSONResponse(await run_in_threadpool(cancel))


async def _result(service: Service, request: Request, caller: Caller) -> Response:
    job_id = _job_id(request)
    record = await run_in_threadpool(_record, service, job_id)
    path = service.spool.result(job_id)
    if record.get("state") != "done" or not path.exists():
        state = record.get("state") if record.get("state") != "done" else "expired"
        raise ApiError(409, f"job {job_id} has no result ({state})", {"X-Job-State": str(state)})
    etag = f'"{record.get("result_sha256", "")}"'
    if request.headers.get("if-none-match") == etag:
        return Response(status_code=304, headers={"ETag": etag})
    return FileResponse(
        path,
        media_type="text/plain; charset=utf-8",
        filename=f"{record.get('name', job_id)}.out",
        headers={"ETag": etag},
    )


async def _errors(service: Service, request: Request, caller: Caller) -> Response:
    job_id = _job_id(request)
    record = await run_in_threadpool(_record, service, job_id)
    if record.get("keep_going") != "1":
        raise ApiError(404, f"job {job_id} is not a keep-going job")
    if record.get("state") != "done":
        raise ApiError(409, f"job {job_id} has not ended well ({record.get('state')})")
    path = service.spool.errors(job_id)
    if not path.exists():
        return Response(b"", media_type="text/plain; charset=utf-8")
    return FileResponse(path, media_type="text/plain; charset=utf-8")


# ---- batches


async def _open_batch(service: Service, request: Request, caller: Caller) -> Response:
    try:
        doc = json.loads(await request.body())
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
        for job_id in jobs:
            if not keys.is_job_id(job_id) or service.records.get(job_id) is None:
                raise ApiError(404, f"no job {job_id}")
        batch_id = uuid.uuid4().hex
        service.records.open_batch(batch_id, jobs, url)
        return {"id": batch_id, "jobs": jobs, "links": {"self": f"/v1/batches/{batch_id}"}}

    body = await run_in_threadpool(open_batch)
    asyncio.get_running_loop().run_in_executor(  # all may have ended already
        None, deliver_batch, service.settings, service.records, body["id"]
    )
    return JSONResponse(body, 201)


async def _show_batch(service: Service, request: Request, caller: Caller) -> Response:
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


async def _events(service: Service, request: Request, caller: Caller) -> Response:
    since = request.query_params.get("since") or request.headers.get("last-event-id")
    if since is None:  # from now on
        since = await _newest(service)
    if not is_event_token(str(since)):
        raise ApiError(400, "since must be an event id (as sent in the stream) or 0")
    job = request.query_params.get("job")
    if job is not None and not keys.is_job_id(job):
        raise ApiError(400, "job must be a job id")
    return StreamingResponse(
        _stream(service, request, str(since), job),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


async def _newest(service: Service) -> str:
    rows = await service.events.xrevrange(keys.API_EVENTS, count=1)
    return str(rows[0][0].decode()) if rows else "0"


async def _stream(service: Service, request: Request, since: str, job: str | None) -> Any:
    yield b"retry: 2000\n\n"
    while not await request.is_disconnected():
        started = time.monotonic()
        found = await read_events(service.events, since, EVENT_WAIT_MS)
        for token, data in found:
            since = token
            if job is None or json.loads(data).get("job") == job:
                kind = json.loads(data)["type"]
                yield f"id: {token}\nevent: {kind}\ndata: {data}\n\n".encode()
        if not found and time.monotonic() - started >= EVENT_WAIT_MS / 1000 * 0.9:
            yield b": keep-alive\n\n"
