"""The commands in client mode (`--server URL`): what they print and return, over HTTP."""

from __future__ import annotations

import argparse
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pipeline.client import Client, RemoteInputError, ended_well
from pipeline.errors import GamebatchError
from pipeline.jobview import status_lines
from pipeline.progress import ProgressBar


def _client(args: argparse.Namespace, url: str) -> Client:
    return Client(url, getattr(args, "token_file", None))


def submit(args: argparse.Namespace, url: str) -> int:
    client = _client(args, url)
    try:
        job = client.upload(args.input, args.problem, lane=args.lane, keep_going=False)
    finally:
        client.close()
    print(f"uploaded {args.input} ({job.get('size', 0)} bytes): {job['state']}")
    print(job["id"])
    return 0


def status(args: argparse.Namespace, url: str) -> int:
    client = _client(args, url)
    try:
        jobs = [client.job(args.job)] if args.job else client.call("GET", "/v1/jobs")["jobs"]
    finally:
        client.close()
    if args.json:
        print(json.dumps(jobs[0] if args.job else {"jobs": jobs}))
        return 0
    for job in jobs:
        print("\n".join(status_lines(job)))
    return 0


def cancel(args: argparse.Namespace, url: str) -> int:
    client = _client(args, url)
    try:
        client.call("DELETE", f"/v1/jobs/{args.job}")
    finally:
        client.close()
    print(f"cancelled {args.job}")
    return 0


def collect(args: argparse.Namespace, url: str) -> int:
    client = _client(args, url)
    progress = ProgressBar("collect", enabled=not args.quiet)
    try:
        job = ended_well(client.follow(client.job(args.job), progress))
        client.download(job, args.output)
    finally:
        progress.close()
        client.close()
    return _invalid_status(job, str(args.output))


def solve(
    args: argparse.Namespace,
    url: str,
    targets: list[tuple[Path, Path | None]],
    report: Callable[[str], None],
) -> int:
    """Upload every input, follow each job's events with one progress bar, download each."""
    client = _client(args, url)
    progress = ProgressBar("solve", enabled=not args.quiet)
    status_ = 0
    try:
        uploaded = [
            (
                path,
                output,
                client.upload(path, args.problem, lane=args.lane, keep_going=args.keep_going),
            )
            for path, output in targets
        ]
        for path, output, job in uploaded:
            try:
                ended = ended_well(client.follow(job, progress), path)
            except RemoteInputError as exc:
                report(f"error: {exc}")
                status_ = 2
                continue
            client.download(ended, output)
            status_ = max(status_, _invalid_status(ended, str(output), report))
    finally:
        progress.close()
        client.close()
    return status_


def _invalid_status(
    job: dict[str, Any], output: str, report: Callable[[str], None] | None = None
) -> int:
    invalid = int(str(job.get("invalid") or 0))
    if not invalid:
        return 0
    message = (
        f"error: {invalid} invalid cases marked INVALID (their errors:"
        f" GET {job['links']['errors']})"
    )
    if report is None:
        raise GamebatchError(message.removeprefix("error: "))
    report(message)
    return 2


def grade_solver(args: argparse.Namespace, url: str) -> Callable[[list[Any]], list[Any]]:
    """The answers of `grade`'s tests from the server: each test input uploaded (a known one
    is answered from its earlier job) and its result downloaded; a refused input as its error
    line."""

    def solve(tests: list[Any]) -> list[tuple[list[str], bool] | str]:
        client = _client(args, url)
        progress = ProgressBar("answers", enabled=not args.quiet)
        found: list[tuple[list[str], bool] | str] = []
        try:
            for test in tests:
                try:
                    job = client.upload(test.input, args.problem, lane="auto", keep_going=False)
                    computed = job["state"] != "done"
                    text = io.StringIO()
                    client.download(ended_well(client.follow(job, progress), test.input), text)
                except RemoteInputError as exc:
                    found.append(f"error: {exc}")
                    continue
                found.append((text.getvalue().splitlines(), computed))
        finally:
            progress.close()
            client.close()
        return found

    return solve
