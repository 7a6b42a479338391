"""Solving: every input queued (in producer processes when that pays), then each collected
in order into its result file; the `solve` workflow, and the uploads the server solves."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property, partial
from pathlib import Path
from typing import TextIO

import msgspec

from pipeline.app.cluster import Cluster, cluster
from pipeline.app.collect import Waiting, errors_file, write_result
from pipeline.config import Settings
from pipeline.data import objects, producer
from pipeline.data.collector import INVALID_WORD
from pipeline.data.files import OutputError, check_input, check_output
from pipeline.data.objects import ObjectUrl, Place
from pipeline.data.payload_store import PayloadFolder, payload_folder, produced_with
from pipeline.errors import GamebatchError, InputError, JobLost, UsageError
from pipeline.games.problem import Problem, runs_in_process, scanner
from pipeline.local import producers
from pipeline.local.sharing import Alone, Sharing
from pipeline.progress import ProgressBar
from pipeline.store.jobstate import JobCounters

Report = Callable[[str], None]  # one line for the user (an error, a note)


class SolveRequest(msgspec.Struct, frozen=True):
    """`solve`: input files or objects, and where each result goes (`output` for one input,
    `out_dir` for several, neither for standard output)."""

    problem: Problem
    inputs: list[Place]
    output: Place | None = None
    out_dir: Place | None = None
    keep_going: bool = False
    lane: str = "auto"
    quiet: bool = False

    def targets(self) -> list[FileJob]:
        """Each input with its result, checked before any work: every input readable, every
        output writable, no output replacing an input or another input's result."""
        if len(self.inputs) > 1 and self.output:
            raise UsageError("-o takes one input; use --out-dir DIR for several")
        if len(self.inputs) > 1 and self.out_dir is None:
            raise UsageError("several inputs need --out-dir DIR")
        for path in self.inputs:
            check_readable(path)
        if self.out_dir is not None:
            out_dir = self.out_dir
            files = [FileJob(p, out_dir / f"{p.name}.out") for p in self.inputs]
        else:
            files = [FileJob(self.inputs[0], self.output)]
        outputs = _claim_outputs(files, keep_going=self.keep_going)
        if isinstance(self.out_dir, Path):
            try:
                self.out_dir.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise UsageError(f"cannot create folder {self.out_dir}: {exc.strerror}") from None
        for out in outputs:
            check_output(out, [p for p in self.inputs if isinstance(p, Path)])
        return files


def check_readable(path: Place) -> None:
    """Refuse, before any work, an input that cannot be read."""
    if isinstance(path, ObjectUrl):
        objects.stat(path)
    else:
        check_input(path)


def _claim_outputs(files: list[FileJob], *, keep_going: bool) -> list[Path]:
    """Every file the inputs would write (objects are not files); two inputs writing one
    file or object is refused."""
    claimed: dict[str, Place] = {}
    outputs = []
    for item in files:
        if not isinstance(item.output, Path | ObjectUrl):
            continue
        for out in (item.output, *([errors_file(item.output)] if keep_going else [])):
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


EARLY_WORKERS_BYTES = 32 << 20  # inputs this big start the local workers before hashing


def _size(path: Place) -> int:
    try:
        return objects.stat(path).size if isinstance(path, ObjectUrl) else os.stat(path).st_size
    except (OSError, GamebatchError):
        return 0  # the producer reports it


@dataclass(frozen=True)
class FileJob:
    """One input file and where its result goes: a file, a stream, or None (stdout). A
    `source` reads an input that is still arriving (an upload), in this process; messages
    call the input `name` (default: its path)."""

    input: Place
    output: Place | TextIO | None
    source: producer.Source | None = field(default=None, compare=False)
    name: str | None = None
    spooled: bool = False  # the input is only ever appended to (see producer.submit)


class FileOutcome(msgspec.Struct, frozen=True):
    """What became of one input of a run."""

    item: FileJob
    job: producer.Submitted | None  # None: the input was refused
    error: str | None = None  # the refused input's (or unwritten result's) error line
    invalid: int = 0  # cases marked INVALID (keep-going mode)
    status: int = 2  # the exit status an error calls for


class Solving(msgspec.Struct, frozen=True):
    """How a run solves its files: the game, whether invalid cases are let through, the lane."""

    problem: Problem
    keep_going: bool = False
    lane: str = "auto"


class Solved(msgspec.Struct, frozen=True):
    """What `solve` did: its exit status, and what became of each input."""

    status: int
    outcomes: list[FileOutcome] = msgspec.field(default_factory=list)


def solve(settings: Settings, request: SolveRequest, report: Report) -> Solved:
    """The `solve` workflow: every input solved into its result; bad inputs are reported and
    skipped."""
    files = request.targets()
    how = Solving(request.problem, request.keep_going, request.lane)
    outcomes = run(settings, how, files, report, ProgressBar("solve", enabled=not request.quiet))
    status = 0
    for outcome in outcomes:
        if outcome.invalid:
            output = outcome.item.output
            where = (
                f"listed in {errors_file(output)}" if isinstance(output, Path) else "listed above"
            )
            report(f"error: {outcome.item.input}: invalid cases marked {INVALID_WORD} ({where})")
        if outcome.error or outcome.invalid:
            status = max(status, outcome.status if outcome.error else 2)
    return Solved(status, outcomes)


def run(
    settings: Settings,
    how: Solving,
    files: list[FileJob],
    report: Report,
    progress: ProgressBar,
) -> list[FileOutcome]:
    """The one orchestration of everything that solves: queue every file (in producer
    processes when that pays), then collect each in order, healing local workers, re-queueing
    lost chunks and reading an input again when Redis lost its job. A bad input is reported
    and skipped. `progress` is closed at the end."""
    with cluster(settings) as c:
        outcomes = run_on(c, how, files, report, progress)
    progress.close()
    return outcomes


