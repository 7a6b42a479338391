"""The OpenAPI document of `/v1` (served at /v1/openapi.json)."""

from __future__ import annotations

from typing import Any

from pipeline.store.jobstate import JobState

_ERROR = {
    "description": "an error",
    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
}
_JOB = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Job"}}}}
_JOB_ID = {
    "name": "job",
    "in": "path",
    "required": True,
    "schema": {"type": "string"},
    "description": "<problem>-<24 hex digits of the input's SHA-256>[-keep-going]",
}
_UPLOAD_PARAMS = [
    {"name": "problem", "in": "query", "required": True, "schema": {"type": "string"}},
    {"name": "lane", "in": "query", "schema": {"enum": ["auto", "interactive", "bulk"]}},
    {
        "name": "keep_going",
        "in": "query",
        "schema": {"enum": ["0", "1"]},
        "description": "mark invalid cases INVALID instead of refusing the file",
    },
    {
        "name": "callback_url",
        "in": "query",
        "schema": {"type": "string", "format": "uri"},
        "description": "POSTed to, signed (Gamebatch-Signature), when the job ends",
    },
    {
        "name": "name",
        "in": "query",
        "schema": {"type": "string"},
        "description": "the file name that error messages use",
    },
]
_STALLED = {"description": "the body sent nothing for server.body_timeout seconds", **_ERROR}
_PAGING = [
    {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 500}},
    {
        "name": "cursor",
        "in": "query",
        "schema": {"type": "string"},
        "description": "where the previous page ended (its `next` link)",
    },
]
_RANGED = {
    "206": {"description": "a range of it"},
    "400": {"description": "a malformed Range header", **_ERROR},
    "416": {
        "description": "a range past the end (Content-Range: bytes */SIZE)",
        **_ERROR,
        "headers": {"Content-Range": {"schema": {"type": "string"}}},
    },
}
_UPLOADED = {
    "201": {"description": "a new job", **_JOB},
    "200": {"description": "the same content was uploaded before: that job", **_JOB},
    "400": _ERROR,
    "401": _ERROR,
    "403": _ERROR,
    "408": _STALLED,
    "413": _ERROR,
    "415": _ERROR,
    "422": _ERROR,
    "503": {"description": "too many unfinished jobs (see Retry-After)", **_ERROR},
}


