"""Which refusals of a Sentinel-watched primary are a lost connection, retried on the primary
the sentinels name: the write was not made there."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import redis
from redis.sentinel import SentinelManagedConnection

from pipeline.store import following
from pipeline.store.following import FollowingConnection

SCRIPT_ON_A_REPLICA = (
    "Error running script (call to f_75f2): @user_script:7: @user_script: 7:"
    " -READONLY You can't write against a read only replica."
)
TOO_FEW_REPLICAS = "NOREPLICAS Not enough good replicas to write."


def _read(monkeypatch: pytest.MonkeyPatch, error: str, *, master: bool = True) -> None:
    """Read a reply that is `error`, on a connection to the master (or a replica)."""

    def refused(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise redis.ResponseError(error)

    monkeypatch.setattr(SentinelManagedConnection, "read_response", refused)
    monkeypatch.setattr(following, "NO_REPLICAS_PAUSE", 0)
    connection = FollowingConnection.__new__(FollowingConnection)
    connection.connection_pool = SimpleNamespace(is_master=master)  # type: ignore[assignment]
    monkeypatch.setattr(connection, "disconnect", lambda: None)
    connection.read_response()


@pytest.mark.parametrize("error", [SCRIPT_ON_A_REPLICA, TOO_FEW_REPLICAS])
def test_a_refused_write_is_a_lost_connection(monkeypatch: pytest.MonkeyPatch, error: str) -> None:
    with pytest.raises(redis.ConnectionError, match="takes no writes"):
        _read(monkeypatch, error)


@pytest.mark.parametrize(
    ("error", "master"),
    [("WRONGTYPE Operation against a key holding the wrong kind", True), (TOO_FEW_REPLICAS, False)],
)
def test_other_errors_and_replicas_read_on_purpose_are_errors(
    monkeypatch: pytest.MonkeyPatch, error: str, master: bool
) -> None:
    with pytest.raises(redis.ResponseError) as raised:
        _read(monkeypatch, error, master=master)
    assert not isinstance(raised.value, redis.ConnectionError)
