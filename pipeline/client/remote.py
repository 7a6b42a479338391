"""The commands in client mode (`--server URL`): what they print and return, over HTTP."""

from __future__ import annotations

import argparse
import io
import json
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

import httpx

from pipeline import escape
from pipeline.client.http import Client, RemoteInputError, ended_well
from pipeline.data.files import atomic_write
from pipeline.errors import GamebatchError, UsageError
from pipeline.games.registry import get_problem
from pipeline.grading.reports import REPORT_VERSION
from pipeline.hacking.report import hacks_of
from pipeline.hacking.search import Hack
from pipeline.jobs.view import EXTRAS, FIELDS, status_lines
from pipeline.progress import ProgressBar
from pipeline.store.jobstate import FINISHED


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
    if args.json:  # the job views alone, as `status --json` of a cluster prints them
        jobs = [{k: v for k, v in job.items() if k in FIELDS or k in EXTRAS} for job in jobs]
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


def judge(args: argparse.Namespace, url: str, tests: list[Any], programs: list[Any]) -> int:
    """`grade --programs --server`: the tests and programs sent as one archive, judged by the
    server's workers; its reports written where asked, its summary printed."""
    if args.report_version != REPORT_VERSION:
        raise UsageError("--server writes the server's JSON report (version 2)")
    params: dict[str, Any] = {"problem": args.problem, "keep_going": int(args.keep_going)}
    for name in LIMITS:
        if getattr(args, name) is not None:
            params[name] = getattr(args, name)
    client = _client(args, url)
    try:
        grading = _run_archive(client, "gradings", params, tests, programs)
        report = client.call("GET", f"/v1/gradings/{grading['id']}/report.json")
        _write_reports(client, grading["id"], args)
    finally:
        client.close()
    return _summary(report)


def hack(
    args: argparse.Namespace, url: str, tests: list[Any] | None, programs: list[Any]
) -> tuple[dict[str, Any], list[Hack]]:
    """`hack --server`: the programs (and tests) sent as one archive and searched by the
    server's workers; its JSON report, and the hacks it describes."""
    params: dict[str, Any] = {
        "problem": args.problem,
        **{name: getattr(args, name) for name in ("seed", "budget", "cases", "largest")},
        **{n: getattr(args, n) for n in LIMITS if getattr(args, n) is not None},
    }
    client = _client(args, url)
    try:
        search = _run_archive(client, "hacks", params, tests or [], programs)
        doc: dict[str, Any] = client.call("GET", f"/v1/hacks/{search['id']}/report.json")
    finally:
        client.close()
    return doc, hacks_of(get_problem(args.problem), doc)


LIMITS = ("time_limit", "memory_limit", "output_limit")


def _run_archive(
    client: Client, route: str, params: dict[str, Any], tests: list[Any], programs: list[Any]
) -> dict[str, Any]:
    """POST the tests and programs as one archive to /v1/ROUTE, and the grading (or hack
    search) once it is done (else one line saying how it ended)."""
    with tempfile.TemporaryFile() as archive:
        _pack(archive, tests, programs)
        archive.seek(0)
        found: dict[str, Any] = client.call(
            "POST",
            f"/v1/{route}",
            params=params,
            content=archive.read(),
            timeout=httpx.Timeout(30.0, write=None),
        )
    found = _until_ended(client, found)
    if found["state"] != "done":
        what = "hack search" if route == "hacks" else "grading"
        raise GamebatchError(f"the {what} {found['state']}: {found.get('error', '')}")
    return found


def _pack(archive: BinaryIO, tests: list[Any], programs: list[Any]) -> None:
    """The bulk layout with progs/: tests/NAME.in (.ans), a problem package's as
    tests/sample/... and tests/secret/..., progs/CONTESTANT/main.EXT."""
    with tarfile.open(fileobj=archive, mode="w:gz") as tar:
        for test in tests:
            stem = test.name if "/" in test.name else test.input.stem  # a package's keep
            tar.add(test.input, f"tests/{stem}.in")  # their folders: names may repeat
            if test.answers is not None:
                tar.add(test.answers, f"tests/{stem}.ans")
        for program in programs:
            tar.add(program.source, f"progs/{program.source.parent.name}/{program.source.name}")


def _until_ended(client: Client, grading: dict[str, Any]) -> dict[str, Any]:
    while grading["state"] not in FINISHED:
        time.sleep(0.3)
        grading = client.call("GET", f"/v1/gradings/{grading['id']}")
    return grading


def _write_reports(client: Client, grading_id: str, args: argparse.Namespace) -> None:
    scoreboard = args.scoreboard
    kinds = {"json": "report.json", "junit": "junit"}
    if scoreboard is not None:
        kinds["scoreboard"] = (
            "scoreboard.json" if scoreboard.suffix == ".json" else "scoreboard.csv"
        )
    for flag, route in kinds.items():
        target = getattr(args, flag)
        if target is None:
            continue
        try:
            response = client.http.get(f"/v1/gradings/{grading_id}/{route}")
        except httpx.HTTPError as exc:
            raise GamebatchError(f"cannot reach {client.url}: {exc}") from None
        response.raise_for_status()
        atomic_write(target, response.text)


def _summary(report: dict[str, Any]) -> int:
    """The server's verdicts as `grade` prints them; exit status 1 unless all accepted."""
    wrong = False
    for sub in report["submissions"]:
        print(f"{escape.terminal(sub['path'])}: {sub['accepted']}/{sub['total']} accepted")
        for case in sub.get("mismatches", [])[:3]:
            found = escape.terminal(str(case.get("found")))
            print(f"  case {case['index']}: {case['verdict']} ({found})")
        wrong = wrong or sub["accepted"] < sub["total"]
    for rank, row in enumerate(report.get("scoreboard", []), 1):
        score = f"{row['score']:g}/{row['max_score']:g}"
        print(f"{rank:>4}. {escape.terminal(row['contestant'])}: {score}")
    return 1 if wrong else 0
