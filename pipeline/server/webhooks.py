"""Webhooks: which callback URLs are allowed, how a delivery is signed, and delivering it."""

from __future__ import annotations

import fnmatch
import hashlib
import heapq
import hmac
import ipaddress
import itertools
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from pipeline.config import ServerSettings

log = logging.getLogger("gamebatch.server")
SIGNATURE_HEADER = "Gamebatch-Signature"  # t=<unix time>,v1=<hex HMAC-SHA256 of "t.body">
MAX_URL = 2048  # characters of a callback URL
_MAX_PAUSE = 60.0


class CallbackRefused(ValueError):
    """A callback URL the configuration does not allow."""


def check_callback(url: str, settings: ServerSettings) -> str:
    """The URL, if callbacks may go there; else CallbackRefused says why."""
    if not settings.webhook_secret:
        raise CallbackRefused("callbacks need the setting server.webhook_secret (to sign them)")
    if len(url) > MAX_URL:
        raise CallbackRefused(f"callback_url is longer than {MAX_URL} characters")
    if any(ch.isspace() or not ch.isprintable() for ch in url):
        raise CallbackRefused("callback_url may not hold spaces or control characters")
    try:
        parts = urlsplit(url)
        port, hostname = parts.port, parts.hostname
    except ValueError as exc:
        raise CallbackRefused(f"callback_url is not a URL: {exc}") from None
    if parts.scheme not in ("http", "https") or not hostname:
        raise CallbackRefused("callback_url must be an http:// or https:// URL with a host")
    if port == 0:
        raise CallbackRefused("callback_url has port 0")
    if parts.username is not None or parts.password is not None:
        raise CallbackRefused("callback_url may not hold credentials")
    host = _ascii_host(hostname)
    if not any(fnmatch.fnmatchcase(host, pattern.lower()) for pattern in settings.webhook_hosts):
        raise CallbackRefused(f"callbacks to {host} are not allowed (setting server.webhook_hosts)")
    return url


def _ascii_host(hostname: str) -> str:
    """The host as it goes on the wire (IDNA), lower case."""
    try:
        return hostname.encode("idna").decode("ascii").lower()
    except UnicodeError:
        raise CallbackRefused(f"callback_url has a bad host name {hostname[:80]!r}") from None


def checked_address(host: str, port: int, settings: ServerSettings) -> str:
    """The address to connect to, once every address `host` resolves to is public or in
    server.webhook_private_networks (a callback must not reach into the server's networks)."""
    allowed = [ipaddress.ip_network(n, strict=False) for n in settings.webhook_private_networks]
    try:
        found = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
    except UnicodeError:
        raise CallbackRefused(f"cannot resolve {host[:80]!r}") from None
    addresses = [ipaddress.ip_address(str(info[4][0]).partition("%")[0]) for info in found]
    for address in addresses:
        if not address.is_global and not any(address in network for network in allowed):
            raise CallbackRefused(f"{host} resolves to {address}, a private address")
    if not addresses:
        raise OSError(f"{host} resolves to no address")
    return str(addresses[0])


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """The signature header's value: the receiver recomputes it over "timestamp.body"."""
    mac = hmac.new(secret.encode(), str(timestamp).encode() + b"." + body, hashlib.sha256)
    return f"t={timestamp},v1={mac.hexdigest()}"


@dataclass
class Delivery:
    """One callback: its signed body, its delivery state, and the pause before a retry."""

    url: str
    event: str
    body: bytes
    on_attempt: Callable[[dict[str, Any]], None]
    state: dict[str, Any] = field(default_factory=dict)
    pause: float = 1.0

    @classmethod
    def of(
        cls,
        url: str,
        event: str,
        payload: dict[str, Any],
        on_attempt: Callable[[dict[str, Any]], None],
    ) -> Delivery:
        body = json.dumps({"event": event, **payload}, separators=(",", ":")).encode()
        state = {"state": "pending", "attempts": 0, "delivery": str(uuid.uuid4())}
        return cls(url, event, body, on_attempt, state)

    def attempt(self, settings: ServerSettings) -> float | None:
        """Try once and report the state; the pause before the next try, or None when done."""
        state = self.state
        state["attempts"] += 1
        try:
            status = _post(self.url, self.event, self.body, state["delivery"], settings)
            state["status"] = status
            if 200 <= status < 300:
                state.update(state="delivered")
                state.pop("error", None)
                self.on_attempt(state)
                return None
            state["error"] = f"HTTP {status}"
        except ValueError as exc:  # CallbackRefused, or a URL stored before it was checked
            state.update(state="failed", error=str(exc)[:200])
            self.on_attempt(state)
            return None
        except (httpx.HTTPError, OSError) as exc:
            state["error"] = f"{type(exc).__name__}: {exc}"[:200]
        last = state["attempts"] >= settings.webhook_attempts
        state["state"] = "failed" if last else "retrying"
        self.on_attempt(state)
        if last:
            return None
        pause, self.pause = self.pause, min(self.pause * 2, _MAX_PAUSE)
        return pause


