"""`gamebatch serve`: the cluster, the spool, the runner processes and uvicorn, started in
that order and stopped in reverse; jobs a previous run left unfinished are resumed."""

from __future__ import annotations

import hashlib
import ipaddress
import logging
import socket
import tempfile
import threading
import time
from pathlib import Path

import uvicorn

from pipeline import service
from pipeline.config import Settings, TokenSetting, default_state_dir
from pipeline.errors import UsageError
from pipeline.jobstore import connect, connect_async
from pipeline.server.app import create_app
from pipeline.server.auth import Tokens
from pipeline.server.context import Service
from pipeline.server.gradings import GradingTask, folder
from pipeline.server.records import Records
from pipeline.server.retention import keep_sweeping
from pipeline.server.runners import RunnerPool, Upload
from pipeline.server.spool import Spool

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
    with service.cluster(settings, lazy=False) as c:
        spool = Spool(spool_folder(settings))
        spool.sweep_uploads()
        server = _instance_name(spool.root)
        records = Records(connect(c.settings.broker_url or "", "gamebatch-server"), server)
        runners = RunnerPool(c.settings, spool, server)
        runners.start()
        stop = threading.Event()
        healer = threading.Thread(target=_heal, args=(c, stop), daemon=True)
        healer.start()
        keep = float(settings.server.keep_seconds)
        sweeper = threading.Thread(target=keep_sweeping, args=(records, spool, keep, stop),
                                   daemon=True)  # fmt: skip
        sweeper.start()
        events = connect_async(c.settings.broker_url or "", "gamebatch-server-events")
        try:
            _resume(records, spool, runners)
            _resume_gradings(records, spool, runners)
            app = create_app(
                Service(
                    c.settings,
                    Tokens(tokens),
                    records,
                    c.store,
                    events,
                    spool,
                    runners,
                    _cached_workers(c),
                )
            )
            config = uvicorn.Config(
                app,
                host=host,
                port=port,
                log_level="warning",
                access_log=False,
                timeout_graceful_shutdown=5,
            )
            uvicorn.Server(config).run()
        finally:
            stop.set()
            runners.close()
            records.client.close()


def _instance_name(root: Path) -> str:
    """This server among others on one Redis: its host and spool folder."""
    where = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:12]
    return f"{socket.gethostname()}-{where}"


def _resume_gradings(records: Records, spool: Spool, runners: RunnerPool) -> None:
    """Gradings a stopped server left unfinished run again from their unpacked archives."""
    gradings = records.of_kind("grading")
    for grading_id in gradings.pending():
        record = gradings.get(grading_id)
        if record is None or record.get("state") in ("done", "failed", "cancelled"):
            continue
        if not (folder(spool, grading_id) / "notes.json").exists():
            gradings.finish(grading_id, "failed", error="the archive was lost; upload it again")
            continue
        runners.submit(GradingTask.of_record(grading_id, record))


def _resume(records: Records, spool: Spool, runners: RunnerPool) -> None:
    """Hand the runners again what a stopped server left unfinished: from the spooled input,
    or, when that is gone, end the job failed with the reason."""
    for job_id in records.pending():
        record = records.get(job_id)
        if record is None:
            continue
        if record.get("state") in ("done", "failed", "cancelled"):
            records.finish(job_id, record["state"])
            continue
        if not spool.input(job_id).exists() or record.get("uploaded") != "1":
            records.finish(
                job_id,
                "failed",
                error="the server stopped and the upload was lost; upload the file again",
            )
            records.event("failed", job_id, {"error": "upload lost in a server restart"})
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


def _heal(c: service.Cluster, stop: threading.Event) -> None:
    """Restart dead local workers (embedded default) while the server runs."""
    while not stop.wait(1.0):
        try:
            c.check()
        except Exception:
            log.exception("restarting local workers")


def _cached_workers(c: service.Cluster) -> object:
    seen: dict[str, object] = {"at": 0.0, "names": []}
    lock = threading.Lock()

    def workers() -> list[str]:
        with lock:
            if time.monotonic() - float(str(seen["at"])) > _HEALTH_EVERY:
                seen["names"] = service.workers_alive(c)
                seen["at"] = time.monotonic()
            names = seen["names"]
            assert isinstance(names, list)
            return names

    return workers
