"""Producer processes: several input files read at once, each file in a spawned process."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from pipeline.children import tie_to_parent
from pipeline.config import Settings
from pipeline.data import producer
from pipeline.data.payload_store import payload_folder, produced_with
from pipeline.errors import GamebatchError, InputError
from pipeline.games.problem import scanner
from pipeline.games.registry import get_problem
from pipeline.store.shards import open_store

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

PARALLEL_MIN_BYTES = 32 << 20  # below this much input, starting producers costs more than it saves

Result = producer.Submitted | str  # a queued job, or a bad input's error line


def producer_count(settings: Settings, inputs: list[Path], local_workers: int = 0) -> int:
    """Producer processes for these inputs: `producers`, else for large inputs one per CPU
    that local workers leave free (on a machine that also solves, more would only compete)."""
    if settings.producers is not None:
        return min(settings.producers, len(inputs))
    if len(inputs) < 2 or sum(_size(path) for path in inputs) < PARALLEL_MIN_BYTES:
        return 1
    return max(1, min((os.cpu_count() or 1) - local_workers, len(inputs)))


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0  # the producer reports it


class FileTask(msgspec.Struct, frozen=True):
    """What a producer process needs to queue one file."""

    settings: Settings  # with broker_url set
    problem: str
    input: Path
    keep_going: bool
    lane: str


def _start(context: Any) -> tuple[Any, Connection]:
    """A producer process and this end of its pipe."""
    ours, theirs = context.Pipe()
    process = context.Process(target=_serve, args=(theirs, os.getpid()), daemon=True)
    process.start()
    theirs.close()
    return process, ours


def produce_in_parallel(
    tasks: list[FileTask],
    processes: int,
    *,
    on_cases: Callable[[int], None],
    on_wait: Callable[[], None],
    poll: float,
) -> list[Result]:
    """Queue the files from `processes` processes at once (a single producer is the usual
    bottleneck), in the order given. `on_wait` runs while waiting (to heal local workers).

    The processes talk over pipes (no semaphores to leak) and die with this process.
    """
    from multiprocessing import connection, get_context  # only here: one producer needs none

    context = get_context("spawn")  # nothing of this process's sockets
    todo = list(enumerate(tasks))[::-1]
    results: dict[int, Result] = {}
    pool: list[tuple[Any, Connection]] = []
    busy: list[Connection] = []  # producers with a file (the others were told to stop)

    try:
        for _ in range(min(processes, len(tasks))):
            process, ours = _start(context)
            pool.append((process, ours))
            busy.append(ours)
            ours.send(todo.pop())
        while len(results) < len(tasks):
            for conn in connection.wait(list(busy), timeout=poll * 4):
                assert isinstance(conn, connection.Connection)
                message = _receive(conn)
                if message[0] == "cases":
                    on_cases(message[1])
                    continue
                results[message[1]] = _result(message[2])
                if todo:
                    conn.send(todo.pop())
                else:
                    conn.send(None)  # it exits: no more waiting on it
                    busy.remove(conn)
            on_wait()
    finally:
        for process, conn in pool:
            if process.is_alive() and len(results) < len(tasks):
                process.terminate()  # stop those in the middle of a file
            process.join()
            conn.close()
    return [results[i] for i in range(len(tasks))]


def _receive(conn: Connection) -> tuple[Any, ...]:
    try:
        message: tuple[Any, ...] = conn.recv()
    except (EOFError, OSError):
        raise GamebatchError(
            "a producer process died (killed, or out of memory); run the command again:"
            " what was queued is kept"
        ) from None
    return message


def _result(value: Result | BaseException) -> Result:
    if isinstance(value, BaseException):
        raise value
    return value


def _serve(conn: Connection, parent: int) -> None:
    """A producer process: queue each file it is handed until it is handed None."""
    tie_to_parent(signal.SIGKILL, parent)  # never outlive `solve`
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # `solve` decides what an interrupt stops
    while (item := conn.recv()) is not None:
        index, task = item
        try:
            result: Result | BaseException = _produce(task, lambda n: conn.send(("cases", n)))
        except GamebatchError as exc:
            result = exc
        except Exception as exc:  # sent to `solve`, which reports it
            result = GamebatchError(f"{task.input}: {type(exc).__name__}: {exc}")
        conn.send(("done", index, result))


def _produce(task: FileTask, on_cases: Callable[[int], None]) -> Result:
    """One input file, in a producer process; a bad input comes back as its error line."""
    from workers.celery_app import cluster_sender

    settings = task.settings
    store = open_store(settings, command=True)
    try:
        send = cluster_sender(settings, store)

        problem = get_problem(task.problem)
        carried = task.keep_going or scanner(problem) is None  # the Python reader's chunks

        def submit() -> producer.Submitted:
            stored = payload_folder(store, settings, task.input, carried=carried)
            return produced_with(
                stored,
                lambda: producer.submit(
                    problem,
                    task.input,
                    store,
                    send,
                    settings,
                    how=producer.Production(
                        settings.chunk.window,
                        task.lane,
                        task.keep_going,
                        on_cases,
                        stored=stored,
                    ),
                ),
            )

        return producer.retry_when_lost(
            submit,
            task.input,
            lambda note: print(f"gamebatch: {note}", file=sys.stderr, flush=True),
        )
    except InputError as exc:
        return f"error: {exc}"
    finally:
        store.close()
