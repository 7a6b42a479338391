"""Object URLs where paths may stand: parsing, names, which URLs a chunk may name."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.config import load_settings
from pipeline.data.messages import BadPayload, FilePayload, decode_payload
from pipeline.data.objects import ObjectUrl, place, shown
from pipeline.data.payload_store import forgotten
from pipeline.errors import UsageError
from pipeline.urls import is_remote


def test_a_place_is_a_path_a_file_url_or_an_object() -> None:
    assert place("in/x.in") == Path("in/x.in")
    assert place("file:///tmp/a%20b.in") == Path("/tmp/a b.in")
    found = place("s3://bucket/deep/x.in")
    assert isinstance(found, ObjectUrl) and found.name == "x.in"
    assert place("s3://bucket/out/") / "x.in.out" == "s3://bucket/out/x.in.out"
    with pytest.raises(UsageError, match="unknown URL scheme ftp://"):
        place("ftp://host/x.in")


def test_a_url_is_shown_without_its_user_and_password() -> None:
    assert shown("https://user:secret@host/x.in") == "https://host/x.in"
    assert "secret" not in shown("HTTPS://user:secret@host/x.in")


def test_a_chunk_may_name_an_objects_range_but_never_a_file_url() -> None:
    digest = "0" * 64
    ranged = FilePayload("strgame", 1, 2, "s3://bucket/x.in", 10, 20, digest, "etag-1")
    decoded = decode_payload(ranged.encode())
    assert decoded == ranged and isinstance(decoded, FilePayload) and decoded.remote
    assert not is_remote("file:///etc/shadow") and not is_remote("/etc/shadow")
    for path in ("file:///etc/shadow", "relative/x.in", "gopher://host/x"):
        planted = FilePayload("strgame", 1, 2, path, 0, 20, digest).encode()
        with pytest.raises(BadPayload):
            decode_payload(planted)


def test_the_payload_store_is_an_object_stores_url() -> None:
    assert load_settings(payload_store="s3://bucket/spool/").payload_store == "s3://bucket/spool"
    with pytest.raises(UsageError, match="payload store"):
        load_settings(payload_store="/srv/spool")


def test_a_copy_is_forgotten_when_no_kept_job_names_it_and_it_is_old() -> None:
    old, young, named = (ObjectUrl(f"s3://b/inputs/{n}/x.in") for n in ("a", "b", "c"))
    listed = [(old, 1000.0), (young, 4000.0), (named, 1000.0)]
    assert forgotten(listed, {str(named)}, now=4500.0, grace=3000.0) == [old]
    assert forgotten(listed, set(), now=4500.0, grace=5000.0) == []


def test_a_kept_jobs_folder_keeps_everything_in_it() -> None:
    folder = "s3://b/inputs/c/job1/"
    inside = [(ObjectUrl(f"{folder}{name}"), 1000.0) for name in ("x.in", "chunk-0")]
    beside = (ObjectUrl("s3://b/inputs/c/job10/chunk-0"), 1000.0)  # a prefix, not a folder
    assert forgotten([*inside, beside], {folder}, now=9000.0, grace=10.0) == [beside[0]]


def test_a_manifest_deletes_only_this_clusters_job_folders(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whoever can write a manifest cannot make a collector empty a bucket."""
    from pipeline.data import payload_store
    from pipeline.store.jobstate import PAYLOAD_OBJECT
    from pipeline.store.memstore import MemoryStore

    store, gone = MemoryStore(), []
    monkeypatch.setattr(payload_store, "remove_all", gone.append)
    ours = f"s3://b/spool/inputs/{store.cluster_id()}/{'a' * 24}/"
    other = f"s3://b/spool/inputs/{store.cluster_id()}/{'b' * 24}/"
    named = [ours, "s3://b/", f"s3://b/inputs/another/{'c' * 24}/", "/etc/", other]
    store.open_job("strgame-" + "d" * 24, {"problem": "strgame", PAYLOAD_OBJECT: " ".join(named)})
    payload_store.drop_payload(store, "strgame-" + "d" * 24)
    assert gone == [ours, other]
    assert payload_store.is_job_folder(f"{ours}data.in", store.cluster_id())
