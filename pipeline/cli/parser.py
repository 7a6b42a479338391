"""The `gamebatch` argument tree: every command, its flags and their help (no command's code)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, NoReturn

from pipeline.cli.front import PLACES_HELP, place_argument

PROBLEMS_HELP = "the game: strgame, pathgame, or any registered plugin"
RECENT_FINISHED = 20  # finished jobs `status` lists without --all (the unfinished: all)
WITH_WORKERS = "; default: an embedded Redis with local workers"
EMBEDDED = "; default: the embedded Redis"
DIR: dict[str, Any] = {"type": Path, "metavar": "DIR"}  # a folder argument


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line (the full usage is one `--help` away)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def parser() -> argparse.ArgumentParser:
    """The whole tree."""
    parser = _Parser(
        prog="gamebatch",
        description="Solve multi-case combinatorial-game files on Celery workers over Redis.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _solve_command(sub)
    _job_commands(sub)
    _service_commands(sub)
    _grading_commands(sub)
    _hack_command(sub)
    _verify_command(sub)
    _toolkit_commands(sub)
    return parser


def _command(
    sub: Any, name: str, help_: str, *, broker: str = "", problem: bool = False
) -> argparse.ArgumentParser:
    """A subcommand with --config, --broker unless `broker` is empty, and -p if `problem`."""
    p: argparse.ArgumentParser = sub.add_parser(name, help=help_, description=help_)
    p.add_argument("--config", metavar="FILE", help="YAML settings (or GAMEBATCH_CONFIG)")
    if broker:
        p.add_argument(
            "--broker", metavar="URL", help=f"Redis URL (or GAMEBATCH_BROKER_URL){broker}"
        )
    if problem:
        p.add_argument("-p", "--problem", required=True, help=PROBLEMS_HELP)
    return p


def _server_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--server", metavar="URL", help="a `gamebatch serve` to use over HTTP (or GAMEBATCH_SERVER)"
    )
    p.add_argument(
        "--token-file", type=Path, metavar="FILE", help="the server's token (or GAMEBATCH_TOKEN)"
    )


def _follow_options(p: argparse.ArgumentParser) -> None:
    """What a command that waits for its work is told: how long to wait, quiet, a server."""
    p.add_argument(
        "--wait-for-workers",
        type=float,
        metavar="SECONDS",
        help="on a broker where no worker is seen for this long, give up (exit status 3);"
        " default: wait, saying so after 5 s",
    )
    p.add_argument(
        "--failover-seconds",
        type=float,
        metavar="SECONDS",
        help="how long to wait for a Redis out of reach (restarting, failing over, cut off),"
        " saying so once, before giving up (default 60, or GAMEBATCH_FAILOVER_SECONDS)",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no progress display")
    _server_options(p)


def _lane_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--lane",
        choices=("auto", "interactive", "bulk"),
        default="auto",
        help="queue lane; auto: interactive for inputs up to interactive_max_bytes (1 MiB)",
    )


def _solve_command(sub: Any) -> None:
    p = _command(
        sub,
        "solve",
        "solve input files and write one result file per input",
        broker=WITH_WORKERS,
        problem=True,
    )
    p.add_argument("inputs", nargs="+", metavar="INPUT", type=place_argument, help=PLACES_HELP)
    out = p.add_mutually_exclusive_group()
    out.add_argument("-o", "--output", type=place_argument, help="result file or URL (one input)")
    out.add_argument(
        "--out-dir", type=place_argument, help="folder (or URL) for DIR/<input name>.out"
    )
    p.add_argument("--workers", type=int, help="local worker processes (default: CPUs)")
    p.add_argument(
        "--producers",
        type=int,
        help="input files read at once, each in a process (default: for inputs of 32 MiB or"
        " more, one per CPU not taken by local workers)",
    )
    _lane_option(p)
    _follow_options(p)
    p.add_argument(
        "--keep-going",
        action="store_true",
        help="solve the valid cases of a bad file; INVALID marks the others (errors in OUT.errors)",
    )


def _job_commands(sub: Any) -> None:
    p = _command(
        sub, "submit", "queue one input file and print its job id", broker=EMBEDDED, problem=True
    )
    p.add_argument("input", metavar="INPUT", type=place_argument, help=PLACES_HELP)
    _lane_option(p)
    _server_options(p)
    p = _command(sub, "collect", "wait for a job and write its result file", broker=EMBEDDED)
    p.add_argument("job", metavar="JOB")
    p.add_argument("-o", "--output", type=place_argument, required=True, help="result file or URL")
    p.add_argument("--timeout", type=float, metavar="SECONDS")
    _follow_options(p)
    p = _command(sub, "status", "show the progress of one job, or of every job", broker=EMBEDDED)
    p.add_argument("job", metavar="JOB", nargs="?")
    p.add_argument("--json", action="store_true", help="print JSON (every job)")
    p.add_argument(
        "--all", action="store_true", help=f"every finished job (else the last {RECENT_FINISHED})"
    )
    _server_options(p)
    p = _command(sub, "cancel", "stop a job: drop its queued chunks and answers", broker=EMBEDDED)
    p.add_argument("job", metavar="JOB")
    _server_options(p)


def _service_commands(sub: Any) -> None:
    p = _command(
        sub,
        "serve",
        "run the HTTP service: uploads, results, events and webhooks",
        broker=WITH_WORKERS,
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    p.add_argument("--port", type=int, default=8080, help="port (8080)")
    p.add_argument("--workers", type=int, help="local worker processes (default: CPUs)")
    p.add_argument(
        "--token-file",
        type=Path,
        metavar="FILE",
        help="a file holding one token with every scope (a quick start)",
    )
    p = _command(sub, "worker", "run a Celery worker until SIGTERM or SIGINT", broker=" ")
    p.add_argument(
        "--concurrency", type=int, help="pool processes (or GAMEBATCH_CONCURRENCY; default: CPUs)"
    )
    p.add_argument("--loglevel", default="INFO")
    p.add_argument(
        "-E",
        "--events",
        action="store_true",
        help="send task events for monitoring (or GAMEBATCH_EVENTS=1)",
    )
    p = _command(sub, "config", "show the effective configuration (passwords masked)", broker=" ")
    p.add_argument("action", choices=("show",))


def _grading_commands(sub: Any) -> None:
    p = _command(
        sub,
        "grade",
        "grade output files case by case against the answers",
        broker=EMBEDDED,
        problem=True,
    )
    p.add_argument(
        "files",
        nargs="*",
        metavar="INPUT SUBMISSION",
        type=Path,
        help="an input file, then the output files to grade",
    )
    p.add_argument("--answers", type=Path, help="official answers of INPUT (default: solve it)")
    p.add_argument("--tests", **DIR, help="bulk: NAME.in and NAME.ans files")
    p.add_argument(
        "--submissions",
        **DIR,
        help="bulk: one folder of NAME.out files per contestant (with a package as -p:"
        " TEST.out, e.g. secret/group1/01.out)",
    )
    p.add_argument(
        "--programs",
        **DIR,
        help="judge programs: a source file per contestant, alone or in a folder of its own"
        " (C, C++, Python, PyPy, Java, Kotlin, Rust, Go, JavaScript, C#: docs/judging.md)",
    )
    _limit_options(p)
    p.add_argument(
        "--lazy",
        action="store_true",
        help="judging: stop each test at its first failing case (the rest not run, NR)",
    )
    _report_options(p)
    p.add_argument("--ignore-case", action="store_true", help="accept answers in any case")
    p.add_argument(
        "--keep-going",
        action="store_true",
        help="grade the other tests when one is invalid (exit status 2)",
    )
    _follow_options(p)
    p = _command(sub, "diff", "list the cases whose verdict changed between two JSON reports")
    p.add_argument("old", type=Path, metavar="REPORT_A")
    p.add_argument("new", type=Path, metavar="REPORT_B")


def _hack_command(sub: Any) -> None:
    p = _command(
        sub,
        "hack",
        "search each contestant's program for the smallest input it gets wrong",
        broker=EMBEDDED,
        problem=True,
    )
    p.add_argument(
        "--programs",
        **DIR,
        required=True,
        help="a source file per contestant, alone or in a folder of its own (docs/judging.md)",
    )
    p.add_argument("--tests", **DIR, help="search only what these accept")
    p.add_argument("--seed", type=int, default=1, help="the search's seed (default 1)")
    p.add_argument("--budget", type=float, default=120, metavar="S", help="seconds (default 120)")
    p.add_argument(
        "--cases", type=int, default=10_000, metavar="N", help="per contestant (default 10000)"
    )
    p.add_argument(
        "--largest",
        type=int,
        metavar="SIZE",
        help="largest case size (default: the contest's limit, or 200 for a game without one)",
    )
    _limit_options(p)
    p.add_argument(
        "--out", type=Path, default=Path("hacks"), metavar="DIR", help="default: ./hacks"
    )
    p.add_argument("--json", type=Path, metavar="REPORT", help="write the JSON report")
    _follow_options(p)


def _verify_command(sub: Any) -> None:
    p = _command(
        sub,
        "verify",
        "check a problem package as problemtools' verifyproblem does, on the workers",
        broker=EMBEDDED,
    )
    p.add_argument(
        "package", type=Path, metavar="PACKAGE", help="the package's folder, or a .zip of it"
    )
    p.add_argument("--json", type=Path, metavar="REPORT", help="write the JSON report")
    p.add_argument(
        "--max-time",
        type=float,
        default=10.0,
        metavar="S",
        help="CPU seconds of an accepted run where the package states no time limit (default 10)",
    )
    _follow_options(p)


def _limit_options(p: argparse.ArgumentParser) -> None:
    """A judged program's limits."""
    p.add_argument("--time-limit", type=float, metavar="S", help="CPU seconds per case")
    p.add_argument("--memory-limit", type=int, metavar="MB", help="memory per case")
    p.add_argument("--output-limit", type=int, metavar="MB", help="output per run")


