"""Grading layouts: the tests folder, and one folder of outputs per contestant, listed with a
byte per output file."""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import overload

from pipeline import escape
from pipeline.errors import UsageError
from pipeline.grading.rules import Submission, Test


class FolderSubmissions(Sequence[Submission]):
    """Every (contestant, test) pair of a bulk layout, each made when asked: a byte per file
    says whether it is there, so that a listing of a million files stays small."""

    def __init__(self, folders: list[tuple[str, Path]], tests: list[Test], present: bytearray):
        self.folders, self.tests, self.present = folders, tests, present

    def __len__(self) -> int:
        return len(self.folders) * len(self.tests)

    @overload
    def __getitem__(self, i: int) -> Submission: ...
    @overload
    def __getitem__(self, i: slice) -> list[Submission]: ...

    def __getitem__(self, i: int | slice) -> Submission | list[Submission]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        contestant, folder = self.folders[i // len(self.tests)]
        test = self.tests[i % len(self.tests)]
        path = folder / f"{test.path_stem}.out" if self.present[i] else None
        return Submission(contestant, test.name, path, f"{contestant}/{test.name}.out")


def bulk_layout(
    tests_dir: Path, submissions_dir: Path
) -> tuple[list[Test], FolderSubmissions, list[str]]:
    """NAME.in (+ NAME.ans) tests; one folder of NAME.out files per contestant; notes.

    Nothing in the submissions folder that is not a plain folder or a regular file is
    followed or read: a symbolic link (to /etc/passwd, to the tests, out of the folder), a
    FIFO or a device is skipped with a note, and a skipped output is graded all MISSING.
    """
    tests = tests_in(tests_dir)
    if any("/" in test.name for test in tests):
        raise UsageError(
            f"{tests_dir} is a problem package: its tests judge --programs; output files are"
            " graded against a folder of NAME.in files"
        )
    _check_folder("submissions", submissions_dir)
    notes: list[str] = []
    folders, present = [], bytearray()
    for folder in contestant_folders(submissions_dir, notes):
        contestant = escape.file_name(folder.name)
        folders.append((contestant, folder))
        kinds = _kinds(folder, [f"{test.path_stem}.out" for test in tests])
        for test, mode in zip(tests, kinds, strict=True):
            present.append(mode is not None and stat.S_ISREG(mode))
            if mode is not None and not stat.S_ISREG(mode):  # None: graded all MISSING
                kind = "a symbolic link" if stat.S_ISLNK(mode) else "not a regular file"
                notes.append(f"{contestant}/{test.name}.out is {kind}: not read, graded as missing")
    return tests, FolderSubmissions(folders, tests, present), notes


def tests_in(tests_dir: Path) -> list[Test]:
    """The tests of a folder: NAME.in, each with its NAME.ans when there is one; or, in a
    problem package (Kattis, DOMjudge), data/sample/*.in then data/secret/**/*.in, named by
    their path under data/ (`secret/group1/05`)."""
    _check_folder("tests", tests_dir)
    flat = sorted(tests_dir.glob("*.in"))
    data = tests_dir / "data" if (tests_dir / "data").is_dir() else tests_dir
    inputs = flat or [p for part in PACKAGE_PARTS for p in _inputs_under(data / part)]
    if not inputs:
        raise UsageError(
            f"no NAME.in files in {tests_dir} (nor in data/sample or data/secret under it)"
        )
    top = tests_dir if flat else data
    tests = []
    for path in inputs:
        ans = path.with_suffix(".ans")
        name = "/".join(
            escape.file_name(part) for part in path.relative_to(top).with_suffix("").parts
        )
        tests.append(Test(name, path, ans if ans.is_file() else None))
    return tests


PACKAGE_PARTS = ("sample", "secret")  # a problem package's data/ folders, in judging order


def _inputs_under(folder: Path) -> list[Path]:
    """Every NAME.in under `folder`, in path order; linked folders are not followed."""
    found = []
    for root, folders, files in os.walk(folder):
        folders.sort()
        found += [Path(root) / name for name in files if name.endswith(".in")]
    return sorted(found, key=lambda p: p.relative_to(folder).parts)


def _check_folder(kind: str, folder: Path) -> None:
    try:
        found: os.stat_result | None = os.stat(folder)
    except (FileNotFoundError, NotADirectoryError):
        found = None
    except OSError as exc:
        raise UsageError(f"cannot read {kind} folder {folder}: {exc.strerror}") from None
    if found is None or not stat.S_ISDIR(found.st_mode):
        raise UsageError(f"{kind} folder {folder} does not exist")
    if not os.access(folder, os.R_OK | os.X_OK):
        raise UsageError(f"cannot read {kind} folder {folder}: Permission denied")


def _kinds(folder: Path, names: list[str]) -> list[int | None]:
    """The file type bits of each name in a folder, links not followed (None: not there),
    from one listing of the folder (one look-up per name when it cannot be listed)."""
    try:
        with os.scandir(folder) as listing:
            found = {entry.name: entry for entry in listing}
    except OSError:
        found = None
    kinds: list[int | None] = []
    for name in names:
        try:
            if found is None:
                kinds.append(stat.S_IFMT(os.lstat(folder / name).st_mode))
            elif name not in found:
                kinds.append(None)
            else:
                entry = found[name]  # its type comes with the listing; others are rare
                regular = entry.is_file(follow_symlinks=False)
                kinds.append(
                    stat.S_IFREG
                    if regular
                    else stat.S_IFMT(entry.stat(follow_symlinks=False).st_mode)
                )
        except OSError:
            kinds.append(None)
    return kinds


def contestant_folders(submissions_dir: Path, notes: list[str]) -> list[Path]:
    """The real folders directly in `submissions_dir`, links noted and skipped."""
    folders, names = [], set()
    for entry in sorted(submissions_dir.iterdir()):
        shown = escape.file_name(entry.name)
        if entry.is_symlink():
            notes.append(f"{shown} is a symbolic link: not followed, not graded")
            continue
        if not entry.is_dir():
            continue
        if shown in names:
            raise UsageError(f"two contestant folders are both shown as {shown!r}: rename one")
        names.add(shown)
        folders.append(entry)
    return folders
