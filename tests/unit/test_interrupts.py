"""An interrupt ends a command with status 130 and one line, wherever Python raised it."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator

import pytest

from pipeline import cli
from pipeline.cli.front import Front


class _InterruptedWhenNamed:
    """A descriptor whose class is built as the interrupt comes (as in an import): Python
    3.11 hands the KeyboardInterrupt on inside a RuntimeError."""

    def __set_name__(self, owner: type, name: str) -> None:
        cli._interrupt(signal.SIGINT, None)


def _imports_as_the_interrupt_comes(front: Front) -> int:
    class Imported:
        field = _InterruptedWhenNamed()

    return 0


def _plainly_interrupted(front: Front) -> int:
    cli._interrupt(signal.SIGTERM, None)
    return 0


@pytest.fixture(autouse=True)
def _signals_kept(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """main() sets the stop signals' handlers and an interrupt ignores them: restore them."""
    kept = {sig: signal.getsignal(sig) for sig in cli._STOP_SIGNALS}
    monkeypatch.setattr(cli, "_interrupted", threading.Event())
    monkeypatch.setattr(cli, "_whole_writes_to_stdout", lambda: None)
    yield
    for sig, handler in kept.items():
        signal.signal(sig, handler)


@pytest.mark.parametrize("handler", [_imports_as_the_interrupt_comes, _plainly_interrupted])
def test_an_interrupt_is_status_130_and_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], handler: object
) -> None:
    monkeypatch.setattr(cli, "_handler", lambda command: handler)
    assert cli.main(["config", "show"]) == 130
    assert capsys.readouterr().err == "gamebatch: interrupted\n"


def test_an_error_without_an_interrupt_is_not_taken_for_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(front: Front) -> int:
        raise RuntimeError("a defect")

    monkeypatch.setattr(cli, "_handler", lambda command: broken)
    with pytest.raises(RuntimeError, match="a defect"):
        cli.main(["config", "show"])
