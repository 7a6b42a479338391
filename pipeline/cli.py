"""The `gamebatch` command line: parses arguments and hands over to `pipeline.service`."""

from __future__ import annotations

import argparse
import io
import itertools
import json
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from pipeline.data.objects import ObjectUrl, place
from pipeline.errors import GamebatchError, UnknownJob, UsageError
from pipeline.exiting import LONG_RUNNING, begin, leave

if TYPE_CHECKING:
    from pipeline.config import Settings

PROBLEMS_HELP = "the game: strgame, pathgame, or any registered plugin"


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line (the full usage is one `--help` away)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="gamebatch",
        description="Solve multi-case combinatorial-game files on Celery workers over Redis.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _pipeline_commands(sub)
    _grading_commands(sub)
    _hack_command(sub)
    _toolkit_commands(sub)
    return parser


def _command(sub: Any, name: str, help_: str, *, broker: str = "") -> argparse.ArgumentParser:
    """A subcommand with --config, and --broker unless `broker` is empty."""
    p: argparse.ArgumentParser = sub.add_parser(name, help=help_, description=help_)
    p.add_argument("--config", metavar="FILE", help="YAML settings (or GAMEBATCH_CONFIG)")
    if broker:
        p.add_argument(
            "--broker", metavar="URL", help=f"Redis URL (or GAMEBATCH_BROKER_URL){broker}"
        )
    return p


def _server_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--server", metavar="URL", help="a `gamebatch serve` to use over HTTP (or GAMEBATCH_SERVER)"
    )
    p.add_argument(
        "--token-file", type=Path, metavar="FILE", help="the server's token (or GAMEBATCH_TOKEN)"
    )


def _wait_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--wait-for-workers",
        type=float,
        metavar="SECONDS",
        help="on a broker where no worker is seen for this long, give up (exit status 3);"
        " default: wait, saying so after 5 s",
    )


def _lane_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--lane",
        choices=("auto", "interactive", "bulk"),
        default="auto",
        help="queue lane; auto: interactive for inputs up to interactive_max_bytes (1 MiB)",
    )


def _pipeline_commands(sub: Any) -> None:
    _solve_command(sub)
    _job_commands(sub)
    _service_commands(sub)


def _solve_command(sub: Any) -> None:
    p = _command(
        sub,
        "solve",
        "solve input files and write one result file per input",
        broker="; default: an embedded Redis with local workers",
    )
    p.add_argument("-p", "--problem", required=True, help=PROBLEMS_HELP)
    p.add_argument("inputs", nargs="+", metavar="INPUT", type=_place, help=PLACES_HELP)
    out = p.add_mutually_exclusive_group()
    out.add_argument("-o", "--output", type=_place, help="result file or URL (one input)")
    out.add_argument("--out-dir", type=_place, help="folder (or URL) for DIR/<input name>.out")
    p.add_argument("--workers", type=int, help="local worker processes (default: CPUs)")
    p.add_argument(
        "--producers",
        type=int,
        help="input files read at once, each in a process (default: for inputs of 32 MiB or"
        " more, one per CPU not taken by local workers)",
    )
    _lane_option(p)
    _wait_option(p)
    _server_options(p)
    p.add_argument("-q", "--quiet", action="store_true", help="no progress display")
    p.add_argument(
        "--keep-going",
        action="store_true",
        help="solve the valid cases of a bad file; INVALID marks the others (errors in OUT.errors)",
    )


