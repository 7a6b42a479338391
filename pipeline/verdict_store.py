"""Where each output file's verdicts are kept by their key: Redis (`gb:verdicts:KEY`), or a
dict for a grading made in one process."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from pipeline import keys
from pipeline.verdicts import FileVerdicts


class VerdictStore(Protocol):
    """Where each file's verdicts are kept by key: Redis, or a dict."""

    def known(self, keys: list[str]) -> list[bool]: ...
    def put_many(self, items: Iterable[tuple[str, FileVerdicts]]) -> None: ...
    def get_many(self, keys: list[str]) -> list[FileVerdicts | None]: ...


class MemoryVerdicts:
    """Verdicts in this process, stored as they are in Redis."""

    def __init__(self) -> None:
        self._kept: dict[str, str] = {}

    def known(self, keys: list[str]) -> list[bool]:
        return [key in self._kept for key in keys]

    def put_many(self, items: Iterable[tuple[str, FileVerdicts]]) -> None:
        self._kept.update((key, verdicts.encode()) for key, verdicts in items)

    def get_many(self, keys: list[str]) -> list[FileVerdicts | None]:
        return [FileVerdicts.decode(self._kept[k]) if k in self._kept else None for k in keys]


class RedisVerdicts:
    """Verdicts in Redis (`gb:verdicts:{key}`), kept for `ttl` seconds after each use."""

    BATCH = 500  # keys per round trip

    def __init__(self, client: Any, ttl: int) -> None:
        self.client, self.ttl = client, ttl

    def known(self, keys_: list[str]) -> list[bool]:
        found: list[bool] = []
        for start in range(0, len(keys_), self.BATCH):
            with self.client.pipeline(transaction=False) as pipe:
                for key in keys_[start : start + self.BATCH]:
                    pipe.expire(keys.verdicts(key), self.ttl)  # 1 when it exists
                found += [bool(n) for n in pipe.execute()]
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
