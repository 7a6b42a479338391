"""Connections to the Redis that the sentinels name master, asked again at every reconnect.

redis-py (8.x) reconnects a dropped connection inside a command's retry loop through
`connect_check_health`, past the `connect()` that asks the sentinels (redis-py#3874): after a
failover every retry went to the dead primary, for as long as the retry policy lasted (70 s
here), and then the command failed. These classes route that reconnect through `connect()`.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from redis.sentinel import SentinelManagedConnection


class FollowingConnection(SentinelManagedConnection):
    """A sentinel-managed connection whose every reconnect asks the sentinels first."""

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