def _job_commands(sub: Any) -> None:
    embedded = "; default: the embedded Redis"
    p = _command(sub, "submit", "queue one input file and print its job id", broker=embedded)
    p.add_argument("-p", "--problem", required=True, help=PROBLEMS_HELP)
    p.add_argument("input", metavar="INPUT", type=_place, help=PLACES_HELP)
    _lane_option(p)
    _server_options(p)

    p = _command(sub, "collect", "wait for a job and write its result file", broker=embedded)
    p.add_argument("job", metavar="JOB")
    p.add_argument("-o", "--output", type=_place, required=True, help="result file or URL")
    p.add_argument("--timeout", type=float, metavar="SECONDS")
    _wait_option(p)
    p.add_argument("-q", "--quiet", action="store_true", help="no progress display")
    _server_options(p)

    p = _command(sub, "status", "show the progress of one job, or of every job", broker=embedded)
    p.add_argument("job", metavar="JOB", nargs="?")
    p.add_argument("--json", action="store_true", help="print JSON (every job)")
    p.add_argument(
        "--all", action="store_true", help=f"every finished job (else the last {RECENT_FINISHED})"
    )
    _server_options(p)

    p = _command(sub, "cancel", "stop a job: drop its queued chunks and answers", broker=embedded)
    p.add_argument("job", metavar="JOB")
    _server_options(p)


