"""Uploads: parameters checked before the body is read, bodies streamed to the spool, and
jobs opened by content (an upload of known content returns the existing job)."""

from __future__ import annotations

import asyncio
import base64
import binascii
import time
from pathlib import Path
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response

from pipeline.config import LANES
from pipeline.data.producer import job_id_for
from pipeline.errors import UsageError
from pipeline.games.registry import get_problem
from pipeline.server import metrics
from pipeline.server.auth import Caller
from pipeline.server.context import ApiError, ServerState, job_view, needs, query, record_of
from pipeline.server.runners import Upload
from pipeline.server.spool import STALL_SECONDS, BadUpload, Received, TooLarge
from pipeline.server.webhooks import CallbackRefused, check_callback

JOB_PARAMS = ("problem", "lane", "keep_going", "callback_url", "name")


def _job_params(values: dict[str, str]) -> dict[str, str]:
    """The upload's parameters, checked before a byte of the body is read."""
    unknown = sorted(set(values) - set(JOB_PARAMS))
    if unknown:
        raise ApiError(400, f"unknown parameter {unknown[0]!r} (known: {', '.join(JOB_PARAMS)})")
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


@needs("submit")
async def upload(service: ServerState, request: Request, caller: Caller) -> Response:
    params = _job_params(query(request, JOB_PARAMS))
    if params.get("callback_url"):
        _check_callback(service, params["callback_url"])
    if await run_in_threadpool(service.records.pending_count) >= (
        service.settings.server.max_pending_jobs
    ):
        raise ApiError(503, "too many unfinished jobs; try again later", {"Retry-After": "5"})
    announced = _announced_digest(request.headers.get("content-digest"))
    if announced is not None and request.method == "PUT":
        return await _upload_in_place(service, request, params, announced, caller)
    received = await receive(service, request)
    try:
        fields = {k: v for k, v in received.fields.items() if k in JOB_PARAMS}
        params = _job_params({**fields, **params}) if fields else params
        if fields.get("callback_url"):  # a form field is checked as the query parameter is
            _check_callback(service, params["callback_url"])
        return await run_in_threadpool(_open_job, service, params, received, caller)
    finally:
        service.spool.discard(received.path)  # kept by now, or not wanted


def _check_callback(service: ServerState, url: str) -> None:
    try:
        check_callback(url, service.settings.server)
    except CallbackRefused as exc:
        raise ApiError(422, str(exc)) from None


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
    service: ServerState, request: Request, params: dict[str, str], announced: str, caller: Caller
) -> Response:
    """A raw upload that announced its SHA-256: the job is known before the body arrives, so a
    runner reads the input while it is still uploaded. A body that is not what it announced
    is refused and leaves no job."""
    limit = service.settings.limits.max_upload_bytes
    _check_length(request, limit)
    _check_raw(request)
    job_id = _job_id(params, announced)
    length = request.headers.get("content-length", "")
    lane = params["lane"]
    if lane == "auto":  # decided here: the file is still growing (unknown length: bulk)
        small = length.isdigit() and int(length) <= service.settings.interactive_max_bytes
        lane = "interactive" if small else "bulk"
    params = {**params, "lane": lane, "name": params.get("name") or f"{job_id}.in"}
    fields = _fields(params, caller, size=length, uploaded="0")
    opened, record = await run_in_threadpool(_open_record, service, job_id, fields)
    if not opened and record.get("uploaded") == "0":
        return await _beside_an_arriving_upload(service, request, params, announced, caller)
    if not opened:
        async for _ in request.stream():  # the same content is known: the body is not needed
            pass
        return JSONResponse(await run_in_threadpool(_known, service, record, caller), 200)
    spool = service.spool
    spool.discard_input(job_id)
    spool.input(job_id).touch(mode=0o600)
    token = await run_in_threadpool(_start, service, job_id, params, announced)
    try:
        received = await receive(service, request, into=spool.input(job_id))
        if received.sha256 != announced:
            raise ApiError(400, "the body's SHA-256 is not the one its Content-Digest announced")
    except BaseException:
        spool.mark(spool.broken(job_id))  # the runner's producer drops what it read
        if not spool.input(job_id).exists():  # its run ended first (a stall): drop it here
            spool.discard(spool.broken(job_id))
        await run_in_threadpool(service.records.forget, job_id)
        await run_in_threadpool(service.records.event, "refused", job_id, {})
        raise
    await run_in_threadpool(
        lambda: service.records.update(job_id, uploaded="1", size=received.size)
    )
    spool.mark(spool.arrived(job_id))
    return await run_in_threadpool(_created, service, job_id, token)


def _start(service: ServerState, job_id: str, params: dict[str, str], arriving: str = "") -> str:
    """Announce a new job and hand it to a runner; the event token its followers start at."""
    name, problem = params["name"], params["problem"]
    token = service.records.event("created", job_id, {"problem": problem, "name": name})
    service.runners.submit(
        Upload(
            job_id,
            problem,
            name,
            params["keep_going"] == "1",
            params["lane"],
            params.get("callback_url") or None,
            arriving or None,
        )
    )
    return token


