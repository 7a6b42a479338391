"""Connections to Redis (plain, TLS, a socket or a Sentinel-named master) and the Lua
scripts run on them."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Sequence
from functools import cache
from importlib import resources
from typing import Any, TypeVar

import redis
from redis.backoff import ExponentialBackoff
from redis.exceptions import NoScriptError
from redis.retry import Retry
from redis.sentinel import Sentinel

from pipeline.store.following import FollowingConnection, async_following_connection
from pipeline.urls import SentinelUrl, is_sentinel

T = TypeVar("T")
CLIENT_NAME = "gamebatch-cli"
PATIENCE_SECONDS = 70.0  # how long a worker's or a service's commands retry a lost Redis
# A primary the sentinels may replace can vanish without closing its connections (its host
# gone, or frozen): a read on such a connection waits out the socket timeout before the
# client asks the sentinels again, and a reconnect before they named another one (its
# handshake reaches the frozen process's listen queue) waits it out once more. So theirs is
# short: a command takes milliseconds, and a long reply is many reads.
SENTINEL_SOCKET_TIMEOUT = 2.0
# Celery's connections to the broker (workers.celery_app): kombu drops a BRPOP connection
# whose reply is overdue by this interval, and a synchronous command (an ack, a publish)
# waits at most BROKER_SOCKET_TIMEOUT on a silent broker instead of forever.
BROKER_HEALTH_CHECK_SECONDS = 2
BROKER_SOCKET_TIMEOUT = 5.0


def this_process() -> str:
    """host:pid, how leases, sweeps and manifests name the process holding them."""
    return f"{socket.gethostname()}:{os.getpid()}"


class PatientRetry(Retry):
    """redis-py's retries with backoff (at most 2 s apart) for about `patience` seconds, that
    say once, through `said`, that Redis is lost and how long they go on."""

    def __init__(self, patience: float, said: Callable[[str], None] | None = None) -> None:
        super().__init__(ExponentialBackoff(cap=2.0, base=0.05), int(patience / 2) + 6)
        self.patience, self.said = patience, said

    def call_with_retry(
        self,
        do: Callable[[], T],
        fail: Callable[..., Any],
        is_retryable: Callable[[Exception], bool] | None = None,
        with_failure_count: bool = False,
    ) -> T:
        told = False

        def failed(error: Exception, *count: int) -> Any:
            nonlocal told
            if self.said is not None and not told:
                told = True
                self.said(f"Redis is out of reach ({error}); trying again for {self.patience:g} s")
            return fail(error, *count)

        return super().call_with_retry(do, failed, is_retryable, with_failure_count)


def connect(
    url: str,
    name: str = "gamebatch-worker",
    *,
    patience: float = PATIENCE_SECONDS,
    said: Callable[[str], None] | None = None,
) -> redis.Redis:
    """A client for a broker URL (`redis://`, `rediss://`, `unix://`).

    Commands are retried with backoff for about `patience` seconds (a command's is its
    `failover_seconds`), so that a Redis restart or a failover does not end a producer, a
    collector or a task; `said` hears once when a command starts being retried.
    """
    options: dict[str, Any] = {
        "socket_timeout": 30,
        "socket_connect_timeout": 5,
        "health_check_interval": 30,
        "retry": PatientRetry(patience, said),
        "retry_on_error": [redis.ConnectionError, redis.TimeoutError],
        "client_name": f"{name}-{os.getpid()}",
    }
    if is_sentinel(url):
        options["socket_timeout"] = SENTINEL_SOCKET_TIMEOUT
        options["health_check_interval"] = BROKER_HEALTH_CHECK_SECONDS
        return _master(url, options)
    return redis.Redis.from_url(url, **options)


def connect_async(url: str, name: str) -> Any:
    """An asyncio client for a broker URL (the HTTP service's event stream)."""
    import redis.asyncio
    from redis.asyncio.sentinel import Sentinel as AsyncSentinel

    if not is_sentinel(url):
        return redis.asyncio.Redis.from_url(url, client_name=name)
    found = SentinelUrl.parse(url)
    kwargs = {"password": found.sentinel_password} if found.sentinel_password else {}
    sentinels = AsyncSentinel(list(found.hosts), sentinel_kwargs=kwargs)  # type: ignore[no-untyped-call, unused-ignore]
    return sentinels.master_for(
        found.master,
        db=found.db,
        username=found.username,
        password=found.password,
        client_name=name,
        connection_class=async_following_connection(),
    )


def probe(url: str) -> None:
    """Raise at once (no retries) when the Redis at `url` is unreachable or refuses us."""
    quick = {"socket_timeout": 5, "socket_connect_timeout": 5, "retry": None}
    client = _master(url, quick) if is_sentinel(url) else redis.Redis.from_url(url, **quick)
    try:
        client.ping()
    finally:
        close(client)


def close(client: redis.Redis) -> None:
    """Close a client's connections, and those to the sentinels that named its master."""
    client.close()
    manager = getattr(client.connection_pool, "sentinel_manager", None)
    for asked in getattr(manager, "sentinels", ()):
        asked.close()


def _master(url: str, options: dict[str, Any]) -> redis.Redis:
    """A client of the Redis the sentinels name master now; after a failover its next
    connection (a retry) goes to the new one, and a demoted one's ReadOnlyError is a
    reconnect."""
    found = SentinelUrl.parse(url)
    sentinels = Sentinel(  # type: ignore[no-untyped-call, unused-ignore]
        list(found.hosts),
        socket_timeout=5,
        socket_connect_timeout=5,
        sentinel_kwargs={"password": found.sentinel_password, "socket_timeout": 5}
        if found.sentinel_password
        else {"socket_timeout": 5},
    )
    client: redis.Redis = sentinels.master_for(  # type: ignore[no-untyped-call, unused-ignore]
        found.master,
        redis_class=redis.Redis,
        db=found.db,
        username=found.username,
        password=found.password,
        connection_class=FollowingConnection,
        **options,
    )
    return client


@cache
def script(name: str) -> str:
    """A Lua script of pipeline/store/lua/ (each lists its KEYS and ARGV at its top)."""
    return resources.files("pipeline.store").joinpath(f"lua/{name}.lua").read_text(encoding="utf-8")


class LuaScript:
    """A script of pipeline/store/lua/ run by its digest (EVALSHA), and sent whole (EVAL)
    when the Redis that runs it does not know it even after redis-py loaded it: a failover
    between the load and the run (a new primary has no scripts; a pooled connection may
    still reach the old one)."""

    def __init__(self, client: Any, name: str) -> None:
        self.client, self.text = client, script(name)
        self.by_digest = client.register_script(self.text)

    def __call__(self, keys: Sequence[str], args: Sequence[Any]) -> Any:
        try:
            return self.by_digest(keys=keys, args=args)
        except NoScriptError:
            return self.client.eval(self.text, len(keys), *keys, *args)