def _service_commands(sub: Any) -> None:
    p = _command(
        sub,
        "serve",
        "run the HTTP service: uploads, results, events and webhooks",
        broker="; default: an embedded Redis with local workers",
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
        broker="; default: the embedded Redis",
    )
    p.add_argument("-p", "--problem", required=True, help=PROBLEMS_HELP)
    p.add_argument(
        "files",
        nargs="*",
        metavar="INPUT SUBMISSION",
        type=Path,
        help="an input file, then the output files to grade",
    )
    p.add_argument("--answers", type=Path, help="official answers of INPUT (default: solve it)")
    p.add_argument("--tests", type=Path, metavar="DIR", help="bulk: NAME.in and NAME.ans files")
    p.add_argument(
        "--submissions",
        type=Path,
        metavar="DIR",
        help="bulk: one folder of NAME.out files per contestant",
    )
    p.add_argument(
        "--programs",
        type=Path,
        metavar="DIR",
        help="judge programs: one folder per contestant with main.cpp, main.c or main.py",
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
    _wait_option(p)
    p.add_argument("-q", "--quiet", action="store_true", help="no progress display")
    _server_options(p)

    p = _command(sub, "diff", "list the cases whose verdict changed between two JSON reports")
    p.add_argument("old", type=Path, metavar="REPORT_A")
    p.add_argument("new", type=Path, metavar="REPORT_B")


def _hack_command(sub: Any) -> None:
    p = _command(
        sub,
        "hack",
        "search each contestant's program for the smallest input it gets wrong",
        broker="; default: the embedded Redis",
    )
    p.add_argument("-p", "--problem", required=True, help=PROBLEMS_HELP)
    p.add_argument(
        "--programs",
        type=Path,
        metavar="DIR",
        required=True,
        help="one folder per contestant with main.cpp, main.c or main.py",
    )
    p.add_argument("--tests", type=Path, metavar="DIR", help="search only what these accept")
    p.add_argument("--seed", type=int, default=1, help="the search's seed (default 1)")
    p.add_argument("--budget", type=float, default=120, metavar="S", help="seconds (default 120)")
    p.add_argument(
        "--cases", type=int, default=10_000, metavar="N", help="per contestant (default 10000)"
    )
    p.add_argument(
        "--largest", type=int, default=200, metavar="SIZE", help="largest case size (default 200)"
    )
    _limit_options(p)
    p.add_argument(
        "--out", type=Path, default=Path("hacks"), metavar="DIR", help="default: ./hacks"
    )
    p.add_argument("--json", type=Path, metavar="REPORT", help="write the JSON report")
    _wait_option(p)
    p.add_argument("-q", "--quiet", action="store_true", help="no progress display")
    _server_options(p)


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
    p = _command(sub, "gen", "write a deterministic random input file")
    p.add_argument("-p", "--problem", required=True, help=PROBLEMS_HELP)
    p.add_argument("--cases", type=int, default=10, help="number of cases (default 10)")
    p.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    p.add_argument("--shape", default="mixed", help="case shape (default: a mix)")
    p.add_argument("--size", type=int, default=1000, help="letters per game or board width")
    p.add_argument("-o", "--output", type=Path, help="file to write (default: stdout)")

    p = _command(sub, "validate", "check input files; exit 0 when every one is valid")
    p.add_argument("-p", "--problem", required=True, help=PROBLEMS_HELP)
    p.add_argument("inputs", nargs="+", metavar="INPUT", type=Path)
    p.add_argument("--strict", action="store_true", help="also enforce the contest's limits")

    p = _command(sub, "stress", "compare a solver with exhaustive search on small cases")
    p.add_argument("-p", "--problem", required=True, help=PROBLEMS_HELP)
    p.add_argument("--cases", type=int, default=1000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--size", type=int, default=5, help="size of the small cases")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--solver", metavar="MODULE:FUNCTION", help="a Python solver")
    which.add_argument("--program", metavar="COMMAND", help="a program reading an input file")


PLACES_HELP = "a file, or an object's URL (s3://BUCKET/KEY, gs://, https://, file://)"


def _place(text: str) -> Path | ObjectUrl:
    """A command line's file or URL (pipeline.data.objects.place), refused as argparse refuses."""
    try:
        return place(text)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _settings(args: argparse.Namespace, need_broker: bool) -> Settings:
    from pipeline.config import load_settings

    settings = load_settings(
        args.config,
        broker_url=getattr(args, "broker", None),
        workers=getattr(args, "workers", None),
        producers=getattr(args, "producers", None),
        wait_for_workers=getattr(args, "wait_for_workers", None),
    )
    if need_broker and not settings.broker_url:
        raise UsageError(
            f"{args.command} needs a broker: pass --broker URL or set GAMEBATCH_BROKER_URL"
        )
    return settings


def _remote(args: argparse.Namespace) -> str | None:
    """The server of client mode, or None for a cluster (then --token-file makes no sense)."""
    if not getattr(args, "server", None) and not os.environ.get("GAMEBATCH_SERVER"):
        return None  # a cluster (and no HTTP client to load)
    from pipeline.client.http import server_url

    url = server_url(getattr(args, "server", None))
    if url and getattr(args, "broker", None):
        raise UsageError("--server and --broker exclude each other")
    return url


def _cmd_solve(args: argparse.Namespace) -> int:
    from pipeline import service
    from pipeline.games.registry import get_problem

    if url := _remote(args):
        from pipeline.client import remote

        get_problem(args.problem)
        targets = [(item.input, item.output) for item in _solve_targets(args)]
        return remote.solve(args, url, targets, _err)
    settings = _settings(args, need_broker=False)
    problem = get_problem(args.problem)
    return service.solve(
        settings,
        problem,
        _solve_targets(args),
        _err,
        quiet=args.quiet,
        keep_going=args.keep_going,
        lane=args.lane,
    )


def _solve_targets(args: argparse.Namespace) -> list[Any]:
    """Each input with its result file, checked before any work: every input readable,
    every output writable, no output replacing an input or another input's result."""
    from pipeline import service
    from pipeline.data.files import check_output

    if len(args.inputs) > 1 and args.output:
        raise UsageError("-o takes one input; use --out-dir DIR for several")
    if len(args.inputs) > 1 and args.out_dir is None:
        raise UsageError("several inputs need --out-dir DIR")
    for path in args.inputs:
        _check_input(path)
    if args.out_dir is not None:
        files = [service.FileJob(p, args.out_dir / f"{p.name}.out") for p in args.inputs]
    else:
        files = [service.FileJob(args.inputs[0], args.output)]
    outputs = _claim_outputs(files, keep_going=args.keep_going)
    if isinstance(args.out_dir, Path):
        try:
            args.out_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"cannot create folder {args.out_dir}: {exc.strerror}") from None
    for out in outputs:
        check_output(out, [p for p in args.inputs if isinstance(p, Path)])
    return files


def _check_input(path: Path | ObjectUrl) -> None:
    """Refuse, before any work, an input that cannot be read."""
    from pipeline.data.files import check_input
    from pipeline.data.objects import stat

    if isinstance(path, ObjectUrl):
        stat(path)
    else:
        check_input(path)


