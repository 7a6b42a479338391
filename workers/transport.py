"""kombu's Redis transport, except that a malformed message is dropped, not fatal.

kombu decodes a message's envelope (JSON) and body (base64) in the worker's event loop, where
an exception ends the Celery worker ("Unrecoverable error"); anyone who can push one bad
message onto a queue could stop every worker of a cluster, one after the other. Here the
message, already taken off the queue, is logged and dropped, and the worker goes on.
"""

from __future__ import annotations

import logging
from queue import Empty
from typing import Any

from kombu import transport as kombu_transport
from kombu.transport import redis as kombu_redis

log = logging.getLogger(__name__)

# What decoding raises: bad JSON or base64 (ValueError), an envelope of another shape
_MALFORMED = (ValueError, TypeError, KeyError, AttributeError)


class Channel(kombu_redis.Channel):
    """A channel whose reads survive malformed messages."""

    def _brpop_read(self, **options: Any) -> Any:
        try:
            return super()._brpop_read(**options)  # type: ignore[no-untyped-call]
        except _MALFORMED as exc:
            _dropped(exc)
            return True  # a message was read (and dropped): poll again

    def _get(self, queue: Any, timeout: Any = None) -> Any:
        try:
            return super()._get(queue)  # type: ignore[no-untyped-call]
        except _MALFORMED as exc:
            _dropped(exc)
            raise Empty() from None


class Transport(kombu_redis.Transport):
    """The Redis transport with the tolerant channel (for `redis://` and `rediss://`)."""

    Channel = Channel


def install() -> None:
    """Make `redis://` and `rediss://` URLs use this transport in this process (through
    kombu's alias table, so that URLs, TLS options and the banner stay as they are)."""
    for scheme in ("redis", "rediss"):
        kombu_transport.TRANSPORT_ALIASES[scheme] = f"{__name__}:Transport"


def _dropped(exc: Exception) -> None:
    log.error("gamebatch: dropped a malformed message: %s: %s", type(exc).__name__, exc)
