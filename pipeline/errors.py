"""Errors that end a command with a one-line message instead of a traceback."""

from __future__ import annotations


class GamebatchError(Exception):
    """An expected failure: printed as one line, exit status `exit_code`."""

    exit_code = 1


class UsageError(GamebatchError):
    """Bad command-line usage or configuration."""

    exit_code = 2


class UnknownJob(GamebatchError):
    """A job id that is malformed or names no job: the user's mistake, exit status 2."""

    exit_code = 2


class InputError(GamebatchError):
    """A malformed input file; `str()` names the file, line and case."""

    exit_code = 2

    def __init__(
        self,
        reason: str,
        *,
        file: str = "",
        line: int = 0,
        case: int = 0,
        recoverable: bool = False,
    ) -> None:
        self.reason = reason
        self.file = file
        self.line = line
        self.case = case
        self.recoverable = recoverable  # the reader stands at the start of the next case
        super().__init__(reason)

    def __str__(self) -> str:
        where = self.file or "<input>"
        if self.line:
            where += f":{self.line}"
        if self.case:
            where += f": case {self.case}"
        return f"{where}: {self.reason}"


class Refused(GamebatchError):
    """Bad input whose message is already complete (it names its file, line and case)."""

    exit_code = 2


class JobFailed(GamebatchError):
    """A job ended without a complete answer set."""

    exit_code = 1


class JobCancelled(JobFailed):
    """The job was cancelled (from any client) while this command waited for it."""


class JobLost(JobFailed):
    """The job's keys are gone: Redis lost its data, or the job expired."""
