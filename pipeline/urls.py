"""What a URL in the settings names: an object of a remote store (by its scheme), or a Redis
watched by Sentinel, in one string that every process can pass on:

    sentinel://[USER:PASSWORD@]HOST:PORT;sentinel://HOST:PORT;...[/DB]?master_name=NAME
        [&sentinel_password=PASSWORD]

The user and password (of the first entry) are the data Redis's; `sentinel_password` is the
sentinels' own. Kombu gets the plain host list and the rest as transport options (a password
inside its sentinel URL is misread: kombu#1007). No I/O here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit

SCHEME = "sentinel"
# schemes a chunk may name for any worker to read; a local file (file://, a path) is read
# only by workers that see the producer's files (setting file_payloads)
REMOTE = frozenset({"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "http", "https"})
_URL = re.compile(r"^([a-z][a-z0-9+.-]*)://", re.IGNORECASE)


def scheme(text: str) -> str | None:
    """The URL scheme of `text` (lower case), or None for a path."""
    found = _URL.match(text)
    return found.group(1).lower() if found else None


def is_remote(text: str) -> bool:
    """Whether `text` names an object of a remote store (not a local file)."""
    return scheme(text) in REMOTE


def is_sentinel(url: str | None) -> bool:
    """Whether a broker URL names sentinels."""
    return bool(url) and str(url).startswith(f"{SCHEME}://")


@dataclass(frozen=True)
class SentinelUrl:
    """The parts of a sentinel broker URL."""

    hosts: tuple[tuple[str, int], ...]
    master: str
    db: int = 0
    username: str | None = None
    password: str | None = None
    sentinel_password: str | None = None

    @classmethod
    def parse(cls, url: str) -> SentinelUrl:
        """The parts, or ValueError naming what is wrong (never a password)."""
        body, _, query = url.partition("?")
        options = dict(parse_qsl(query))
        entries = [part for part in body.split(";") if part.strip()]
        hosts, username, password, db = [], None, None, 0
        for n, entry in enumerate(entries):
            parts = urlsplit(entry)
            if parts.scheme != SCHEME or not parts.hostname:
                raise ValueError(f"sentinel entry {n + 1} must look like sentinel://host:port")
            try:
                port = parts.port or 26379
            except ValueError:
                raise ValueError(f"sentinel entry {n + 1} has a port that is no number") from None
            hosts.append((parts.hostname, port))
            if n == 0:
                username = unquote(parts.username) if parts.username else None
                password = unquote(parts.password) if parts.password is not None else None
            if parts.path.strip("/"):
                if not parts.path.strip("/").isdigit():
                    raise ValueError("a sentinel URL's database must be a number")
                db = int(parts.path.strip("/"))
        if not hosts:
            raise ValueError("a sentinel URL needs at least one sentinel://host:port")
        master = options.get("master_name", "")
        if not master:
            raise ValueError("a sentinel URL needs the master's name (setting sentinel_master)")
        return cls(
            tuple(hosts),
            master,
            db,
            username,
            password or None,
            options.get("sentinel_password") or None,
        )

    def url(self) -> str:
        """The URL again, in its one canonical form."""
        auth = ""
        if self.password is not None or self.username:
            auth = f"{quote(self.username or '', safe='')}:{quote(self.password or '', safe='')}@"
        entries = [
            f"{SCHEME}://{auth if n == 0 else ''}{h}:{p}" for n, (h, p) in enumerate(self.hosts)
        ]
        query = {"master_name": self.master}
        if self.sentinel_password:
            query["sentinel_password"] = self.sentinel_password
        return ";".join(entries) + f"/{self.db}?" + urlencode(query)

    def kombu_url(self) -> str:
        """What kombu's sentinel transport reads: the hosts and the database only."""
        return ";".join(f"{SCHEME}://{h}:{p}" for h, p in self.hosts) + f"/{self.db}"

    def transport_options(self) -> dict[str, Any]:
        """The rest, for Celery's broker_transport_options (see workers.transport)."""
        options: dict[str, Any] = {"master_name": self.master}
        if self.sentinel_password:
            options["sentinel_kwargs"] = {"password": self.sentinel_password}
        if self.password:
            options["master_password"] = self.password
        if self.username:
            options["master_username"] = self.username
        return options

    def masked(self) -> str:
        """The URL with every password replaced, safe to print."""
        hidden = SentinelUrl(
            self.hosts,
            self.master,
            self.db,
            self.username,
            "***" if self.password else None,
            "***" if self.sentinel_password else None,
        )
        return hidden.url().replace("%2A%2A%2A", "***")


def with_settings(url: str, master: str | None, sentinel_password: str | None) -> str:
    """A sentinel URL with the settings `sentinel_master` and `sentinel_password` in it (what
    the URL says itself wins)."""
    body, _, query = url.partition("?")
    options = dict(parse_qsl(query))
    if master and "master_name" not in options:
        options["master_name"] = master
    if sentinel_password and "sentinel_password" not in options:
        options["sentinel_password"] = sentinel_password
    return SentinelUrl.parse(f"{body}?{urlencode(options)}").url()