def _report_options(p: Any) -> None:
    """What `grade` writes besides its summary."""
    p.add_argument("--scoreboard", type=Path, metavar="FILE", help="write a .csv or .json")
    p.add_argument("--scoring", metavar="FILE", help="YAML scoring groups (subtasks)")
    p.add_argument("--json", type=Path, metavar="REPORT", help="write the JSON report")
    p.add_argument(
        "--report-version",
        type=int,
        choices=(1, 2),
        default=2,
        help="JSON report version: 2 (default) a verdict string per file and"
        " its first mismatches; 1 an object per case",
    )
    p.add_argument("--junit", type=Path, metavar="REPORT", help="write a JUnit XML report")
    p.add_argument(
        "--junit-cases",
        action="store_true",
        help="one JUnit testcase per case (default: one per file)",
    )


def _toolkit_commands(sub: Any) -> None:
    p = _command(sub, "gen", "write a deterministic random input file", problem=True)
    p.add_argument("--cases", type=int, default=10, help="number of cases (default 10)")
    p.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    p.add_argument("--shape", default="mixed", help="case shape (default: a mix)")
    p.add_argument("--size", type=int, default=1000, help="letters per game or board width")
    p.add_argument("-o", "--output", type=Path, help="file to write (default: stdout)")
    p = _command(sub, "validate", "check input files; exit 0 when every one is valid", problem=True)
    p.add_argument("inputs", nargs="+", metavar="INPUT", type=Path)
    p.add_argument("--strict", action="store_true", help="also enforce the contest's limits")
    p = _command(
        sub, "package", "write a game as a problem package (Kattis, DOMjudge)", problem=True
    )
    p.add_argument("out", type=Path, metavar="OUT", help="a new folder for the package")
    p.add_argument("--seed", type=int, default=1, help="of the generated tests (default 1)")
    p.add_argument("--hacks", type=Path, metavar="DIR", help="a hack search's --out: its tests too")
    p = _command(
        sub, "stress", "compare a solver with exhaustive search on small cases", problem=True
    )
    p.add_argument("--cases", type=int, default=1000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--size", type=int, default=5, help="size of the small cases")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--solver", metavar="MODULE:FUNCTION", help="a Python solver")
    which.add_argument("--program", metavar="COMMAND", help="a program reading an input file")