def _claim_outputs(files: list[Any], *, keep_going: bool) -> list[Path]:
    """Every file the inputs would write (objects are not files); two inputs writing one
    file or object is refused."""
    from pipeline import service

    claimed: dict[str, Path] = {}
    outputs = []
    for item in files:
        if not isinstance(item.output, Path | ObjectUrl):
            continue
        for out in (item.output, *([service.errors_file(item.output)] if keep_going else [])):
            key = str(out) if isinstance(out, ObjectUrl) else os.path.realpath(out)
            if key in claimed:
                raise UsageError(
                    f"{claimed[key]} and {item.input} would both write {out}: give the inputs"
                    " different names, or solve them into different folders"
                )
            claimed[key] = item.input
            if isinstance(out, Path):
                outputs.append(out)
    return outputs


def _cmd_submit(args: argparse.Namespace) -> int:
    if url := _remote(args):
        from pipeline.client import remote

        return remote.submit(args, url)
    from pipeline import service
    from pipeline.data import producer
    from pipeline.games.registry import get_problem

    settings = _settings(args, need_broker=False)
    problem = get_problem(args.problem)
    _check_input(args.input)
    with service.cluster(settings, workers=False) as c:
        lane = producer.choose_lane(args.input, c.settings, args.lane)
        job = producer.submit(problem, args.input, c.store, c.send, c.settings, lane=lane)
    print(f"{job.total} cases in {job.chunks} chunks ({job.queued} queued)")
    print(job.job_id)
    return 0


def _cmd_collect(args: argparse.Namespace) -> int:
    if url := _remote(args):
        from pipeline.client import remote

        return remote.collect(args, url)
    from pipeline import service
    from pipeline.data.files import check_output
    from pipeline.progress import ProgressBar

    settings = _settings(args, need_broker=False)
    service.check_job_id(args.job)
    if isinstance(args.output, Path):
        check_output(args.output)
    with service.cluster(settings) as c:
        problem = service.problem_of(c.store, args.job)
        progress = ProgressBar("collect", enabled=not args.quiet)
        manifest = c.store.progress(args.job)
        progress.add_total(manifest.total or 0 if manifest else 0)
        try:
            _, invalid = service.collect(
                c, problem, args.job, args.output, timeout=args.timeout, progress=progress
            )
        finally:
            progress.close()
    if invalid:
        _err(f"error: invalid cases marked INVALID (listed in {args.output}.errors)")
        return 2
    return 0


def _cmd_status(args: argparse.Namespace) -> int:
    if url := _remote(args):
        from pipeline.client import remote

        return remote.status(args, url)
    from pipeline import service
    from pipeline.jobs.view import status_lines

    settings = _settings(args, need_broker=False)
    if args.job:
        service.check_job_id(args.job)
    with service.cluster(settings, workers=False) as c:
        found = c.jobs.views([args.job] if args.job else None)
        alive = [] if args.job else service.workers_alive(c)
    if args.job and found[0] is None:
        raise UnknownJob(f"job {args.job} does not exist")
    rows = [row for row in found if row is not None]
    if args.json:
        print(json.dumps(rows[0] if args.job else {"jobs": rows, "workers": alive}))
        return 0
    shown, hidden = (rows, 0) if args.job or args.all else _recent(rows)
    for row in shown:
        print("\n".join(status_lines(row)))
    if hidden:
        print(f"... and {hidden} earlier finished jobs (--all lists them)")
    if not args.job:
        print(f"workers alive: {len(alive)}" + "".join(f"\n    {name}" for name in alive))
    return 0


RECENT_FINISHED = 20  # finished jobs `status` lists without --all (the unfinished: all)