def deliver(
    url: str,
    event: str,
    /,
    payload: dict[str, Any],
    settings: ServerSettings,
    on_attempt: Callable[[dict[str, Any]], None],
    *,
    sleep: Callable[[float], None] = time.sleep,
) -> bool:
    """POST the payload, signed, retrying with doubling pauses in this thread; `on_attempt`
    gets the delivery state after every try. Whether the receiver accepted it (a 2xx)."""
    delivery = Delivery.of(url, event, payload, on_attempt)
    while (pause := delivery.attempt(settings)) is not None:
        sleep(pause)
    return bool(delivery.state["state"] == "delivered")


class Outbox:
    """Callbacks queued for sender threads (a slow receiver holds no runner); past
    `webhook_queue` waiting or being sent, a new one fails at once."""

    def __init__(self, settings: ServerSettings) -> None:
        self.settings = settings
        self._due: list[tuple[float, int, Delivery]] = []  # a heap by time to send
        self._ready = threading.Condition()
        self._order = itertools.count()
        self._accepted = 0  # waiting or being sent
        for i in range(settings.webhook_senders):
            threading.Thread(target=self._send, name=f"gamebatch-webhook-{i}", daemon=True).start()

    def post(
        self,
        url: str,
        event: str,
        payload: dict[str, Any],
        on_attempt: Callable[[dict[str, Any]], None],
    ) -> None:
        """Queue a callback (never waits); its state is reported as in `deliver`."""
        delivery = Delivery.of(url, event, payload, on_attempt)
        with self._ready:
            full = self._accepted >= self.settings.webhook_queue
            self._accepted += not full
        if full:
            limit = self.settings.webhook_queue
            error = f"too many callbacks waiting (server.webhook_queue: {limit})"
            delivery.state.update(state="failed", error=error)
        try:
            on_attempt(delivery.state)  # before a sender may report a later state
        except BaseException:
            with self._ready:
                self._accepted -= not full
            raise
        if not full:
            with self._ready:
                heapq.heappush(self._due, (time.monotonic(), next(self._order), delivery))
                self._ready.notify()

    def _send(self) -> None:
        while True:
            with self._ready:
                while not self._due or self._due[0][0] > time.monotonic():
                    self._ready.wait(self._due[0][0] - time.monotonic() if self._due else None)
                delivery = heapq.heappop(self._due)[2]
            try:
                pause = delivery.attempt(self.settings)
            except Exception:  # a report that failed (Redis away): the delivery ends
                log.exception("callback to %s", urlsplit(delivery.url).hostname)
                pause = None
            with self._ready:
                if pause is None:
                    self._accepted -= 1
                else:
                    heapq.heappush(
                        self._due, (time.monotonic() + pause, next(self._order), delivery)
                    )
                    self._ready.notify()


_outboxes: dict[int, Outbox] = {}  # by process id: a forked child starts its own threads
_outbox_lock = threading.Lock()


def send(
    url: str,
    event: str,
    payload: dict[str, Any],
    settings: ServerSettings,
    on_attempt: Callable[[dict[str, Any]], None],
) -> None:
    """Queue a callback in this process's outbox (started on first use)."""
    with _outbox_lock:
        outbox = _outboxes.get(os.getpid())
        if outbox is None:
            outbox = _outboxes[os.getpid()] = Outbox(settings)
    outbox.post(url, event, payload, on_attempt)


def _post(url: str, event: str, body: bytes, delivery: str, settings: ServerSettings) -> int:
    """One signed delivery to the very address that was checked; the receiver's status."""
    parts = urlsplit(check_callback(url, settings))  # again: it may have come another way
    host = _ascii_host(parts.hostname or "")
    https = parts.scheme == "https"
    port = parts.port or (443 if https else 80)
    address = checked_address(host, port, settings)
    literal = f"[{address}]" if ":" in address else address
    named = f"[{host}]" if ":" in host else host
    headers = {
        "Host": f"{named}:{parts.port}" if parts.port else named,
        "Content-Type": "application/json",
        "Gamebatch-Event": event,
        "Gamebatch-Delivery": delivery,
        SIGNATURE_HEADER: signature(settings.webhook_secret or "", int(time.time()), body),
    }
    target = urlunsplit(parts._replace(netloc=f"{literal}:{port}"))
    with httpx.Client(
        timeout=settings.webhook_timeout, follow_redirects=False, trust_env=False
    ) as client:
        response = client.post(
            target,
            content=body,
            headers=headers,
            extensions={"sni_hostname": host} if https else {},
        )
    return response.status_code