def _created(service: ServerState, job_id: str, token: str) -> Response:
    """201 with the new job, and where its events start."""
    body = job_view(service, record_of(service, job_id))
    body["links"]["events"] = f"/v1/events?since={token}"
    return JSONResponse(body, 201, headers={"Location": f"/v1/jobs/{job_id}"})


ARRIVING_POLL = 0.1  # seconds between looks at another upload of the same content


async def _beside_an_arriving_upload(
    service: ServerState, request: Request, params: dict[str, str], announced: str, caller: Caller
) -> Response:
    """The same content announced while another upload of it still arrives, unchecked: this
    body is received and checked in full, then this upload takes the job that the other
    one verified, or, when the other was refused (it lied, or stalled past the body
    timeout), opens the job itself. An upload never depends on another's honesty."""
    received = await receive(service, request, raw_only=True)
    try:
        if received.sha256 != announced:
            raise ApiError(400, "the body's SHA-256 is not the one its Content-Digest announced")
        job_id, deadline = _job_id(params, announced), time.monotonic() + STALL_SECONDS
        while time.monotonic() < deadline:
            record = await run_in_threadpool(service.records.get, job_id)
            if record is None and service.spool.input(job_id).exists():
                pass  # the other upload was refused: its runner has yet to let its input go
            elif record is None or record.get("uploaded") != "0":
                return await run_in_threadpool(_open_job, service, params, received, caller)
            await asyncio.sleep(ARRIVING_POLL)
        raise ApiError(
            503,
            "another upload of this content is still arriving; try again later",
            {"Retry-After": "60"},
        )
    finally:
        service.spool.discard(received.path)  # kept by now, or not wanted


_OWNERS_ONLY = (
    "name",
    "size",
    "created",
    "started",
    "answered",
    "finished",
    "cases_per_second",
    "chunks",
    "done_chunks",
    "judging",
    "webhook",
    "result_sha256",
    "result_bytes",
    "total",
    "invalid",
    "done",
    "errors",
    "exit_code",
)


def _known(service: ServerState, record: dict[str, str], caller: Caller) -> dict[str, Any]:
    """An upload of content that has a job: that job, as much of it as the caller may read
    (another owner's file name, times and outcome are not for a submit-only token)."""
    body = job_view(service, record)
    if not caller.may_read(record):
        for key in _OWNERS_ONLY:
            body.pop(key, None)
    return body


def _job_id(params: dict[str, str], digest: str) -> str:
    """The job an upload of this content and these parameters is."""
    return job_id_for(get_problem(params["problem"]), digest, params["keep_going"] == "1")


def _open_record(
    service: ServerState, job_id: str, fields: dict[str, str]
) -> tuple[bool, dict[str, str]]:
    existing = service.records.get(job_id)
    stale = (
        existing is not None
        and existing.get("state") == "done"
        and not (service.spool.result(job_id).exists())
    )
    opened = service.records.open(job_id, fields, replace_done=stale)
    return opened, service.records.get(job_id) or {}


def _fields(params: dict[str, str], caller: Caller, *, size: str, uploaded: str) -> dict[str, str]:
    """A new upload's record."""
    return {
        "problem": params["problem"],
        "name": params["name"],
        "size": size,
        "lane": params["lane"],
        "keep_going": params["keep_going"],
        "callback_url": params.get("callback_url", ""),
        "owner": caller.name,
        "uploaded": uploaded,
    }


def _check_length(request: Request, limit: int) -> None:
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise ApiError(413, f"the upload is larger than limits.max_upload_bytes ({limit})")


def _check_raw(request: Request) -> None:
    if request.headers.get("content-type", "").startswith(("multipart/", "application/json")):
        raise ApiError(415, "PUT takes the raw file as the body (multipart: use POST)")


async def receive(
    service: ServerState, request: Request, *, into: Path | None = None, raw_only: bool = False
) -> Received:
    """The body streamed to the spool (a form's `file` part for POST, unless `raw_only`)."""
    limit = service.settings.limits.max_upload_bytes
    _check_length(request, limit)
    content_type = request.headers.get("content-type", "")
    try:
        if request.method == "POST" and not raw_only:
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
    service: ServerState, params: dict[str, str], received: Received, caller: Caller
) -> Response:
    job_id = _job_id(params, received.sha256)
    name = params.get("name") or _file_name(received.filename) or f"{job_id}.in"
    params = {**params, "name": name}
    opened, record = _open_record(
        service, job_id, _fields(params, caller, size=str(received.size), uploaded="1")
    )
    if not opened:
        return JSONResponse(_known(service, record, caller), 200)
    service.spool.keep(received, job_id)
    return _created(service, job_id, _start(service, job_id, params))


def _file_name(filename: str | None) -> str:
    """The last part of a browser's file name, if it is a usable one."""
    base = (filename or "").replace("\\", "/").rsplit("/", 1)[-1]
    return base if base and len(base) <= 255 and "\0" not in base and "\n" not in base else ""
