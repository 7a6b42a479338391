"""Webhooks: which callback URLs are allowed, how a delivery is signed, and delivering it."""

from __future__ import annotations

import fnmatch
import hashlib
import hmac
import ipaddress
import json
import socket
import time
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import httpx

from pipeline.config import ServerSettings

SIGNATURE_HEADER = "Gamebatch-Signature"  # t=<unix time>,v1=<hex HMAC-SHA256 of "t.body">
_MAX_PAUSE = 60.0


class CallbackRefused(ValueError):
    """A callback URL the configuration does not allow."""


def check_callback(url: str, settings: ServerSettings) -> str:
    """The URL, if callbacks may go there; else CallbackRefused says why."""
    if not settings.webhook_secret:
        raise CallbackRefused("callbacks need the setting server.webhook_secret (to sign them)")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise CallbackRefused("callback_url must be an http:// or https:// URL")
    if parts.username or parts.password:
        raise CallbackRefused("callback_url may not hold credentials")
    host = parts.hostname.lower()
    if not any(fnmatch.fnmatchcase(host, pattern.lower()) for pattern in settings.webhook_hosts):
        raise CallbackRefused(f"callbacks to {host} are not allowed (setting server.webhook_hosts)")
    return url


def check_addresses(host: str, port: int, settings: ServerSettings) -> None:
    """Refuse a host that resolves into a private network the configuration does not open
    (loopback, link-local, RFC 1918, ...): a callback must not reach into the server's own."""
    allowed = [ipaddress.ip_network(n, strict=False) for n in settings.webhook_private_networks]
    for info in socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP):
        address = ipaddress.ip_address(info[4][0])
        if address.is_global or any(address in network for network in allowed):
            continue
        raise CallbackRefused(f"{host} resolves to {address}, a private address")


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """The signature header's value: the receiver recomputes it over "timestamp.body"."""
    mac = hmac.new(secret.encode(), str(timestamp).encode() + b"." + body, hashlib.sha256)
    return f"t={timestamp},v1={mac.hexdigest()}"


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
    """POST the payload, signed, retrying with doubling pauses; `on_attempt` gets the delivery
    state after every try. Whether the receiver accepted it (a 2xx)."""
    body = json.dumps({"event": event, **payload}, separators=(",", ":")).encode()
    state: dict[str, Any] = {"state": "pending", "attempts": 0, "delivery": str(uuid.uuid4())}
    pause = 1.0
    for attempt in range(1, settings.webhook_attempts + 1):
        state["attempts"] = attempt
        try:
            status = _post(url, event, body, state["delivery"], settings)
            state["status"] = status
            if 200 <= status < 300:
                state["state"] = "delivered"
                on_attempt(state)
                return True
            state["error"] = f"HTTP {status}"
        except CallbackRefused as exc:
            state.update(state="failed", error=str(exc))
            on_attempt(state)
            return False
        except (httpx.HTTPError, OSError) as exc:
            state["error"] = f"{type(exc).__name__}: {exc}"[:200]
        last = attempt == settings.webhook_attempts
        state["state"] = "failed" if last else "retrying"
        on_attempt(state)
        if not last:
            sleep(pause)
            pause = min(pause * 2, _MAX_PAUSE)
    return False


def _post(url: str, event: str, body: bytes, delivery: str, settings: ServerSettings) -> int:
    """One signed delivery (addresses checked first); the receiver's status."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    check_addresses(parts.hostname or "", port, settings)
    headers = {
        "Content-Type": "application/json",
        "Gamebatch-Event": event,
        "Gamebatch-Delivery": delivery,
        SIGNATURE_HEADER: signature(settings.webhook_secret or "", int(time.time()), body),
    }
    response = httpx.post(url, content=body, headers=headers, timeout=settings.webhook_timeout,
                          follow_redirects=False)  # fmt: skip
    return response.status_code