def run_on(
    c: Cluster,
    how: Solving,
    files: list[FileJob],
    report: Report,
    progress: ProgressBar,
) -> list[FileOutcome]:
    """`run` on a cluster that is already there (a grading's)."""
    steps = _SolveRun(c, how, progress, report)
    outcomes, queued = [], []
    for item, result in zip(files, steps.queue_all(files), strict=True):
        if isinstance(result, str):
            report(result)
            outcomes.append(FileOutcome(item, None, result))
        else:
            queued.append((item, result))
    for item, job in queued:  # a result that cannot be written keeps the others from nothing
        try:
            outcomes.append(FileOutcome(item, job, None, steps.collect(item, job)))
        except OutputError as exc:
            report(f"error: {exc}")
            outcomes.append(FileOutcome(item, job, f"error: {exc}", status=exc.exit_code))
    order = {item: i for i, item in enumerate(files)}
    return sorted(outcomes, key=lambda o: order[o.item])


@dataclass
class _SolveRun:
    """One `solve`: what queueing and collecting its files share."""

    c: Cluster
    how: Solving
    progress: ProgressBar
    report: Report

    def queue_all(self, files: list[FileJob]) -> list[producer.Submitted | str]:
        """Every file queued (a bad one as its error line): here, or in producer processes."""
        c = self.c
        paths = [f.input for f in files if isinstance(f.input, Path)]
        count = producers.producer_count(c.settings, paths, c.local_workers)
        if count < 2 or len(paths) < len(files) or any(f.source is not None for f in files):
            return [self._queue_or_error(item) for item in files]
        c.ensure()  # producer processes queue chunks themselves
        tasks = [
            producers.FileTask(
                c.settings,
                self.how.problem.name,
                path,
                self.how.keep_going,
                producer.choose_lane(path, c.settings, self.how.lane),
            )
            for path in paths  # every input is a file here
        ]
        return producers.produce_in_parallel(
            tasks,
            count,
            on_cases=self.progress.add_total,
            on_wait=c.check,
            poll=c.settings.poll_interval,
        )

    def _queue_or_error(self, item: FileJob) -> producer.Submitted | str:
        try:
            return self._queue(item)
        except InputError as exc:
            return f"error: {exc}"

    def _queue(self, item: FileJob) -> producer.Submitted:
        c = self.c

        def on_progress(p: JobCounters) -> None:
            c.check()
            self.progress.job_done(p.job_id, p.done)

        here, size, chunk = self._here(item), _size(item.input), c.settings.chunk
        small = here and (
            size <= chunk.local_bytes or (size <= chunk.alone_bytes and not c.running())
        )
        threads = 1 if size <= chunk.local_bytes else max(c.local_workers, 1)
        alone = Alone(c.run_here(), threads) if small else None  # every core, no worker
        send = alone or (self.sharing.send if here else c.send)
        if not small and size >= EARLY_WORKERS_BYTES:
            c.ensure()  # a big input is likely new work: the workers' start overlaps the hashing

        def submit() -> producer.Submitted:
            stored = None if small else self._payload_folder(item)
            return produced_with(
                stored,
                lambda: producer.submit(
                    self.how.problem,
                    item.input,
                    c.store,
                    send,
                    c.settings,
                    how=producer.Production(
                        c.settings.chunk.window,
                        producer.choose_lane(item.input, c.settings, self.how.lane),
                        self.how.keep_going,
                        self.progress.add_total,
                        on_progress,
                        item.source,
                        item.name,
                        item.spooled,
                        stored,
                    ),
                ),
            )

        with alone or contextlib.nullcontext():
            return producer.retry_when_lost(submit, item.input, self.report)

    def _payload_folder(self, item: FileJob) -> PayloadFolder | None:
        """The job's folder in the payload store (see payload_folder): its chunks carry
        bytes when the input is still arriving or the Python reader validates it."""
        carried = (
            item.source is not None or self.how.keep_going or scanner(self.how.problem) is None
        )
        return payload_folder(self.c.store, self.c.settings, item.input, carried=carried)

    @cached_property
    def sharing(self) -> Sharing:
        """The chunks this command shares with its local workers."""
        return self.c.sharing()

    def _here(self, item: FileJob) -> bool:
        """Whether this command may solve chunks itself: when the cluster is local and the
        game says its solver cannot take the process down with it (`in_process`). It then
        solves a small input whole, and a larger one's chunks while its workers are busy."""
        if not self.c.local_workers or item.source is not None or not isinstance(item.input, Path):
            return False
        return runs_in_process(self.how.problem)

    def _idle(self, item: FileJob, job_id: str) -> Callable[[], bool]:
        """What the command does while it waits for a job: take back the chunks it shares
        that no worker has taken yet, when it shares them."""
        if self._here(item):
            return partial(self.sharing.take_back, job_id)
        return lambda: False

    def collect(self, item: FileJob, job: producer.Submitted) -> int:
        """Write one file's result, reading the input again when Redis lost the job; the
        number of invalid cases."""
        for attempt in range(1, producer.LOST_JOB_RETRIES + 1):
            try:
                waiting = Waiting(self.progress, idle=self._idle(item, job.job_id), produced=True)
                _, invalid = write_result(
                    self.c, self.how.problem, job.job_id, item.output, waiting
                )
                return invalid
            except JobLost:
                if attempt == producer.LOST_JOB_RETRIES:
                    raise
                self.report(f"note: Redis lost job {job.job_id}; reading {item.input} again")
                job = self._queue(item)
        raise AssertionError("unreachable")