def _path(name: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    """A path parameter (a string unless `schema` says otherwise)."""
    return {"name": name, "in": "path", "required": True, "schema": schema or {"type": "string"}}


def _read(summary: str, responses: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"summary": summary, "responses": {"401": _ERROR, "403": _ERROR, **responses}, **extra}


def _archive_post(summary: str, parameters: list[dict[str, Any]]) -> dict[str, Any]:
    """A POST of an archive that makes a run (a grading record: a search, a verification)."""
    return _read(
        summary,
        {
            "201": {"description": "a new run"},
            "200": {"description": "the same archive and parameters: that run"},
            "400": _ERROR,
            "408": _STALLED,
            "413": _ERROR,
            "422": _ERROR,
            "503": _ERROR,
        },
        parameters=parameters,
        requestBody={
            "required": True,
            "content": {
                "application/octet-stream": {"schema": {"type": "string", "format": "binary"}}
            },
        },
    )


def _package_paths() -> dict[str, Any]:
    """Verifications and package gradings: an archive of package/ (and progs/ or subs/)."""
    paths: dict[str, Any] = {}
    kinds = {
        "verifications": (
            "Verify a problem package (package/) as problemtools does",
            ["report.json"],
        ),
        "package-gradings": (
            "Grade programs (progs/) or output files (subs/) by a problem package (package/)",
            ["report.json", "junit", "scoreboard.csv"],
        ),
    }
    for route, (summary, reports) in kinds.items():
        limits = () if route == "verifications" else ("time_limit", "memory_limit", "output_limit")
        params = [
            {"name": n, "in": "query", "required": False, "schema": {"type": "number"}}
            for n in ("max_time", *limits)
        ]
        paths[f"/v1/{route}"] = {"post": _archive_post(summary, params)}
        paths[f"/v1/{route}/{{grading}}"] = {
            "parameters": [_path("grading")],
            "get": _read(
                "Its state, then its summary ({ok, lines}) and links to its reports",
                {"200": {"description": "the run"}, "404": _ERROR},
            ),
            "delete": _read(
                "Cancel it (its owner, or an admin)",
                {"200": {"description": "cancelled"}, "404": _ERROR, "409": _ERROR},
            ),
        }
        paths[f"/v1/{route}/{{grading}}/{{report}}"] = {
            "parameters": [_path("grading"), _path("report", {"enum": reports})],
            "get": _read(
                "A report of a done run",
                {"200": {"description": "the file"}, **_RANGED, "404": _ERROR, "409": _ERROR},
            ),
        }
    return paths


DOCUMENT: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {
        "title": "gamebatch",
        "version": "1",
        "description": "Upload multi-case game files, follow their jobs, download results."
        " Jobs are named by their content: uploading the same file again"
        " is idempotent and returns the existing job.",
    },
    "security": [{"bearer": []}],
    "paths": {
        "/v1/jobs": {
            "put": {
                "summary": "Upload a file (the raw body) as a job",
                "parameters": _UPLOAD_PARAMS,
                "responses": _UPLOADED,
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/octet-stream": {
                            "schema": {"type": "string", "format": "binary"}
                        }
                    },
                },
            },
            "post": {
                "summary": "Upload a file as the `file` part of a multipart form",
                "parameters": _UPLOAD_PARAMS,
                "responses": _UPLOADED,
                "requestBody": {
                    "required": True,
                    "content": {
                        "multipart/form-data": {
                            "schema": {
                                "type": "object",
                                "properties": {"file": {"type": "string", "format": "binary"}},
                            }
                        }
                    },
                },
            },
            "get": _read(
                "List jobs, newest first",
                {"200": {"description": "a page of jobs, and `next`"}, "400": _ERROR},
                parameters=_PAGING,
            ),
        },
        "/v1/jobs/{job}": {
            "parameters": [_JOB_ID],
            "get": _read(
                "A job: state, counters, first errors, links",
                {"200": {"description": "the job", **_JOB}, "404": _ERROR},
            ),
            "delete": _read(
                "Cancel a job (its owner, or an admin)",
                {"200": {"description": "cancelled", **_JOB}, "404": _ERROR, "409": _ERROR},
            ),
        },
        "/v1/jobs/{job}/result": {
            "parameters": [_JOB_ID],
            "get": _read(
                "The result file (Range, ETag: its SHA-256)",
                {
                    "200": {"description": "one answer per line", "content": {"text/plain": {}}},
                    **_RANGED,
                    "304": {"description": "unchanged"},
                    "404": _ERROR,
                    "409": {"description": "not complete yet", **_ERROR},
                },
            ),
        },
        "/v1/jobs/{job}/errors": {
            "parameters": [_JOB_ID],
            "get": _read(
                "A keep-going job's invalid cases, one error line each",
                {"200": {"description": "error lines"}, "404": _ERROR, "409": _ERROR},
            ),
        },
        "/v1/batches": {
            "post": _read(
                "One callback once every job of a batch has ended (a job the token may not"
                " read is answered 404 like one that does not exist)",
                {
                    "201": {"description": "the batch"},
                    "400": _ERROR,
                    "404": _ERROR,
                    "408": _STALLED,
                    "413": _ERROR,
                    "422": {"description": "a callback_url that is refused", **_ERROR},
                },
                requestBody={
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "required": ["jobs", "callback_url"],
                                "properties": {
                                    "jobs": {"type": "array", "items": {"type": "string"}},
                                    "callback_url": {"type": "string"},
                                },
                            }
                        }
                    }
                },
            ),
        },
        "/v1/batches/{batch}": {
            "get": _read(
                "A batch and its callback's delivery state",
                {"200": {"description": "the batch"}, "404": _ERROR},
                parameters=[_path("batch")],
            ),
        },
        "/v1/events": {
            "get": _read(
                "Server-sent events: created, progress (at most 1/s per job), done,"
                " failed, cancelled, refused (an upload that became no job), grading.*;"
                " each `id:` is a resume token",
                {
                    "200": {"description": "an event stream", "content": {"text/event-stream": {}}},
                    "400": _ERROR,
                },
                parameters=[
                    {
                        "name": "since",
                        "in": "query",
                        "schema": {"type": "string"},
                        "description": "resume after this event id (or Last-Event-ID);"
                        " 0: every event kept",
                    },
                    {"name": "job", "in": "query", "schema": {"type": "string"}},
                ],
            ),
        },
        "/v1/problems": {
            "get": _read(
                "The games this server solves", {"200": {"description": "{problems: [names]}"}}
            )
        },
        "/v1/gradings": {
            "post": _read(
                "Grade an archive (tar, tar.gz or zip) in the bulk layout",
                {
                    "201": {"description": "a new grading"},
                    "200": {"description": "the same archive was graded before: that grading"},
                    "400": _ERROR,
                    "408": _STALLED,
                    "413": _ERROR,
                    "422": _ERROR,
                    "503": _ERROR,
                },
                parameters=[
                    {
                        "name": "problem",
                        "in": "query",
                        "required": True,
                        "schema": {"type": "string"},
                    },
                    {"name": "ignore_case", "in": "query", "schema": {"enum": ["0", "1"]}},
                    {
                        "name": "keep_going",
                        "in": "query",
                        "schema": {"enum": ["0", "1"]},
                        "description": "grade the other tests when one is invalid",
                    },
                ],
                requestBody={
                    "required": True,
                    "content": {
                        "application/octet-stream": {
                            "schema": {"type": "string", "format": "binary"}
                        }
                    },
                },
            ),
            "get": _read(
                "List gradings, newest first",
                {"200": {"description": "a page of gradings, and `next`"}, "400": _ERROR},
                parameters=_PAGING,
            ),
        },
        "/v1/gradings/{grading}": {
            "parameters": [_path("grading")],
            "get": _read(
                "A grading: state, then summary and links to its reports",
                {"200": {"description": "the grading"}, "404": _ERROR},
            ),
            "delete": _read(
                "Cancel a grading (its owner, or an admin)",
                {"200": {"description": "cancelled"}, "404": _ERROR, "409": _ERROR},
            ),
        },
        "/v1/gradings/{grading}/{report}": {
            "parameters": [
                _path("grading"),
                _path(
                    "report",
                    {"enum": ["report.json", "junit", "scoreboard.csv", "scoreboard.json"]},
                ),
            ],
            "get": _read(
                "A report of a done grading (Range)",
                {"200": {"description": "the report"}, **_RANGED, "404": _ERROR, "409": _ERROR},
            ),
        },
        "/v1/hacks": {
            "post": _archive_post(
                "Search each program of an archive (progs/, tests/ optional) for an input it"
                " gets wrong",
                [
                    {"name": n, "in": "query", "required": n == "problem", "schema": s}
                    for n, s in (
                        ("problem", {"type": "string"}),
                        ("seed", {"type": "integer"}),
                        ("budget", {"type": "number", "description": "seconds"}),
                        ("cases", {"type": "integer", "description": "per contestant"}),
                        ("largest", {"type": "integer"}),
                        ("time_limit", {"type": "number"}),
                        ("memory_limit", {"type": "integer"}),
                        ("output_limit", {"type": "integer"}),
                    )
                ],
            ),
        },
        "/v1/hacks/{hack}": {
            "parameters": [_path("hack")],
            "get": _read(
                "A hack search: state, then how many were hacked and links to its reports",
                {"200": {"description": "the search"}, "404": _ERROR},
            ),
            "delete": _read(
                "Cancel a hack search (its owner, or an admin)",
                {"200": {"description": "cancelled"}, "404": _ERROR, "409": _ERROR},
            ),
        },
        "/v1/hacks/{hack}/{report}": {
            "parameters": [
                _path("hack"),
                _path("report", {"enum": ["report.json", "hacks.in", "hacks.ans"]}),
            ],
            "get": _read(
                "The JSON report of a done search, or its counterexamples as one test",
                {"200": {"description": "the file"}, **_RANGED, "404": _ERROR, "409": _ERROR},
            ),
        },
        **_package_paths(),
        "/v1/gradings/{grading}/cases/{test}/{number}": {
            "get": _read(
                "The input of one case of a test, shortened",
                {"200": {"description": "{test, case, input}"}, "404": _ERROR},
                parameters=[_path(n) for n in ("grading", "test", "number")],
            ),
        },
        "/healthz": {
            "get": {
                "summary": "Redis reachable, workers and runners alive",
                "security": [],
                "responses": {"200": {"description": "healthy"}, "503": {"description": "not"}},
            }
        },
        "/metrics": {
            "get": _read(
                "Prometheus metrics (admin scope)", {"200": {"description": "text format"}}
            )
        },
    },
    "components": {
        "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        "schemas": {
            "Error": {
                "type": "object",
                "required": ["error"],
                "properties": {"error": {"type": "string"}},
            },
            "Job": {
                "type": "object",
                "required": ["id", "problem", "state", "links"],
                "properties": {
                    "id": {"type": "string"},
                    "problem": {"type": "string"},
                    "name": {"type": "string"},
                    "state": {"enum": [state.value for state in JobState]},
                    "total": {"type": ["integer", "null"]},
                    "done": {"type": ["integer", "null"]},
                    "errors": {"type": "array", "items": {"type": "string"}},
                    "result_sha256": {"type": "string"},
                    "webhook": {"type": "object"},
                    "links": {"type": "object"},
                },
            },
        },
    },
}
