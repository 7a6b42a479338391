"""A job as every client sees it (`status`, `status --json`, `GET /v1/jobs`, the page): one
view of its HTTP record, when it was uploaded, and its live counters (no I/O here)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from typing import Any

from pipeline.store.jobstate import JobCounters, JobState

_SHOWN = (  # the fields of an HTTP record a client sees
    "id",
    "problem",
    "name",
    "state",
    "total",
    "invalid",
    "size",
    "exit_code",
    "result_sha256",
    "result_bytes",
    "created",
    "finished",
    "lane",
)
_NUMBERS = ("total", "invalid", "size", "result_bytes", "exit_code")
# a record's states during which the counters say more
LIVE = (JobState.PRODUCING.value, JobState.RUNNING.value)
ERRORS_SHOWN = 10  # chunk failures listed in a view


def public(record: Mapping[str, str]) -> dict[str, Any]:
    """What a client sees of an HTTP record (its error under `error`)."""
    shown: dict[str, Any] = {k: record[k] for k in _SHOWN if k in record}
    for key in _NUMBERS:
        if key in shown:
            with contextlib.suppress(ValueError):
                shown[key] = int(shown[key])
    for key in ("created", "finished"):
        if key in shown:
            shown[key] = float(shown[key])
    shown["keep_going"] = record.get("keep_going") == "1"
    if record.get("error"):
        shown["error"] = record["error"]
    if "webhook" in record:
        shown["webhook"] = json.loads(record["webhook"])
    return shown


FIELDS = (  # every view has every one of these, None where not known (docs/commands.md)
    "id",
    "name",
    "problem",
    "state",
    "size",
    "total",
    "done",
    "invalid",
    "errors",
    "created",
    "started",
    "answered",
    "finished",
    "cases_per_second",
    "chunks",
    "done_chunks",
    "lane",
    "keep_going",
    "exit_code",
    "result_sha256",
    "result_bytes",
    "links",
)
# and these where the job has them, whoever asks: a judging job's programs and runs, an
# upload's webhook delivery
EXTRAS = ("judging", "webhook")


def view(
    record: Mapping[str, str] | None,
    live: JobCounters | None,
    links: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The job, with every key of FIELDS (and of EXTRAS that it has) whoever asks: its
    counters' fields while its keys last, its HTTP record's (when uploaded) over them, the
    record's state unless the counters say more (a job running or complete), errors as one
    list of lines."""
    body: dict[str, Any] = dict.fromkeys(FIELDS)
    body.update(errors=[], links=links or {}, keep_going=False, done=0)
    failures: dict[str, str] = {}
    if live is not None:
        counted = live.as_dict()
        failures = counted.pop("failures")
        body.update(counted)
    if record is not None:
        shown = public(record)
        error = shown.pop("error", None)
        if live is not None and record.get("state") in LIVE:
            if counted["state"] in (JobState.RUNNING, JobState.COMPLETE):
                shown.pop("state", None)  # producing, or ended: the record knows better
        else:
            failures = {}  # ended: the record's error says why
        body.update({k: v for k, v in shown.items() if v is not None})
        body["errors"] = [error] if error else []
        if record.get("state") == "done" and body["total"] is not None:
            body["done"] = body["total"]
    body["errors"] += [f"chunk {k}: {v}" for k, v in failures.items()][:ERRORS_SHOWN]
    return {k: v for k, v in body.items() if k in FIELDS or v is not None}


def status_lines(job: Mapping[str, Any]) -> list[str]:
    """How `status` prints a job's view: one line, then its errors indented."""
    total = "?" if job.get("total") is None else job["total"]
    line = f"{job['id']}  {job['state']:<9} {job.get('done') or 0}/{total} cases"
    if job.get("cases_per_second") is not None:
        seconds = job["answered"] - job["started"]
        line += f"  {seconds:.1f} s, {job['cases_per_second']:,.0f} cases/s"
    if job.get("name"):
        line += f"  {job['name']}"
    lines = [line]
    if job.get("judging"):
        lines.append(f"    {judging_line(job['judging'])}")
    return [*lines, *(f"    {error}" for error in job.get("errors", []))]


def judging_line(judging: Mapping[str, int]) -> str:
    """A judging job's programs and runs, in words."""
    j = judging
    failed = f", {j['failed']} did not compile" if j["failed"] else ""
    return (
        f"programs {j['ready'] - j['failed']}/{j['programs']} compiled{failed};"
        f" {j['cases_run']:,} cases run, {j['cases_kept']:,} verdicts kept from before"
    )
