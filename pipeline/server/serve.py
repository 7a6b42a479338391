"""`gamebatch serve`: the cluster, the spool, the runner processes and uvicorn, started in
that order and stopped in reverse; jobs a previous run left unfinished are resumed."""

from __future__ import annotations

import asyncio
import hashlib
import ipaddress
import logging
import shutil
import socket
import tempfile
import threading
import time
from pathlib import Path

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from pipeline.app.cluster import Cluster, cluster, workers_alive
from pipeline.config import ServerSettings, Settings, TokenSetting, default_state_dir
from pipeline.errors import UsageError
from pipeline.server.app import create_app
from pipeline.server.auth import Tokens
from pipeline.server.context import ServerState
from pipeline.server.gradings import UNPACKING, GradingTask, folder
from pipeline.server.hacks import HackTask
from pipeline.server.packages import PackageTask
from pipeline.server.retention import keep_sweeping
from pipeline.server.runners import RunnerPool, Upload
from pipeline.server.spool import Spool
from pipeline.store.connections import connect, connect_async
from pipeline.store.jobstate import FINISHED
from pipeline.store.records import Records

log = logging.getLogger("gamebatch.server")
_HEALTH_EVERY = 5.0  # seconds a worker count is reused by /healthz


def check_exposure(host: str, tokens: tuple[TokenSetting, ...]) -> None:
    """Refuse to listen beyond loopback without a token."""
    if tokens:
        return
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    if not loopback:
        raise UsageError(
            f"refusing to listen on {host} without a token: set server.tokens, or pass"
            " --token-file FILE (or listen on 127.0.0.1)"
        )


def spool_folder(settings: Settings) -> Path:
    """`server.spool_dir`, else a `server` folder beside the embedded Redis data."""
    if settings.server.spool_dir:
        return Path(settings.server.spool_dir)
    if settings.state_dir == "":
        return Path(tempfile.mkdtemp(prefix="gamebatch-serve-"))
    state = Path(settings.state_dir) if settings.state_dir else default_state_dir()
    return state / "server"


def serve(settings: Settings, host: str, port: int, tokens: tuple[TokenSetting, ...]) -> None:
    """Run the HTTP service until interrupted."""
    check_exposure(host, tokens)
    logging.basicConfig(level=logging.INFO, format="gamebatch serve: %(message)s")
    with cluster(settings, lazy=False, watch=False) as c:
        spool = Spool(spool_folder(settings), settings.server.body_timeout)
        spool.sweep_uploads()
        _sweep_unpacking(spool)
        server = _instance_name(spool.root)
        records = Records(connect(c.settings.broker_url or "", "gamebatch-server"), server)
        runners = RunnerPool(c.settings, spool, server)
        runners.start()
        stop = threading.Event()
        keep = float(settings.server.keep_seconds)
        for target, args in (
            (_heal, (c, runners, stop)),
            (keep_sweeping, (records, spool, keep, stop)),
        ):
            threading.Thread(target=target, args=args, daemon=True).start()
        events = connect_async(c.settings.broker_url or "", "gamebatch-server-events")
        try:
            _resume(records, spool, runners)
            _resume_gradings(records, spool, runners)
            parts = (records, c.jobs, events, spool, runners, _cached_workers(c))
            app = create_app(ServerState(c.settings, Tokens(tokens), *parts))
            config = uvicorn.Config(
                app,
                host=host,
                port=port,
                http=_protocol(settings.server),
                log_level="warning",
                access_log=False,
                timeout_graceful_shutdown=5,
            )
            _Announced(config).run()
        finally:
            stop.set()
            runners.close()
            records.client.close()


class _Announced(uvicorn.Server):
    """uvicorn's server, saying where it listens once it does."""

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            port = self.servers[0].sockets[0].getsockname()[1]
            host = self.config.host
            shown = f"[{host}]" if ":" in host else host
            print(f"gamebatch serve: listening on http://{shown}:{port}/", flush=True)


