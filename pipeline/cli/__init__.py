"""The `gamebatch` command line: arguments parsed into a workflow's request, the workflow run
on the backend chosen once (a cluster, or a server in client mode), its result printed; one
line per error, and the exit statuses. The parser, and one module per command family.

Imports: server, client, app, local, workers, packages, judging, hacking, grading, jobs, data,
store, games, config, ground.
"""

from __future__ import annotations

import importlib
import io
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Sequence

from pipeline.cli.front import Front, err
from pipeline.cli.parser import parser
from pipeline.config import DEBUG_ENV
from pipeline.errors import GamebatchError

# command -> (module of this package, handler): a command loads only its own family's code
COMMANDS = {
    "solve": ("solving", "solve"),
    "submit": ("solving", "submit"),
    "collect": ("solving", "collect"),
    "status": ("solving", "status"),
    "cancel": ("solving", "cancel"),
    "grade": ("grading", "grade"),
    "diff": ("grading", "diff"),
    "hack": ("hacking", "hack"),
    "verify": ("hacking", "verify"),
    "serve": ("running", "serve"),
    "worker": ("running", "worker"),
    "config": ("running", "config"),
    "gen": ("toolkit", "gen"),
    "validate": ("toolkit", "validate"),
    "package": ("toolkit", "package"),
    "stress": ("toolkit", "stress"),
}


def _handler(command: str) -> Callable[[Front], int]:
    module, name = COMMANDS[command]
    handler: Callable[[Front], int] = getattr(
        importlib.import_module(f"pipeline.cli.{module}"), name
    )
    return handler


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
_interrupted = threading.Event()


def _interrupt(signum: int, frame: object) -> None:
    # One interrupt stops the command; more while it cleans up (or while Python shuts down,
    # when it would restore the default action and die of the signal) are ignored.
    for sig in _STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    _interrupted.set()
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    """Run a command here (`pipeline.launch` runs it in the warm service when it can)."""
    args = parser().parse_args(argv)
    for sig in _STOP_SIGNALS:  # a closed terminal or SIGTERM cleans up like Ctrl-C
        signal.signal(sig, _interrupt)
    _whole_writes_to_stdout()
    try:
        return _handler(args.command)(Front(args))
    except GamebatchError as exc:
        err(f"error: {exc}")
        return exc.exit_code
    except BrokenPipeError:  # the reader of standard output left: what is left goes nowhere
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except Exception as exc:
        if _interrupted.is_set():  # the interrupt, raised where Python wraps it (an import)
            err("interrupted")
            return 130
        if type(exc).__module__.split(".")[0] not in ("redis", "kombu"):
            raise
        # redis-py and kombu name the host and port in their messages, never the password
        if os.environ.get(DEBUG_ENV):  # where it came from, for whoever diagnoses
            traceback.print_exc()
        err(f"error: {_redis_error(exc)}")
        return 1
    except KeyboardInterrupt:
        err("interrupted")
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


def preload() -> None:
    """Load what commands use (the warm service does, before it forks a command)."""
    import tqdm  # a progress bar on a terminal

    import pipeline.app.backend
    import pipeline.app.grade
    import pipeline.app.solve
    import pipeline.grading.layout
    import pipeline.grading.reports
    import pipeline.grading.scoring
    import workers.celery_app  # queueing a big input's chunks
    import workers.runner
    from pipeline import escape
    from pipeline.games.registry import registry

    for module, _ in COMMANDS.values():
        if module != "running":
            importlib.import_module(f"pipeline.cli.{module}")
    registry()
    pipeline.grading.reports.rendering()  # computed once here, not in every grading
    escape.xml("")  # its pattern compiled
    del pipeline, workers, tqdm
