"""One life for what a runner runs, a job or a grading: begun unless it ended while it
waited, then ended once, in its record and its event together."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from pipeline.errors import GamebatchError, JobCancelled, JobFailed
from pipeline.store.records import Records

log = logging.getLogger("gamebatch.server")
Ending = tuple[str, dict[str, Any]]  # the state it ended in, and the record's fields


def ending_of(exc: Exception, record_id: str, shown: Callable[[str], str] = str) -> Ending:
    """How a run that raised `exc` ends; `shown` rewrites messages for the client."""
    if isinstance(exc, JobCancelled):  # by `gamebatch cancel`, which ended the record too
        return "cancelled", {}
    if isinstance(exc, JobFailed):
        return "failed", {"error": shown(str(exc)), "exit_code": 1}
    if isinstance(exc, GamebatchError):
        return "failed", {"error": shown(str(exc)), "exit_code": exc.exit_code}
    log.exception("%s", record_id)  # the traceback only in the server's log
    return "failed", {"error": f"internal error: {type(exc).__name__}", "exit_code": 1}


def run_recorded(
    records: Records,
    record_id: str,
    work: Callable[[], Ending],
    *,
    begun: dict[str, str | int],
    events: str = "",
    shown: Callable[[str], str] = str,
) -> Ending | None:
    """Run `work` for a record and record how it ended (never raises). The ending, or None
    when nothing was recorded: the record had ended (a cancel) or is gone (a refused upload).
    Events are typed `events` + state; a grading (`events` "grading.") also says it began."""
    if not records.begin(record_id, **begun):
        return None
    if events:
        records.event(f"{events}{begun['state']}", record_id, {})
    try:
        ending = work()
    except Exception as exc:
        ending = ending_of(exc, record_id, shown)
    state, fields = ending
    if not records.finish(record_id, state, event=f"{events}{state}", **fields):
        return None
    return ending
