"""A job's bytes in the payload store (setting payload_store), for workers that cannot see
the producer's files: the job's folder, made by its producer, dropped with the job, and
swept when a killed producer left it."""

from __future__ import annotations

import contextlib
import re
import secrets
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol, TypeVar

import msgspec

from pipeline.config import Settings
from pipeline.data.files import is_regular
from pipeline.data.objects import ObjectUrl, Place, listing, remove, remove_all, upload
from pipeline.errors import GamebatchError, InputError, JobFailed, UsageError
from pipeline.store.jobstate import PAYLOAD_OBJECT
from pipeline.store.protocol import Store
from pipeline.urls import is_remote

STORE_SWEEP_SECONDS = 3600  # the payload store is swept for forgotten copies this often


class PayloadFolder(msgspec.Struct, frozen=True):
    """A job's folder in the payload store (an object URL ending with /): it holds the `copy`
    of the input file whose ranges the chunks name, if one was made, and the payloads of the
    chunks that carry bytes."""

    folder: ObjectUrl
    copy: ObjectUrl | None = None


def payload_folder(
    store: Store, settings: Settings, given: Place, *, carried: bool
) -> PayloadFolder | None:
    """A new job's folder, when the settings name a payload store and the workers cannot see
    this process's files: an input file is copied there now, unless its chunks will carry
    their bytes (`carried`: an upload still arriving, the Python reader's chunks), which then
    keep them there; None when the job needs none (an object's chunks name its ranges)."""
    if not settings.payload_store or settings.file_payloads:
        return None
    if not carried and not isinstance(given, Path):
        return None
    folder = f"{settings.payload_store}/inputs/{store.cluster_id()}"  # this cluster's
    if store.claim_store_sweep(STORE_SWEEP_SECONDS):  # one producer an hour
        threading.Thread(
            target=_sweep_quietly,
            args=(store, folder, time.time()),
            name="gamebatch-store-sweep",
            daemon=True,
        ).start()
    ours = ObjectUrl(f"{folder}/{secrets.token_hex(12)}/")
    if carried or not isinstance(given, Path) or not is_regular(given):  # a pipe is read once
        return PayloadFolder(ours)
    copy = ObjectUrl(f"{ours}{given.name}")
    upload(given, copy)
    return PayloadFolder(ours, copy)


class _Queued(Protocol):
    @property
    def queued(self) -> int: ...  # chunks the run queued


Run = TypeVar("Run", bound=_Queued)


def produced_with(stored: PayloadFolder | None, produce: Callable[[], Run]) -> Run:
    """`produce` a job given its folder, which goes when the job is abandoned (bad input),
    failed, cancelled or lost, or when no chunk of this run reads it (the job had its
    answers). An interrupted job goes on, and a failed write leaves the chunks queued so far:
    its folder stays."""
    try:
        done = produce()
    except (UsageError, InputError, JobFailed):
        if stored is not None:
            with contextlib.suppress(GamebatchError):
                remove_all(stored.folder)
        raise
    if stored is not None and done.queued == 0:
        remove_all(stored.folder)
    return done


def drop_payload(store: Store, job_id: str) -> None:
    """Delete what the payload store holds for a job (when it holds anything): its folders
    there (the copy of its input, its chunks' payloads), or the copy an older producer made;
    only ever what is shaped like this cluster's (a manifest is no licence to delete
    elsewhere). Its chunks will not be read again. What the store cannot delete now stays
    (it is only bytes, and the sweep finds it)."""
    named = (store.manifest(job_id) or {}).get(PAYLOAD_OBJECT, "").split()
    ours = [url for url in named if is_remote(url) and is_job_folder(url, store.cluster_id())]
    for url in ours:
        with contextlib.suppress(GamebatchError):
            remove_all(url)


def is_job_folder(url: str, cluster: str) -> bool:
    """Whether `url` is a job's folder of this cluster in a payload store, or an object in
    one (what payload_folder makes: .../inputs/CLUSTER/24 hex digits/)."""
    found = _FOLDER.match(url)
    return found is not None and found["cluster"] == cluster


_FOLDER = re.compile(r"^[a-z0-9]+://.+/inputs/(?P<cluster>[^/]+)/[0-9a-f]{24}/([^/]+)?$")


COPY_GRACE_SECONDS = 24 * 3600  # a younger copy may be one a producer is still making


def forgotten(
    listed: list[tuple[ObjectUrl, float]], kept: set[str], now: float, grace: float
) -> list[ObjectUrl]:
    """The payload-store objects that no kept job names (itself, or a folder it is in) and
    that are older than `grace` (a producer uploads its copy before its job's manifest names
    it)."""
    folders = tuple(url for url in kept if url.endswith("/"))
    return [
        url
        for url, written in listed
        if url not in kept and not url.startswith(folders) and now - written > grace
    ]


def sweep_payload_store(store: Store, folder: str, now: float) -> int:
    """Delete the copies in this cluster's `folder` of the payload store that no kept job
    names (their producer was killed before its job ended, or the job's keys expired): the
    number deleted. Errors leave them for another round."""
    with contextlib.suppress(GamebatchError):
        listed = listing(f"{folder}/")
        gone = forgotten(listed, store.payload_objects(), now, COPY_GRACE_SECONDS)
        for url in gone:
            remove(url)
        return len(gone)
    return 0


def _sweep_quietly(store: Store, folder: str, now: float) -> None:
    """The payload store's sweep, in the background of a command: best effort, so that
    nothing of it (a Redis closed as the command ends, say) ever reaches the terminal."""
    with contextlib.suppress(Exception):
        sweep_payload_store(store, folder, now)
