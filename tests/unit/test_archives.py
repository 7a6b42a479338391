"""Grading archives are unpacked as hostile input: what is refused, and that nothing is left."""

from __future__ import annotations

import gzip
import io
import tarfile
import zipfile
from pathlib import Path
from typing import IO

import pytest

from pipeline.server.archives import ArchiveRefused, Limits, _Writer, unpack

LIMITS = Limits(files=50, bytes=1 << 20)
GOOD = {"tests/a.in": b"1\n1 1\na\n", "tests/a.ans": b"Pure\n", "subs/ann/a.out": b"Pure\n"}


def _tar(path: Path, entries: list[tarfile.TarInfo | tuple[str, bytes]], gz: bool = False) -> Path:
    with tarfile.open(path, "w:gz" if gz else "w") as tar:
        for entry in entries:
            if isinstance(entry, tarfile.TarInfo):
                tar.addfile(entry)
                continue
            name, data = entry
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def _link(name: str, kind: bytes = tarfile.SYMTYPE) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = "/etc/passwd"
    return info


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize("gz", [False, True])
def test_a_tar_in_the_layout_is_unpacked_and_a_wrapping_folder_dropped(
    tmp_path: Path, gz: bool
) -> None:
    entries = [(f"contest/{name}", data) for name, data in GOOD.items()]
    archive = _tar(tmp_path / "c.tar", [*entries, ("contest/notes.txt", b"hi")], gz=gz)
    unpacked = unpack(archive, tmp_path / "out", LIMITS)
    assert _files(unpacked.root) == GOOD
    assert len(unpacked.notes) == 1 and "notes.txt" in unpacked.notes[0]


def test_a_zip_in_the_layout_is_unpacked(tmp_path: Path) -> None:
    archive = tmp_path / "c.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zipped:
        for name, data in GOOD.items():
            zipped.writestr(name, data)
    assert _files(unpack(archive, tmp_path / "out", LIMITS).root) == GOOD


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        ([("/etc/cron.d/x", b"x")], "absolute path"),
        ([("tests/../../x.in", b"x")], "climbs out"),
        ([("tests\\a.in", b"x")], "backslash"),
        ([_link("tests/a.in")], "link or a device"),
        ([_link("subs/ann/a.out", tarfile.LNKTYPE)], "link or a device"),
        ([_link("tests/dev.in", tarfile.CHRTYPE)], "link or a device"),
        ([("tests/a.in", b"1"), ("tests/A.in", b"2")], "name the same file"),
        ([("tests/é.in", b"1"), ("tests/e\u0301.in", b"2")], "name the same file"),
    ],
)
def test_hostile_entries_are_refused_before_anything_stays(
    tmp_path: Path, entries: list[tarfile.TarInfo | tuple[str, bytes]], message: str
) -> None:
    archive = _tar(tmp_path / "evil.tar", [("tests/ok.in", b"1\n"), *entries])
    with pytest.raises(ArchiveRefused, match=message) as refused:
        unpack(archive, tmp_path / "out", LIMITS)
    assert refused.value.status == 422
    assert not (tmp_path / "out").exists()


def test_a_gzip_bomb_is_refused_by_its_declared_sizes_before_a_byte_is_written(
    tmp_path: Path,
) -> None:
    # Entries each under the limit whose sizes add up to more: a tar cannot lie about its
    # sizes (its headers delimit its entries), so their sum stops it before writing one.
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for name in ("tests/a.in", "tests/b.in", "tests/c.in"):
            info = tarfile.TarInfo(name)
            info.size = 400_000
            tar.addfile(info, io.BytesIO(b"0" * info.size))
    bomb = tmp_path / "bomb.tar.gz"
    bomb.write_bytes(gzip.compress(raw.getvalue()))
    assert bomb.stat().st_size < 10_000
    writers: list[_Writer] = []
    real = _Writer.write

    def counting(self: _Writer, path: str, source: IO[bytes], declared: int) -> None:
        writers.append(self)
        real(self, path, source, declared)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_Writer, "write", counting)
        with pytest.raises(ArchiveRefused, match="max_archive_bytes") as refused:
            unpack(bomb, tmp_path / "out", LIMITS)
    assert refused.value.status == 413 and not (tmp_path / "out").exists()
    assert len(writers) == 3 and writers[0].written == 800_000  # the third: not a byte


def test_an_entry_longer_than_it_declared_is_stopped_by_the_bytes_it_writes(
    tmp_path: Path,
) -> None:
    # A source that yields more than its entry declared (a decompressor that does not
    # hold the declared size): the count of the bytes written stops it at the limit.
    writer = _Writer(tmp_path, LIMITS)
    endless = io.BytesIO(b"0" * (LIMITS.bytes * 3))
    with pytest.raises(ArchiveRefused, match="max_archive_bytes") as refused:
        writer.write("tests/a.in", endless, declared=100)
    assert refused.value.status == 413
    assert (tmp_path / "tests/a.in").stat().st_size <= LIMITS.bytes
    assert endless.tell() <= LIMITS.bytes + (1 << 20)  # it stopped reading, too


def test_a_zip_that_lies_about_its_sizes_is_refused(tmp_path: Path) -> None:
    # The central directory says 100 bytes for 4 MiB: the decompressor stops at the declared
    # size and the checksum of what it gave refuses the entry.
    archive = tmp_path / "liar.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zipped:
        zipped.writestr("tests/a.in", b"0" * (4 << 20))
    data = bytearray(archive.read_bytes())
    for signature, offset in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):  # uncompressed size
        at = data.find(signature)
        data[at + offset : at + offset + 4] = (100).to_bytes(4, "little")
    archive.write_bytes(bytes(data))
    with pytest.raises(ArchiveRefused, match="not a readable zip archive: Bad CRC") as refused:
        unpack(archive, tmp_path / "out", LIMITS)
    assert refused.value.status == 422 and not (tmp_path / "out").exists()


def test_too_many_entries_and_garbage_are_refused(tmp_path: Path) -> None:
    many = _tar(tmp_path / "many.tar", [(f"tests/{i}.in", b"1") for i in range(60)])
    with pytest.raises(ArchiveRefused, match="max_archive_files") as refused:
        unpack(many, tmp_path / "out", LIMITS)
    assert refused.value.status == 413
    garbage = tmp_path / "garbage"
    garbage.write_bytes(b"not an archive at all" * 40)
    with pytest.raises(ArchiveRefused, match="not a readable"):
        unpack(garbage, tmp_path / "out", LIMITS)
    assert not (tmp_path / "out").exists()