class _Timed(H11Protocol):
    """uvicorn's HTTP/1.1, closing a connection whose request headers take too long."""

    # Headers: `header_timeout` from the connection or the next request's first byte. A body
    # the app did not read may arrive for `body_timeout` after the response (bodies the app
    # reads time out in `Spool`).
    header_timeout = 10.0
    body_timeout = 30.0
    _deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[arg-type]
        self._arm(self.header_timeout)

    def data_received(self, data: bytes) -> None:
        if self._deadline is None and (self.cycle is None or self.cycle.response_complete):
            self._arm(self.header_timeout)  # the next request begins
        super().data_received(data)

    def handle_events(self) -> None:
        before = self.cycle
        super().handle_events()
        if self.cycle is not before:  # a request's headers are in
            self._disarm()

    def on_response_complete(self) -> None:
        unread = self.conn.their_state is h11.SEND_BODY
        super().on_response_complete()
        if unread and not self.transport.is_closing():
            self._arm(self.body_timeout)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self, seconds: float) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(seconds, self._expired)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        if self.conn.their_state is h11.IDLE and self.conn.trailing_data[0]:
            self.transport.write(_HEADERS_LATE)  # part of a request came: say why it ends
        self.transport.close()


_LATE = b'{"error":"the request\'s headers did not arrive in time (server.header_timeout)"}'
_HEADERS_LATE = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\nconnection: close\r\n"
    + b"content-length: %d\r\n\r\n%s" % (len(_LATE), _LATE)
)


def _protocol(settings: ServerSettings) -> type[asyncio.Protocol]:
    """The HTTP protocol of uvicorn with this configuration's deadlines."""

    class Timed(_Timed):
        header_timeout = settings.header_timeout
        body_timeout = settings.body_timeout

    return Timed


def _sweep_unpacking(spool: Spool) -> None:
    """Remove archives a stopped server left half unpacked."""
    for stale in (spool.root / "gradings").glob(f"{UNPACKING}*"):
        shutil.rmtree(stale, ignore_errors=True)


def _instance_name(root: Path) -> str:
    """This server among others on one Redis: its host and spool folder."""
    where = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:12]
    return f"{socket.gethostname()}-{where}"


def _resume_gradings(records: Records, spool: Spool, runners: RunnerPool) -> None:
    """Gradings a stopped server left unfinished run again from their unpacked archives."""
    gradings = records.of_kind("grading")
    for grading_id in gradings.pending():
        record = gradings.get(grading_id)
        if record is None or record.get("state") in FINISHED:
            gradings.settle(grading_id)
            continue
        if not (folder(spool, grading_id) / "notes.json").exists():
            lost = "the archive was lost; upload it again"
            gradings.finish(grading_id, "failed", event="grading.failed", error=lost)
            continue
        if "hack" in record:
            runners.submit(HackTask.of_record(grading_id, record))
        elif "package" in record:
            runners.submit(PackageTask.of_record(grading_id, record))
        else:
            runners.submit(GradingTask.of_record(grading_id, record))


def _resume(records: Records, spool: Spool, runners: RunnerPool) -> None:
    """Hand the runners again what a stopped server left unfinished: from the spooled input,
    or, when that is gone, end the job failed with the reason."""
    for job_id in records.pending():
        record = records.get(job_id)
        if record is None or record.get("state") in FINISHED:
            records.settle(job_id)
            continue
        if not spool.input(job_id).exists() or record.get("uploaded") != "1":
            lost = "the server stopped and the upload was lost; upload the file again"
            records.finish(job_id, "failed", event="failed", error=lost)
            continue
        log.info("resuming %s", job_id)
        runners.submit(
            Upload(
                job_id,
                record["problem"],
                record.get("name", job_id),
                record.get("keep_going") == "1",
                record.get("lane", "auto"),
                record.get("callback_url") or None,
            )
        )


def _heal(c: Cluster, runners: RunnerPool, stop: threading.Event) -> None:
    """Restart dead local workers (embedded default) and dead runners while the server runs;
    a dead runner's jobs go to the others."""
    while not stop.wait(1.0):
        try:
            c.check()
            dead = runners.heal()
            if dead:
                log.warning("runner %s died: started another", ", ".join(map(str, dead)))
        except Exception:
            log.exception("restarting local workers or runners")


def _cached_workers(c: Cluster) -> object:
    seen: dict[str, object] = {"at": 0.0, "names": []}
    lock = threading.Lock()

    def workers() -> list[str]:
        with lock:
            if time.monotonic() - float(str(seen["at"])) > _HEALTH_EVERY:
                seen["names"] = workers_alive(c)
                seen["at"] = time.monotonic()
            names = seen["names"]
            assert isinstance(names, list)
            return names

    return workers
