"""Connections to the Redis that the sentinels name master, asked again at every reconnect.

redis-py (8.x) reconnects a dropped connection inside a command's retry loop through
`connect_check_health`, past the `connect()` that asks the sentinels (redis-py#3874): after a
failover every retry went to the dead primary, for as long as the retry policy lasted (70 s
here), and then the command failed. These classes route that reconnect through `connect()`.
"""

from __future__ import annotations

import time
from functools import cache
from typing import Any

from redis.exceptions import ConnectionError, ResponseError
from redis.sentinel import SentinelManagedConnection

NO_REPLICAS = "NOREPLICAS"  # a primary that takes no writes: too few replicas in sync
# a script's write refused by a demoted primary: Redis reports it as the script's error,
# which redis-py does not take for the ReadOnlyError it turns into a reconnect
READ_ONLY = "-READONLY"
NO_REPLICAS_PAUSE = 0.5  # seconds before such a refusal is reported as a lost connection


class FollowingConnection(SentinelManagedConnection):
    """A sentinel-managed connection whose every reconnect asks the sentinels first, and for
    which a primary that refuses writes for want of replicas (min-replicas-to-write: it is
    cut off from them, or being replaced), or refuses a script's write as a replica now, is
    a lost connection, retried on whichever Redis the sentinels name then: the write was
    not made."""

    def read_response(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().read_response(*args, **kwargs)
        except ResponseError as exc:
            refused = NO_REPLICAS in str(exc) or READ_ONLY in str(exc)
            if not refused or not self.connection_pool.is_master:
                raise
            self.disconnect()  # type: ignore[no-untyped-call]
            # the refusal lasts seconds: a retry at once (kombu's reconnects succeed at once,
            # then spend their whole retry budget in a second) would only be refused again
            time.sleep(NO_REPLICAS_PAUSE)
            raise ConnectionError(f"the primary takes no writes now: {exc}") from None

    def connect_check_health(
        self, check_health: bool = True, retry_socket_connect: bool = True
    ) -> None:
        if retry_socket_connect:  # a reconnect from a command, not from connect() itself
            self.connect()  # type: ignore[no-untyped-call]
            return
        super().connect_check_health(check_health, retry_socket_connect)


@cache
def async_following_connection() -> type[Any]:
    """The asyncio twin of FollowingConnection (built on first use: redis.asyncio is big)."""
    from redis.asyncio.sentinel import SentinelManagedConnection as AsyncManaged

    class AsyncFollowingConnection(AsyncManaged):
        async def connect_check_health(
            self, check_health: bool = True, retry_socket_connect: bool = True
        ) -> None:
            if retry_socket_connect:
                await self.connect()  # type: ignore[no-untyped-call]
                return
            await super().connect_check_health(check_health, retry_socket_connect)

    return AsyncFollowingConnection
