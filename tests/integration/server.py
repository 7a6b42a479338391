"""A `gamebatch serve` process for the tests, and helpers to talk to it over HTTP."""

from __future__ import annotations

import json
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import yaml

from pipeline.children import terminate
from pipeline.client.http import parse_events
from pipeline.local.redis_server import free_port
from pipeline.server.auth import digest
from tests.helpers import command_env

WEBHOOK_SECRET = "webhook-secret-of-the-tests"


class Server:
    """`gamebatch serve` on a free port with an admin token file and a read-only token."""

    def __init__(self, tmp_path: Path, broker: str, **settings: Any) -> None:
        self.dir = tmp_path / "serve"
        self.dir.mkdir(exist_ok=True)
        self.broker = broker
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.token = secrets.token_urlsafe(24)
        self.reader = secrets.token_urlsafe(24)
        self.other = secrets.token_urlsafe(24)  # may submit, as another owner than "admin"
        (self.dir / "token").write_text(self.token + "\n")
        server = {
            "spool_dir": str(self.dir / "spool"),
            "runners": 1,
            "webhook_secret": WEBHOOK_SECRET,
            "webhook_hosts": ["127.0.0.1"],
            "webhook_private_networks": ["127.0.0.0/8"],
            "tokens": [
                {"name": "reader", "sha256": digest(self.reader), "scopes": ["read"]},
                {"name": "other", "sha256": digest(self.other), "scopes": ["submit"]},
            ],
            **settings.pop("server", {}),
        }
        config = {"server": server, "poll_interval": 0.02, **settings}
        (self.dir / "config.yaml").write_text(yaml.safe_dump(config))
        self.process: subprocess.Popen[bytes] | None = None
        self.log = self.dir / "serve.log"

    @property
    def spool(self) -> Path:
        return self.dir / "spool"

    def start(self, *, wait_healthy: bool = True) -> Server:
        command = [
            sys.executable,
            "-m",
            "pipeline.cli",
            "serve",
            "--port",
            str(self.port),
            "--broker",
            self.broker,
            "--config",
            str(self.dir / "config.yaml"),
            "--token-file",
            str(self.dir / "token"),
        ]
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                command, stdout=out, stderr=out, env=command_env(), start_new_session=True
            )
        deadline = time.monotonic() + 40
        while True:
            assert self.process.poll() is None, self.log.read_text()[-3000:]
            assert time.monotonic() < deadline, self.log.read_text()[-3000:]
            try:
                health = httpx.get(f"{self.url}/healthz", timeout=5)
                if health.status_code == 200 or not wait_healthy:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)

    def kill(self) -> None:
        """SIGKILL the server (its runner processes die with it)."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            terminate(self.process, 10)

    def client(self, token: str | None = "admin") -> httpx.Client:
        known = {"admin": self.token, "reader": self.reader, "other": self.other}
        secret = known.get(token or "", token)
        headers = {"Authorization": f"Bearer {secret}"} if secret else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=60)


def events(client: httpx.Client, since: str, job: str | None = None) -> Iterator[dict[str, Any]]:
    """Server-sent events from `since`, each with its token under "id"."""
    params = {"since": since, **({"job": job} if job else {})}
    with client.stream("GET", "/v1/events", params=params) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        for token, data in parse_events(response.iter_lines(), since):
            yield {"id": token, **json.loads(data)}


def wait_until_ended(
    client: httpx.Client, job: str, timeout: float = 120, kind: str = "jobs"
) -> dict[str, Any]:
    """The job (or grading) once it is done, failed or cancelled (polled: the event tests
    check events)."""
    deadline = time.monotonic() + timeout
    while True:
        body: dict[str, Any] = client.get(f"/v1/{kind}/{job}").json()
        if body["state"] in ("done", "failed", "cancelled"):
            return body
        assert time.monotonic() < deadline, body
        time.sleep(0.05)
