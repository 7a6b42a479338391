"""The HTTP service's job records, batches and event stream in Redis."""

from __future__ import annotations

import json
import re
import time
from typing import Any

import redis

from pipeline.store import keys
from pipeline.store.connections import LuaScript
from pipeline.store.jobstate import FINISHED, JobState

_TOKEN = re.compile(r"\d{1,20}-\d{1,20}|0")

Record = dict[str, str]
# what an ending's event tells besides its type (the record holds the rest)
EVENT_FIELDS = frozenset(
    {"error", "exit_code", "total", "result_sha256", "result_bytes", "invalid"}
)


def is_event_token(text: str) -> bool:
    """Whether `text` can be a `since` token (an event id of 64-bit parts, or 0)."""
    return _TOKEN.fullmatch(text) is not None and all(
        int(part) < 1 << 64 for part in text.split("-")
    )


class Records:
    """Records of uploaded jobs; `server` names the instance whose spool holds their inputs."""

    def __init__(self, client: redis.Redis, server: str, kind: str = "job") -> None:
        self.client: Any = client  # bytes replies (redis-py's types cannot say so)
        self.server = server
        self.kind = kind  # "job" or "grading": records of each kind live apart
        self._listing = keys.api_listing(kind)
        self._pending = keys.api_pending(server, kind)
        self._open = LuaScript(client, "open_record")
        self._finish = LuaScript(client, "finish_record")
        self._begin = LuaScript(client, "begin_record")

    def _key(self, record_id: str) -> str:
        return keys.api_record(self.kind, record_id)

    def of_kind(self, kind: str) -> Records:
        """The records of another kind on the same connection."""
        return Records(self.client, self.server, kind)

    def open(self, job_id: str, fields: dict[str, str], *, replace_done: bool = False) -> bool:
        """A new record (True), unless one of the same content stands (False)."""
        now = time.time()
        values = {
            **fields,
            "id": job_id,
            "state": JobState.QUEUED.value,
            "created": f"{now:.6f}",
            "server": self.server,
        }
        flat = [part for pair in values.items() for part in pair]
        keys_ = [self._key(job_id), self._listing, self._pending]
        opened = self._open(keys=keys_, args=[now, job_id, int(replace_done), *flat])
        return bool(opened)

    def get(self, job_id: str) -> Record | None:
        """A job's record, or None."""
        raw = self.client.hgetall(self._key(job_id))
        return {k.decode(): v.decode() for k, v in raw.items()} or None

    def get_many(self, job_ids: list[str]) -> list[Record | None]:
        """get() of several jobs in one round trip."""
        with self.client.pipeline(transaction=False) as pipe:
            for job_id in job_ids:
                pipe.hgetall(self._key(job_id))
            replies = pipe.execute()
        return [{k.decode(): v.decode() for k, v in raw.items()} or None for raw in replies]

    def update(self, job_id: str, **fields: str | int) -> None:
        """Change fields of an existing record."""
        self.client.hset(self._key(job_id), mapping={k: str(v) for k, v in fields.items()})

    def begin(self, record_id: str, **fields: str | int) -> bool:
        """A runner took the record: set `fields`, unless it has ended (cancelled while it
        waited) or is gone (False, nothing written)."""
        flat = [str(part) for pair in fields.items() for part in pair]
        ended = sorted(FINISHED)
        return bool(self._begin(keys=[self._key(record_id)], args=[len(ended), *ended, *flat]))

    def finish(
        self, record_id: str, state: str, event: str = "", **fields: str | int | bool
    ) -> bool:
        """The job ended: its record says how, the server no longer owes it and, given an
        `event` type, the event says so, all in one write. False when the record has ended
        already (a cancel came first) or is gone (an upload refused meanwhile)."""
        values = {**fields, "state": state, "finished": f"{time.time():.6f}"}
        flat = [str(part) for pair in values.items() for part in pair]
        keys_ = [self._key(record_id), self._pending, keys.API_SOLVED, keys.API_EVENTS]
        solved = int(fields.get("total", 0) or 0) if state == "done" else 0
        data = {k: v for k, v in fields.items() if k in EVENT_FIELDS}
        body = _event_body(event, record_id, data) if event else ""
        ended = sorted(FINISHED)
        args: list[str | int] = [record_id, solved, body, keys.EVENT_CAP, len(ended), *ended, *flat]
        return bool(self._finish(keys=keys_, args=args))

    def settle(self, record_id: str) -> None:
        """The server no longer owes an ended record anything."""
        self.client.srem(self._pending, record_id)

    def finished_before(self, moment: float) -> list[str]:
        """Records listed before `moment` that have ended (or whose record is gone)."""
        found = []
        for member in self.client.zrangebyscore(self._listing, "-inf", moment):
            record = self.get(member.decode())
            if record is None or record.get("state") in FINISHED:
                found.append(member.decode())
        return found

    def solved(self) -> int:
        """Cases of uploaded jobs that ended done, over the life of the cluster."""
        return int(self.client.get(keys.API_SOLVED) or 0)

    def forget(self, job_id: str) -> None:
        """Remove a record that never became a job (an upload that was refused)."""
        pipe = self.client.pipeline()
        pipe.delete(self._key(job_id))
        pipe.zrem(self._listing, job_id)
        pipe.srem(self._pending, job_id)
        pipe.execute()

    def pending(self) -> list[str]:
        """Jobs this server has yet to finish (after a restart: to resume)."""
        return sorted(m.decode() for m in self.client.smembers(self._pending))

    def pending_count(self) -> int:
        """How many jobs this server has yet to finish."""
        return int(self.client.scard(self._pending))

    def page(self, limit: int, before: float | None) -> tuple[list[Record], float | None]:
        """Records newest first, older than `before` (a cursor); the next page's cursor."""
        top = f"({before}" if before is not None else "+inf"
        rows = self.client.zrevrangebyscore(
            self._listing, top, "-inf", start=0, num=limit + 1, withscores=True
        )
        records = [r for member, _ in rows[:limit] if (r := self.get(member.decode()))]
        more = len(rows) > limit
        return records, (float(rows[limit - 1][1]) if more and limit else None)

    def count_by_state(self) -> dict[str, int]:
        """Jobs per state (for /metrics): one pass over the listing."""
        counts: dict[str, int] = {}
        pipe = self.client.pipeline()
        for member in self.client.zrange(self._listing, 0, -1):
            pipe.hget(self._key(member.decode()), "state")
        for state in pipe.execute():
            if state is not None:
                counts[state.decode()] = counts.get(state.decode(), 0) + 1
        return counts

    def event(self, kind: str, job_id: str, data: dict[str, Any]) -> str:
        """Append an event; its id is the token a client resumes from."""
        body = _event_body(kind, job_id, data)
        token = self.client.xadd(
            keys.API_EVENTS, {"data": body}, maxlen=keys.EVENT_CAP, approximate=True
        )
        return str(token.decode())

    def last_event(self) -> str:
        """The newest event's token ("0" when there is none)."""
        rows = self.client.xrevrange(keys.API_EVENTS, count=1)
        return str(rows[0][0].decode()) if rows else "0"

    def open_batch(self, batch_id: str, jobs: list[str], callback_url: str) -> None:
        """A batch: one callback once all of its jobs have ended."""
        self.client.hset(
            keys.api_batch(batch_id),
            mapping={
                "id": batch_id,
                "jobs": json.dumps(jobs),
                "callback_url": callback_url,
                "created": f"{time.time():.6f}",
                "webhook": json.dumps({"state": "waiting"}),
            },
        )
        for job_id in jobs:
            self.client.hset(self._key(job_id), "batch", batch_id)

    def batch(self, batch_id: str) -> Record | None:
        """A batch's record, or None."""
        raw = self.client.hgetall(keys.api_batch(batch_id))
        return {k.decode(): v.decode() for k, v in raw.items()} or None

    def claim_batch(self, batch_id: str) -> bool:
        """Whether this caller is the one to deliver the batch's callback (only one is)."""
        return bool(self.client.hsetnx(keys.api_batch(batch_id), "claimed", self.server))

    def update_batch(self, batch_id: str, **fields: str) -> None:
        """Change fields of a batch."""
        self.client.hset(keys.api_batch(batch_id), mapping=fields)


async def newest_event(client: Any) -> str:
    """The id of the newest event (through an asyncio client), or 0 when there is none."""
    rows = await client.xrevrange(keys.API_EVENTS, count=1)
    return str(rows[0][0].decode()) if rows else "0"


async def read_events(client: Any, since: str, block_ms: int) -> list[tuple[str, str]]:
    """Events after `since` as (token, JSON), waiting up to `block_ms` for the first."""
    found = await client.xread({keys.API_EVENTS: since}, count=500, block=block_ms)
    if not found:
        return []
    return [(token.decode(), fields[b"data"].decode()) for token, fields in found[0][1]]


def _event_body(kind: str, record_id: str, data: dict[str, Any]) -> str:
    return json.dumps({"type": kind, "job": record_id, **data}, separators=(",", ":"))
