"""What every command's handler is given: its arguments, the settings they make, and the
backend its workflows run on (a cluster, or a server in client mode), chosen once."""

from __future__ import annotations

import argparse
import os
import sys
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from pipeline.data.objects import ObjectUrl, place
from pipeline.errors import UsageError

if TYPE_CHECKING:
    from pipeline.app.backend import Backend
    from pipeline.config import Settings


PLACES_HELP = "a file, or an object's URL (s3://BUCKET/KEY, gs://, https://, file://)"


def place_argument(text: str) -> Path | ObjectUrl:
    """A command line's file or URL (pipeline.data.objects.place), refused as argparse refuses."""
    try:
        return place(text)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def err(line: str) -> None:
    """One line for the user on standard error."""
    print(f"gamebatch: {line}", file=sys.stderr)


class Front:
    """A command's arguments, its settings and its backend."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args

    def settings(self, need_broker: bool = False) -> Settings:
        """The settings: defaults, the file, the environment, then the flags."""
        from pipeline.config import load_settings

        args = self.args
        settings = load_settings(
            args.config,
            broker_url=getattr(args, "broker", None),
            workers=getattr(args, "workers", None),
            producers=getattr(args, "producers", None),
            wait_for_workers=getattr(args, "wait_for_workers", None),
            failover_seconds=getattr(args, "failover_seconds", None),
        )
        if need_broker and not settings.broker_url:
            raise UsageError(
                f"{args.command} needs a broker: pass --broker URL or set GAMEBATCH_BROKER_URL"
            )
        return settings

    @cached_property
    def server(self) -> str | None:
        """The server of client mode, or None for a cluster."""
        args = self.args
        if not getattr(args, "server", None) and not os.environ.get("GAMEBATCH_SERVER"):
            return None  # a cluster (and no HTTP client to load)
        from pipeline.client.http import server_url

        url = server_url(getattr(args, "server", None))
        if url and getattr(args, "broker", None):
            raise UsageError("--server and --broker exclude each other")
        return url

    @cached_property
    def backend(self) -> Backend:
        """Where the workflows run: the server (--server URL), else the cluster."""
        if self.server:
            from pipeline.client.remote import OverHttp

            return OverHttp(self.server, getattr(self.args, "token_file", None), self.settings, err)
        from pipeline.app.backend import OnCluster

        return OnCluster(self.settings(), err)
