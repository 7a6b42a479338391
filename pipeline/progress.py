"""Progress display: a tqdm bar on a terminal, plain periodic lines otherwise."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from tqdm import tqdm

_LINE_EVERY = 10.0  # seconds between plain lines
_shown: list[ProgressBar] = []  # the displays open now, the newest last (see note)


def note(line: str, *, lasting: bool = True, stream: TextIO | None = None) -> None:
    """A warning line on standard error, written above the open progress display (which
    then shows it too while it is `lasting`, until the next note)."""
    if _shown:
        _shown[-1].note(line, lasting=lasting)
        return
    out = stream or sys.stderr
    out.write(f"gamebatch: warning: {line}\n")
    out.flush()


class ProgressBar:
    """Counts cases done against a total that may grow while the input is read."""

    def __init__(self, label: str, *, stream: TextIO | None = None, enabled: bool = True) -> None:
        self.stream = stream or sys.stderr
        self.label = label
        self.enabled = enabled
        self.done = 0
        self.total = 0
        self._by_job: dict[str, int] = {}
        self._files = ""  # what set_files said, shown beside the cases
        self._start = time.monotonic()
        self._last_line = self._start
        self._bar: tqdm[Any] | None = None
        self._note = ""  # the last warning, shown in the plain lines
        if enabled:  # a quiet one shows nothing: a note goes to standard error alone
            _shown.append(self)
        if enabled and self.stream.isatty():
            from tqdm import tqdm  # loaded only for a terminal: 10 ms of every start

            self._bar = tqdm(total=0, desc=label, unit="case", file=self.stream, leave=False)

    def note(self, line: str, *, lasting: bool = True) -> None:
        """A warning, on its own line and then beside the cases (see `note`)."""
        self._note = line.split(";", maxsplit=1)[0] if lasting else ""
        if self._bar is not None:
            self._bar.write(f"gamebatch: warning: {line}", file=self.stream)
            self._bar.set_postfix_str(self._note or self._files, refresh=True)
            return
        self.stream.write(f"gamebatch: warning: {line}\n")
        self.stream.flush()

    def say(self, line: str) -> None:
        """A line of news above the display (nothing when the display is off)."""
        if self._bar is not None:
            self._bar.write(f"gamebatch: {line}", file=self.stream)
        elif self.enabled:
            self.stream.write(f"gamebatch: {line}\n")
            self.stream.flush()

    def add_total(self, cases: int) -> None:
        """More cases were read."""
        self.total += cases
        if self._bar is not None:
            self._bar.total = self.total
            self._bar.refresh()

    def set_files(self, done: int, total: int, what: str = "files read") -> None:
        """Files handled so far (a grading's), shown with the cases."""
        self._files = f"{done}/{total} {what}"
        if self._bar is not None:
            self._bar.set_postfix_str(self._files, refresh=False)

    def job_done(self, job_id: str, done: int) -> None:
        """Cases of one job answered so far."""
        self._by_job[job_id] = max(done, self._by_job.get(job_id, 0))
        self.set_done(sum(self._by_job.values()))

    def set_done(self, done: int) -> None:
        """Cases answered so far, over all jobs."""
        if done <= self.done:
            return
        if self._bar is not None:
            self._bar.update(done - self.done)
        self.done = done
        self._maybe_line()

    def _maybe_line(self) -> None:
        now = time.monotonic()
        if self._bar is not None or not self.enabled or now - self._last_line < _LINE_EVERY:
            return
        self._last_line = now
        self.stream.write(self.summary() + "\n")
        self.stream.flush()

    def summary(self) -> str:
        """One line: done/total, rate and time left."""
        elapsed = max(time.monotonic() - self._start, 1e-9)
        rate = self.done / elapsed
        left = (self.total - self.done) / rate if rate and self.total > self.done else 0.0
        files = f"{self._files}, " if self._files else ""
        waiting = f" ({self._note})" if self._note else ""
        return (
            f"{self.label}: {files}{self.done}/{self.total} cases, {rate:,.0f} cases/s,"
            f" {left:,.0f} s left{waiting}"
        )

    def close(self) -> None:
        """Replace the bar by a summary line (on a terminal)."""
        if self in _shown:
            _shown.remove(self)
        if self._bar is not None:
            self._bar.close()
            self._bar = None
            if self.done:
                self.stream.write(self.summary().rsplit(",", 1)[0] + "\n")
