"""A command waiting on a broker that no worker listens to says so, within seconds, and gives
up when told to (no I/O here: what is seen, said and timed comes in)."""

from __future__ import annotations

import time
from collections.abc import Callable

from pipeline.errors import GamebatchError

WARN_AFTER = 5.0  # seconds of waiting without a worker before the command says so
LOOK_EVERY = 1.0  # seconds between looks at the broker's live workers


class NoWorkers(GamebatchError):
    """No worker was seen for as long as --wait-for-workers allows: exit status 3."""

    exit_code = 3


def advice(waited: float) -> str:
    """What the command says about the missing workers."""
    return (
        f"no worker has been seen on this broker in {waited:.0f} s;"
        " start one with `gamebatch worker`"
    )


class WorkerWatch:
    """Called whenever the command waits for its chunks (Cluster.check): looks whether any
    worker lives at most once a `LOOK_EVERY`; after `WARN_AFTER` seconds of waiting without
    one, `say`s so once (and `lasting=False` when one comes); after `give_up` seconds, NoWorkers."""

    def __init__(
        self,
        seen: Callable[[], bool],
        say: Callable[..., None],
        *,
        give_up: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.seen, self.say, self.give_up, self.clock = seen, say, give_up, clock
        self._since: float | None = None  # waiting without a worker since
        self._looked = float("-inf")
        self.warned = False

    def __call__(self) -> None:
        now = self.clock()
        if now - self._looked < LOOK_EVERY:
            return
        self._looked = now
        if self.seen():
            self._since = None
            if self.warned:
                self.warned = False
                self.say("a worker is here now: the job goes on", lasting=False)
            return
        if self._since is None:
            self._since = now
        waited = now - self._since
        if self.give_up is not None and waited >= self.give_up:
            raise NoWorkers(
                f"{advice(waited)} (--wait-for-workers {self.give_up:g}); the job stays"
                " queued: run the command again once a worker is up"
            )
        if waited >= WARN_AFTER and not self.warned:
            self.warned = True
            self.say(f"{advice(waited)} (still waiting)")
