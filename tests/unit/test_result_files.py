"""Result files: written whole under their final name, with the mode `open()` would give."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

import pytest

from pipeline.data.files import atomic_write, write_atomically


@pytest.fixture
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_a_new_file_gets_the_umask_mode(tmp_path: Path, umask_022: None) -> None:
    out = tmp_path / "r.out"
    atomic_write(out, "1\n")
    assert (out.read_text(), out.stat().st_mode & 0o777) == ("1\n", 0o644)


def test_a_replaced_file_keeps_its_mode(tmp_path: Path, umask_022: None) -> None:
    out = tmp_path / "r.out"
    out.write_text("old\n")
    out.chmod(0o640)
    atomic_write(out, "new\n")
    assert (out.read_text(), out.stat().st_mode & 0o777) == ("new\n", 0o640)


def test_a_failed_write_leaves_nothing(tmp_path: Path) -> None:
    out = tmp_path / "r.out"

    def fail(stream: object) -> None:
        raise RuntimeError("disk gone")

    with pytest.raises(RuntimeError):
        write_atomically(out, fail)
    assert list(tmp_path.iterdir()) == []


def test_the_old_file_stays_whole_until_the_new_one_is_complete(tmp_path: Path) -> None:
    out = tmp_path / "r.out"
    out.write_text("old\n")
    seen = []

    def fill(stream: TextIO) -> None:
        stream.write("new\n")
        stream.flush()
        seen.append(out.read_text())  # a writer that wrote straight to `out` shows "new"

    write_atomically(out, fill)
    assert (seen, out.read_text()) == (["old\n"], "new\n")
