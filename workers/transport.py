"""kombu's Redis transport, except that a malformed message is dropped, not fatal, and an
acknowledgement that a failover lost frees the worker's prefetch slot all the same.

kombu decodes a message's envelope (JSON) and body (base64) in the worker's event loop, where
an exception ends the Celery worker ("Unrecoverable error"); anyone who can push one bad
message onto a queue could stop every worker of a cluster, one after the other. Here the
message, already taken off the queue, is logged and dropped, and the worker goes on.

kombu's ack removes the message from Redis's unacked index, then from the channel's own count
of delivered messages; when the first fails (the primary gone, or refusing writes while it is
cut off from its replica), the second never happens, and once as many acks as the prefetch
window have failed the channel takes no message again: the worker idles for ever beside a
full queue (found by the partition bench, issue 43). Here the count is freed anyway; the
message stays in the unacked index, is restored after the visibility timeout, and its chunk,
answered by then, is a no-op.
"""

from __future__ import annotations

import logging
from queue import Empty
from typing import Any

import redis
from kombu import transport as kombu_transport
from kombu.transport import redis as kombu_redis
from kombu.transport import virtual as kombu_virtual

from pipeline.store.following import FollowingConnection

log = logging.getLogger(__name__)

# What decoding raises: bad JSON or base64 (ValueError), an envelope of another shape
_MALFORMED = (ValueError, TypeError, KeyError, AttributeError)


class _Tolerant:
    """Reads that survive malformed messages, and a closed channel taken for a lost
    connection (mixed into kombu's channels)."""

    connection: Any

    def _connparams(self, asynchronous: bool = False) -> Any:
        # kombu can hand a pooled producer the channel a failover closed (its connection is
        # None); a lost connection is what kombu's ensure() reconnects and publishes again on,
        # where an AttributeError would end the command
        # (and a worker that closes its channel after losing the broker has no connection
        # details left: the close's restore of unacked messages must fail as a lost
        # connection, which Celery ignores, not as an AttributeError that ends the worker)
        if self.connection is None or getattr(self.connection, "client", None) is None:
            raise redis.ConnectionError("the broker channel was closed (a failover?)")
        return super()._connparams(asynchronous)  # type: ignore[misc]

    def _brpop_read(self, **options: Any) -> Any:
        try:
            return super()._brpop_read(**options)  # type: ignore[misc]
        except _MALFORMED as exc:
            _dropped(exc)
            return True  # a message was read (and dropped): poll again

    def _get(self, queue: Any, timeout: Any = None) -> Any:
        try:
            return super()._get(queue)  # type: ignore[misc]
        except _MALFORMED as exc:
            _dropped(exc)
            raise Empty() from None


class QoS(kombu_redis.QoS):
    """Acks and rejects that free the prefetch slot even when Redis does not take them."""

    def ack(self, delivery_tag: Any) -> None:
        try:
            super().ack(delivery_tag)  # type: ignore[no-untyped-call]
        except (redis.ConnectionError, redis.TimeoutError):
            kombu_virtual.QoS.ack(self, delivery_tag)  # type: ignore[no-untyped-call]
            raise  # Celery logs it ("Couldn't ack"), and goes on

    def reject(self, delivery_tag: Any, requeue: bool = False) -> None:
        try:
            super().reject(delivery_tag, requeue)  # type: ignore[no-untyped-call]
        except (redis.ConnectionError, redis.TimeoutError):
            kombu_virtual.QoS.ack(self, delivery_tag)  # type: ignore[no-untyped-call]
            raise


class Channel(_Tolerant, kombu_redis.Channel):
    """kombu's Redis channel, tolerant."""

    QoS = QoS


class SentinelChannel(_Tolerant, kombu_redis.SentinelChannel):
    """kombu's Sentinel channel, tolerant, with the data Redis's user and password given as
    transport options (`master_username`, `master_password`) rather than in the URL."""

    from_transport_options = (  # type: ignore[assignment]
        *kombu_redis.SentinelChannel.from_transport_options,
        "master_username",
        "master_password",
    )
    master_username: str | None = None
    master_password: str | None = None
    connection_class = FollowingConnection  # follows a failover on every reconnect
    QoS = QoS

    def _connparams(self, asynchronous: bool = False) -> Any:
        params = super()._connparams(asynchronous)
        if self.master_password:
            params["password"] = self.master_password
        if self.master_username:
            params["username"] = self.master_username
        return params


# kombu's ensure() (a publish's retries) gives up on a connection error that follows a good
# reconnect unless the transport says which errors are recoverable; a primary that refuses
# writes for want of replicas (a lost connection here, see following.py) answers a reconnect
# and refuses again for seconds, so a publish ended after one retry. Said here as kombu counts
# them when a transport is silent (every connection and channel error), retries then go on
# as the publish's retry policy allows.
_RECOVERABLE = (*kombu_redis.Transport.connection_errors, *kombu_redis.Transport.channel_errors)


class Transport(kombu_redis.Transport):
    """The Redis transport with the tolerant channel (for `redis://` and `rediss://`)."""

    Channel = Channel
    recoverable_connection_errors = _RECOVERABLE
    recoverable_channel_errors = ()


class SentinelTransport(kombu_redis.SentinelTransport):
    """The Sentinel transport with the tolerant channel (for `sentinel://`)."""

    Channel = SentinelChannel
    recoverable_connection_errors = _RECOVERABLE
    recoverable_channel_errors = ()


def install() -> None:
    """Make `redis://`, `rediss://` and `sentinel://` URLs use these transports in this
    process (through kombu's alias table, so that URLs, TLS options and the banner stay as
    they are)."""
    for scheme in ("redis", "rediss"):
        kombu_transport.TRANSPORT_ALIASES[scheme] = f"{__name__}:Transport"
    kombu_transport.TRANSPORT_ALIASES["sentinel"] = f"{__name__}:SentinelTransport"


def _dropped(exc: Exception) -> None:
    log.error("gamebatch: dropped a malformed message: %s: %s", type(exc).__name__, exc)
