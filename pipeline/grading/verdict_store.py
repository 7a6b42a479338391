"""Where each output file's verdicts are kept by their key: Redis (`gb:verdicts:KEY`), or a
dict for a grading made in one process."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from pipeline.grading.verdicts import FileVerdicts
from pipeline.store import keys
from pipeline.store.connections import LuaScript


class VerdictStore(Protocol):
    """Where each file's verdicts are kept by key: Redis, or a dict."""

    def known(self, keys: list[str]) -> list[bool]: ...
    def put_many(self, items: Iterable[tuple[str, FileVerdicts]]) -> None: ...
    def get_many(self, keys: list[str]) -> list[FileVerdicts | None]: ...
    def get_bodies(self, keys: list[str]) -> list[Bodies | None]: ...
    def put_bodies(self, items: list[tuple[str, Bodies]]) -> None: ...


Bodies = dict[str, list[str]]  # a file's rendered report bodies, by report kind


class MemoryVerdicts:
    """Verdicts in this process, stored as they are in Redis."""

    def __init__(self) -> None:
        self._kept: dict[str, str] = {}
        self._bodies: dict[str, Bodies] = {}

    def known(self, keys: list[str]) -> list[bool]:
        return [key in self._kept for key in keys]

    def put_many(self, items: Iterable[tuple[str, FileVerdicts]]) -> None:
        self._kept.update((key, verdicts.encode()) for key, verdicts in items)

    def get_many(self, keys: list[str]) -> list[FileVerdicts | None]:
        return [FileVerdicts.decode(self._kept[k]) if k in self._kept else None for k in keys]

    def get_bodies(self, keys: list[str]) -> list[Bodies | None]:
        return [self._bodies.get(key) for key in keys]

    def put_bodies(self, items: list[tuple[str, Bodies]]) -> None:
        self._bodies.update(items)


class RedisVerdicts:
    """Verdicts in Redis (`gb:verdicts:{key}`), kept for `ttl` seconds after each use."""

    BATCH = 500  # keys per round trip

    def __init__(self, client: Any, ttl: int) -> None:
        self.client, self.ttl = client, ttl
        self._renew = LuaScript(client, "renew_all")

    def known(self, keys_: list[str]) -> list[bool]:
        found: list[bool] = []
        for start in range(0, len(keys_), self.BATCH):
            batch = [keys.verdicts(key) for key in keys_[start : start + self.BATCH]]
            found += [c == ord("1") for c in self._renew(keys=batch, args=[self.ttl])]
        return found

    def put_many(self, items: Iterable[tuple[str, FileVerdicts]]) -> None:
        pipe = self.client.pipeline(transaction=False)
        for n, (key, found) in enumerate(items, 1):
            pipe.set(keys.verdicts(key), found.encode(), ex=self.ttl)
            if n % self.BATCH == 0:
                pipe.execute()
        pipe.execute()

    def get_many(self, keys_: list[str]) -> list[FileVerdicts | None]:
        raw = self.client.mget([keys.verdicts(key) for key in keys_]) if keys_ else []
        return [None if value is None else FileVerdicts.decode(value) for value in raw]

    def get_bodies(self, keys_: list[str]) -> list[Bodies | None]:
        raw = self.client.mget([keys.report_bodies(key) for key in keys_]) if keys_ else []
        return [None if value is None else _bodies(value.decode()) for value in raw]

    def put_bodies(self, items: list[tuple[str, Bodies]]) -> None:
        with self.client.pipeline(transaction=False) as pipe:
            for key, bodies in items:
                text = _joined(bodies)
                if text is not None:
                    pipe.set(keys.report_bodies(key), text, ex=self.ttl)
            pipe.execute()


_BODY, _PART = "\x1e", "\x1f"  # record and unit separators: between bodies, between parts


def _joined(bodies: Bodies) -> str | None:
    """The stored form, or None when a part holds a separator (rendered text never does)."""
    if any(_BODY in p or _PART in p for kind, parts in bodies.items() for p in (kind, *parts)):
        return None
    return _BODY.join(_PART.join([kind, *parts]) for kind, parts in bodies.items())


def _bodies(text: str) -> Bodies:
    return {kind: parts for kind, *parts in (body.split(_PART) for body in text.split(_BODY))}
