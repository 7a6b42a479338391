"""JobStore.wait_for: which connection errors a command waits out and which it reports."""

from __future__ import annotations

import pytest
import redis

from pipeline.store.jobstore import JobStore

RESET = redis.ConnectionError(
    "Error while reading from 127.0.0.1:1 : (104, 'Connection reset by peer')"
)
REFUSED = redis.ConnectionError("Error 111 connecting to 127.0.0.1:1. Connection refused.")


def _answers(monkeypatch: pytest.MonkeyPatch, errors: list[Exception]) -> list[str]:
    """Make the Redis answer after `errors`; what wait_for reported meanwhile."""

    def check(url: str) -> None:
        if errors:
            raise errors.pop(0)

    monkeypatch.setattr(JobStore, "check_url", staticmethod(check))
    said: list[str] = []
    JobStore.wait_for("redis://127.0.0.1:1/0", said.append, pause=0, timeout=5)
    return said


def test_a_redis_killed_while_it_answered_is_waited_for(monkeypatch: pytest.MonkeyPatch) -> None:
    # a restart: the connection is cut once, then refused until the new one listens
    said = _answers(monkeypatch, [RESET, REFUSED, REFUSED])
    assert len(said) == 1 and said[0].startswith("waiting for Redis at")


def test_a_port_that_cuts_every_connection_is_reported_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(redis.ConnectionError, match="reset by peer"):
        _answers(monkeypatch, [RESET, RESET])


def test_a_command_says_once_that_redis_is_lost_and_retries_as_long_as_it_is_told() -> None:
    from redis.backoff import NoBackoff

    from pipeline.store.connections import PatientRetry

    said: list[str] = []
    retry = PatientRetry(4.0, said.append)
    retry._backoff = NoBackoff()  # no sleeping between tries here
    calls: list[int] = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 4:
            raise redis.ConnectionError("Connection refused")
        return "ok"

    assert retry.call_with_retry(flaky, lambda error: None) == "ok" and len(calls) == 4
    assert said == ["Redis is out of reach (Connection refused); trying again for 4 s"]
    never: list[int] = []

    def gone() -> str:
        never.append(1)
        raise redis.ConnectionError("Connection refused")

    quiet = PatientRetry(4.0)
    quiet._backoff = NoBackoff()
    with pytest.raises(redis.ConnectionError):
        quiet.call_with_retry(gone, lambda error: None)
    assert len(never) == int(4.0 / 2) + 6 + 1  # its retries, then it gives up