def _recent(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """Every unfinished job and the last finished ones (rows are oldest first), and how many
    finished ones are left out: thousands of kept jobs are not a wall of lines."""
    from pipeline.store.jobstate import FINISHED

    finished = [i for i, row in enumerate(rows) if row["state"] in FINISHED]
    hidden = set(finished[: max(len(finished) - RECENT_FINISHED, 0)])
    return [row for i, row in enumerate(rows) if i not in hidden], len(hidden)


def _cmd_config(args: argparse.Namespace) -> int:
    from pipeline.config import show

    sys.stdout.write(show(_settings(args, need_broker=False)))
    return 0


def _cmd_cancel(args: argparse.Namespace) -> int:
    if url := _remote(args):
        from pipeline.client import remote

        return remote.cancel(args, url)
    from pipeline import service

    settings = _settings(args, need_broker=False)
    service.check_job_id(args.job)
    with service.cluster(settings, workers=False) as c:
        cancel = c.jobs.cancel(args.job)
    if not cancel.found:
        raise UnknownJob(f"job {args.job} does not exist")
    if cancel.ended:
        raise GamebatchError(f"job {args.job} has already ended ({cancel.ended})")
    print(f"cancelled {args.job}")
    return 0


def _cmd_serve(args: argparse.Namespace) -> int:
    from pipeline.server.auth import token_from_file
    from pipeline.server.serve import serve

    settings = _settings(args, need_broker=False)
    tokens = settings.server.tokens
    if args.token_file is not None:
        from_file = token_from_file(args.token_file)
        if from_file.name in {token.name for token in tokens}:
            raise UsageError(
                f"token file {args.token_file}: a configured token has its name "
                f"{from_file.name!r} (a token's name owns its jobs)"
            )
        tokens = (*tokens, from_file)
    if not 1 <= args.port <= 65535:
        raise UsageError("--port must be from 1 to 65535")
    serve(settings, args.host, args.port, tokens)
    return 0


def _cmd_worker(args: argparse.Namespace) -> int:
    from pipeline.local.workers import supervise_worker
    from pipeline.store.jobstore import JobStore

    settings = _settings(args, need_broker=True)
    for url in settings.shard_urls:  # one Celery worker per shard
        JobStore.wait_for(url, _err)
    if os.geteuid() == 0:  # runs of programs that a killed worker left on this host end
        from pipeline.judging.sandbox import sweep_runs

        sweep_runs()
    concurrency = args.concurrency or settings.concurrency or os.cpu_count() or 1
    return supervise_worker(
        settings.shard_urls,
        concurrency,
        loglevel=args.loglevel,
        events=args.events or settings.events,
        config=args.config,
    )


def _cmd_gen(args: argparse.Namespace) -> int:
    import io

    from pipeline.data.files import check_output
    from pipeline.games import toolkit
    from pipeline.games.registry import get_problem

    problem = get_problem(args.problem)
    if args.cases < 1 or args.size < 1:
        raise UsageError("--cases and --size must be at least 1")
    if args.output is not None:
        check_output(args.output)
    cases = list(toolkit.generate(problem, args.cases, args.seed, args.shape, args.size))
    text = io.StringIO()
    toolkit.write_input(problem, cases, text)
    if args.output is None:
        sys.stdout.write(text.getvalue())
    else:
        from pipeline.data.files import atomic_write

        atomic_write(args.output, text.getvalue())
    return 0


def _cmd_validate(args: argparse.Namespace) -> int:
    from pipeline.errors import InputError
    from pipeline.games import toolkit
    from pipeline.games.registry import get_problem

    settings = _settings(args, need_broker=False)
    problem = get_problem(args.problem)
    status = 0
    for path in args.inputs:
        try:
            count = toolkit.validate(problem, path, settings.limits, strict=args.strict)
        except InputError as exc:
            _err(f"error: {exc}")
            status = 2
            continue
        print(f"{path}: {count} valid cases")
    return status


def _cmd_stress(args: argparse.Namespace) -> int:
    from pipeline.games import toolkit
    from pipeline.games.registry import get_problem
    from pipeline.local import programs

    problem = get_problem(args.problem)
    if args.program:
        solver = programs.program_solver(problem, args.program)
    elif args.solver:
        solver = programs.function_solver(problem, args.solver)
    else:
        solver = toolkit.in_process_solver(problem)
    count, mismatch = toolkit.stress(problem, solver, args.cases, args.seed, size=args.size)
    if mismatch is None:
        print(f"{count} cases: the solver agrees with exhaustive search")
        return 0
    print(f"mismatch: the solver says {mismatch.found}, exhaustive search says {mismatch.expected}")
    print("smallest failing input found:")
    sys.stdout.write("1\n" + problem.format_case(mismatch.case))
    return 1


def _cmd_grade(args: argparse.Namespace) -> int:
    from pipeline import escape, grade_service
    from pipeline.games.registry import get_problem
    from pipeline.grading.rules import Scoring
    from pipeline.grading.scoring import load_scoring

    url = _remote(args)
    settings = _settings(args, need_broker=False)
    problem = get_problem(args.problem)
    if args.programs is not None:
        return _judge(args, settings, problem, url)
    if args.time_limit or args.memory_limit or args.output_limit or args.lazy:
        raise UsageError("--time-limit, --memory-limit, --output-limit and --lazy judge --programs")
    bulk = args.tests is not None or args.submissions is not None
    tests, subs, notes = _grade_layout(args, bulk)
    outputs = grade_service.ReportFiles(
        args.json, args.junit, args.scoreboard, args.report_version, args.junit_cases
    )
    graded = [t.input for t in tests] + [t.answers for t in tests if t.answers is not None]
    outputs.check(itertools.chain(graded, (s.path for s in subs if s.path is not None)))
    scoring = load_scoring(args.scoring) if args.scoring else Scoring()
    for note in notes:
        _err(f"warning: {escape.terminal(note)}")
    if url:
        from pipeline.client import remote

        solver = remote.grade_solver(args, url)

    def report(run: grade_service.GradeRun) -> None:
        for test, error in sorted(run.found.broken.items()):
            _err(f"error: test {escape.terminal(test)} not graded: {escape.terminal(error)}")
        outputs.write(run, grade_service.summary(sys.stdout, standings=bulk))

    run = grade_service.grade(
        settings,
        problem,
        tests,
        subs,
        scoring=scoring,
        ignore_case=args.ignore_case,
        quiet=args.quiet,
        solver=solver if url else None,
        keep_going=args.keep_going,
        use=report,
    )
    return run.exit_status()


def _judge(args: argparse.Namespace, settings: Any, problem: Any, url: str | None) -> int:
    """`grade --programs`: each contestant's program run on every test in the sandbox."""
    from pipeline import escape, grade_service
    from pipeline.grading import layout
    from pipeline.grading.rules import Scoring
    from pipeline.grading.scoring import load_scoring
    from pipeline.judging import judge_service
    from pipeline.judging.sandbox import Sandbox

    if args.tests is None or args.submissions is not None or args.files or args.answers:
        raise UsageError("judging takes --tests DIR and --programs DIR, no files")
    if args.ignore_case:
        raise UsageError("--ignore-case grades output files, not --programs")
    settings = _with_limits(args, settings)
    if not settings.broker_url and not url:  # local workers judge: their sandbox first
        Sandbox(settings.judge.first_uid, settings.judge.slots).check()
    tests = layout.tests_in(args.tests)
    programs, notes = judge_service.find_programs(args.programs, settings.judge.languages)
    outputs = grade_service.ReportFiles(
        args.json, args.junit, args.scoreboard, args.report_version, args.junit_cases
    )
    outputs.check(t.input for t in tests)
    for note in notes:
        _err(f"warning: {escape.terminal(note)}")
    if url:
        from pipeline.client import remote

        if args.lazy:
            raise UsageError("--lazy judges on a cluster (--broker or the embedded default)")
        return remote.judge(args, url, tests, programs)

    def report(run: grade_service.GradeRun) -> None:
        for test, error in sorted(run.found.broken.items()):
            _err(f"error: test {escape.terminal(test)} not graded: {escape.terminal(error)}")
        outputs.write(run, grade_service.summary(sys.stdout, standings=True))

    run = grade_service.judge_programs(
        settings,
        problem,
        tests,
        programs,
        scoring=load_scoring(args.scoring) if args.scoring else Scoring(),
        quiet=args.quiet,
        keep_going=args.keep_going,
        lazy=args.lazy,
        use=report,
        note=_err,
    )
    return run.exit_status()


def _cmd_hack(args: argparse.Namespace) -> int:
    from pipeline import escape
    from pipeline.data.files import check_output
    from pipeline.games.registry import get_problem
    from pipeline.grading import layout
    from pipeline.hacking import report
    from pipeline.hacking.search import Budget, hack
    from pipeline.judging import judge_service
    from pipeline.judging.sandbox import Sandbox

    for flag, value in (("--budget", args.budget), ("--cases", args.cases)):
        if value <= 0:
            raise UsageError(f"{flag} must be positive")
    if args.largest < 1:
        raise UsageError("--largest must be at least 1")
    url = _remote(args)
    settings = _with_limits(args, _settings(args, need_broker=False))
    problem = get_problem(args.problem)
    if not settings.broker_url and not url:  # local workers judge: their sandbox first
        Sandbox(settings.judge.first_uid, settings.judge.slots).check()
    tests = layout.tests_in(args.tests) if args.tests is not None else None
    programs, notes = judge_service.find_programs(args.programs, settings.judge.languages)
    report.check_names(p.contestant for p in programs)
    if args.json is not None:
        check_output(args.json)
    for note in notes:
        _err(f"warning: {escape.terminal(note)}")
    budget = Budget(args.budget, args.cases, args.largest)
    if url:
        from pipeline.client import remote

        doc, hacks = remote.hack(args, url, tests, programs)
    else:
        hacks = hack(
            settings,
            problem,
            programs,
            tests=tests,
            seed=args.seed,
            budget=budget,
            quiet=args.quiet,
        )
        doc = report.document(problem, args.seed, budget, hacks)
    report.write_files(args.out, problem, hacks)
    if args.json is not None:
        report.write_json(args.json, doc)
    report.summary(sys.stdout, problem, hacks)
    return 1 if any(h.hacked for h in hacks) else 0


def _with_limits(args: argparse.Namespace, settings: Any) -> Any:
    """The settings with the judge's limits given on the command line."""
    limits = {
        "time_limit": args.time_limit,
        "memory_limit_mb": args.memory_limit,
        "output_limit_mb": args.output_limit,
    }
    for name, value in limits.items():
        if value is not None and value <= 0:
            raise UsageError(f"--{name.split('_')[0]}-limit must be positive")
    given = {k: v for k, v in limits.items() if v is not None}
    return settings.replaced(judge=settings.judge.replaced(**given))


def _grade_layout(
    args: argparse.Namespace, bulk: bool
) -> tuple[list[Any], Sequence[Any], list[str]]:
    """Tests, submissions and notes from the command line (bulk folders or files)."""
    from pipeline import escape
    from pipeline.data.files import check_input
    from pipeline.grading import layout
    from pipeline.grading.rules import Submission, Test

    if bulk:
        if args.files or args.answers or not (args.tests and args.submissions):
            raise UsageError("bulk grading takes --tests DIR and --submissions DIR, no files")
        return layout.bulk_layout(args.tests, args.submissions)
    if len(args.files) < 2:
        raise UsageError("give an INPUT and at least one SUBMISSION (or --tests/--submissions)")
    if args.scoreboard:
        raise UsageError("--scoreboard needs bulk mode (--tests and --submissions)")
    given, *outputs = args.files
    check_input(given)
    test = Test(escape.file_name(given.stem), given, args.answers)
    subs, notes = [], []
    for path in outputs:
        label = escape.file_name(str(path))
        if path.is_dir():
            raise UsageError(f"cannot grade {label}: it is a folder")
        if not path.exists():
            notes.append(f"{label} does not exist: graded all MISSING")
        found = path if path.exists() else None
        subs.append(Submission(escape.file_name(path.stem), test.name, found, label))
    return [test], subs, notes


def _cmd_diff(args: argparse.Namespace) -> int:
    from pipeline import escape
    from pipeline.grading import reports

    docs = []
    for path in (args.old, args.new):
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise UsageError(f"cannot read report {path}: {exc}") from None
        if not isinstance(doc, dict) or doc.get("version") not in reports.REPORT_VERSIONS:
            raise UsageError(f"{path} is not a grading report (version 1 or 2)")
        try:
            reports.check_report(doc)
        except ValueError as exc:
            raise UsageError(f"{path} is not a grading report: {exc}") from None
        docs.append(doc)
    changes = reports.diff_reports(docs[0], docs[1])
    for line in changes:
        print(escape.terminal(line))  # paths come from the reports: contestants named them
    if not changes:
        print("no verdict changed")
    return 1 if changes else 0


_COMMANDS = {
    "solve": _cmd_solve,
    "submit": _cmd_submit,
    "collect": _cmd_collect,
    "status": _cmd_status,
    "worker": _cmd_worker,
    "cancel": _cmd_cancel,
    "serve": _cmd_serve,
    "config": _cmd_config,
    "grade": _cmd_grade,
    "diff": _cmd_diff,
    "hack": _cmd_hack,
    "gen": _cmd_gen,
    "validate": _cmd_validate,
    "stress": _cmd_stress,
}


def _err(line: str) -> None:
    print(f"gamebatch: {line}", file=sys.stderr)


def _redis_error(exc: Exception) -> str:
    """One line for a Redis failure, saying what to do about the ones that can be fixed."""
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if type(exc).__name__ == "OutOfMemoryError" or "> 'maxmemory'" in text:
        return (
            "Redis is full (its memory is at maxmemory and it evicts nothing): free memory"
            " or raise maxmemory, then run the command again (finished work is kept)"
        )
    if "MISCONF" in text:
        return (
            f"Redis cannot save its data ({text.rsplit(': ', 1)[-1]}): fix its disk, then"
            " run the command again (finished work is kept)"
        )
    return f"Redis: {text}"


_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _interrupt(signum: int, frame: object) -> None:
    # One interrupt stops the command; more while it cleans up (or while Python shuts down,
    # when it would restore the default action and die of the signal) are ignored.
    for sig in _STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    """Run a command here (`pipeline.launch` runs it in the warm service when it can)."""
    args = _parser().parse_args(argv)
    for sig in _STOP_SIGNALS:  # a closed terminal or SIGTERM cleans up like Ctrl-C
        signal.signal(sig, _interrupt)
    _whole_writes_to_stdout()
    try:
        return _COMMANDS[args.command](args)
    except GamebatchError as exc:
        _err(f"error: {exc}")
        return exc.exit_code
    except BrokenPipeError:  # the reader of standard output left: what is left goes nowhere
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except Exception as exc:
        if type(exc).__module__.split(".")[0] not in ("redis", "kombu"):
            raise
        # redis-py and kombu name the host and port in their messages, never the password
        _err(f"error: {_redis_error(exc)}")
        return 1
    except KeyboardInterrupt:
        _err("interrupted")
        return 130


def _whole_writes_to_stdout() -> None:
    """Give an unbuffered standard output (python -u, PYTHONUNBUFFERED) a buffer again, line
    by line: its text layer hands each string to a single raw write, and drops what a short
    write (a pipe whose reader left, a signal) did not take, where a buffer writes the rest
    or raises."""
    if isinstance(getattr(sys.stdout, "buffer", None), io.RawIOBase):
        sys.stdout = io.TextIOWrapper(
            io.BufferedWriter(sys.stdout.buffer),
            encoding=sys.stdout.encoding,
            errors=sys.stdout.errors,
            line_buffering=True,
        )


if __name__ == "__main__":  # runs here (`gamebatch`, or python -m pipeline.launch, may not)
    begin(sys.argv[1:])
    status = main()
    if not any(arg in LONG_RUNNING for arg in sys.argv[1:]):
        leave(status)  # as `gamebatch` ends: an interrupted run once died of its SIGINT here
    sys.exit(status)
