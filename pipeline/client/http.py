"""Client mode: `submit`, `status`, `collect`, `cancel` and `solve` against `gamebatch serve`
over HTTP (no Redis access needed), with the same output and exit codes as on a cluster."""

from __future__ import annotations

import base64
import codecs
import hashlib
import json
import os
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import quote

import httpx

from pipeline.data import files
from pipeline.errors import GamebatchError, JobCancelled, JobFailed, UnknownJob, UsageError
from pipeline.progress import ProgressBar
from pipeline.store.jobstate import FINISHED

SERVER_ENV = "GAMEBATCH_SERVER"
TOKEN_ENV = "GAMEBATCH_TOKEN"
_UPLOAD_BLOCK = 1 << 20


class RemoteInputError(GamebatchError):
    """The server refused the input: the CLI's message, exit status 2."""

    exit_code = 2


def server_url(flag: str | None) -> str | None:
    """The server to talk to: --server, else GAMEBATCH_SERVER, else None (a cluster)."""
    url = flag or os.environ.get(SERVER_ENV) or None
    if url and not url.startswith(("http://", "https://")):
        raise UsageError(f"--server must be an http:// or https:// URL, got {url[:40]!r}")
    return url.rstrip("/") if url else None


class Client:
    """A session with one server."""

    def __init__(self, url: str, token_file: Path | None = None) -> None:
        self.url = url
        headers = {"User-Agent": "gamebatch-cli"}
        token = _token(token_file)
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self.http = httpx.Client(base_url=url, headers=headers, timeout=httpx.Timeout(30.0))

    def close(self) -> None:
        self.http.close()

    def call(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        """A JSON request; the server's error becomes a one-line GamebatchError."""
        try:
            response = self.http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise GamebatchError(f"cannot reach {self.url}: {exc}") from None
        _raise_for(response)
        body: dict[str, Any] = response.json()
        return body

    def upload(self, path: Path, problem: str, *, lane: str, keep_going: bool) -> dict[str, Any]:
        """PUT one file, streamed; the job (new, or the same content's earlier one)."""
        params = {
            "problem": problem,
            "lane": lane,
            "keep_going": int(keep_going),
            "name": path.name,
        }
        try:
            stream = path.open("rb")
        except OSError as exc:
            raise UsageError(f"cannot read {path}: {exc.strerror}") from None
        with stream:
            # Announcing the SHA-256 lets the server name the job, and read the input while it
            # is still uploaded; it checks the bytes against it.
            digest = base64.b64encode(hashlib.file_digest(stream, "sha256").digest()).decode()
            stream.seek(0)
            chunks = iter(lambda: stream.read(_UPLOAD_BLOCK), b"")
            return self.call(
                "PUT",
                "/v1/jobs",
                params=params,
                content=chunks,
                headers={
                    "Content-Type": "application/octet-stream",
                    "Content-Digest": f"sha-256=:{digest}:",
                    "Content-Length": str(os.fstat(stream.fileno()).st_size),
                },
                timeout=httpx.Timeout(30.0, write=None),
            )

    def job(self, job_id: str) -> dict[str, Any]:
        return self.call("GET", f"/v1/jobs/{quote(job_id, safe='')}")

    def follow(self, job: dict[str, Any], progress: ProgressBar) -> dict[str, Any]:
        """Wait for the job to end, reading the event feed (reconnecting from the last event
        when the connection drops); the ended job."""
        job_id = job["id"]
        since = job.get("events_since") or job["links"]["events"].partition("since=")[2] or "0"
        while True:
            job = self.job(job_id)
            _show(progress, job)
            if job["state"] in FINISHED:
                return job
            try:
                for token, event in self._events(since, job_id):
                    since = token
                    if event.get("type") == "progress":
                        progress.set_done(int(event.get("done", 0)))
                    if event.get("type") in FINISHED:
                        break
            except httpx.HTTPError:
                time.sleep(1.0)  # the server restarts, or the network hiccups: read again

    def _events(self, since: str, job_id: str) -> Iterator[tuple[str, dict[str, Any]]]:
        params = {"since": since, "job": job_id}
        with self.http.stream(
            "GET", "/v1/events", params=params, timeout=httpx.Timeout(30.0, read=60.0)
        ) as response:
            _raise_for(response)
            for token, data in parse_events(response.iter_lines(), since):
                yield token, json.loads(data)

    def download(self, job: dict[str, Any], output: Path | TextIO | None) -> None:
        """The result, checked against its SHA-256 and size, written whole or not at all."""
        expected, size = job.get("result_sha256"), job.get("result_bytes")
        if not isinstance(expected, str) or len(expected) != 64:
            raise GamebatchError(
                f"the server named no checksum of {job['id']}'s result: not written"
            )

        def fill(out: TextIO) -> None:
            digest, got = hashlib.sha256(), 0
            decoder = codecs.getincrementaldecoder("utf-8")()
            with self.http.stream(
                "GET", job["links"]["result"], timeout=httpx.Timeout(30.0, read=120.0)
            ) as response:
                _raise_for(response)
                for block in response.iter_bytes():
                    digest.update(block)
                    got += len(block)
                    out.write(decoder.decode(block))
            if digest.hexdigest() != expected or (isinstance(size, int) and got != size):
                raise GamebatchError(f"the result of {job['id']} arrived damaged; try again")

        try:
            if isinstance(output, Path):
                files.write_atomically(output, fill)
            else:
                fill(output or sys.stdout)
        except httpx.HTTPError as exc:
            raise GamebatchError(f"download from {self.url} failed: {exc}") from None


def parse_events(lines: Iterable[str], since: str) -> Iterator[tuple[str, str]]:
    """(token, data) of each event of a server-sent event stream (comments skipped)."""
    token, data = since, ""
    for line in lines:
        if line.startswith("id:"):
            token = line[3:].strip()
        elif line.startswith("data:"):
            data = line[5:].strip()
        elif not line and data:
            yield token, data
            data = ""


def _token(token_file: Path | None) -> str | None:
    if token_file is not None:
        try:
            return token_file.read_text(encoding="utf-8").strip() or None
        except OSError as exc:
            raise UsageError(f"cannot read token file {token_file}: {exc.strerror}") from None
    return os.environ.get(TOKEN_ENV) or None


def _raise_for(response: httpx.Response) -> None:
    if response.status_code < 400:
        return
    try:
        response.read()
        message = str(response.json().get("error", response.text))
    except (ValueError, AttributeError):
        message = response.text[:200] or response.reason_phrase
    if response.status_code == 404:
        raise UnknownJob(message)
    if response.status_code in (400, 413, 415, 422):
        raise UsageError(message)
    raise GamebatchError(f"server: {message} (HTTP {response.status_code})")


def _show(progress: ProgressBar, job: dict[str, Any]) -> None:
    if job.get("total") and job["total"] > progress.total:
        progress.add_total(job["total"] - progress.total)
    if job.get("done"):
        progress.set_done(int(job["done"]))


def ended_well(job: dict[str, Any], path: Path | None = None) -> dict[str, Any]:
    """The job if it is done; else the reason, as the CLI would say it."""
    if job["state"] == "done":
        return job
    reason = "; ".join(job.get("errors") or []) or job["state"]
    if job["state"] == "cancelled":
        raise JobCancelled(f"job {job['id']} was cancelled")
    if job.get("exit_code") == 2:
        if path is not None and reason.startswith(f"{job.get('name')}:"):
            reason = str(path) + reason[len(str(job.get("name"))) :]
        raise RemoteInputError(reason)
    raise JobFailed(f"job {job['id']} failed: {reason}")
