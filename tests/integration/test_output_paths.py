"""Where results go: special files, links, name clashes, inputs as outputs, unwritable places."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from pipeline.data.files import OutputError, atomic_write, check_output
from pipeline.errors import UsageError
from pipeline.games.registry import get_problem
from tests.helpers import answers, command_env, input_text, random_cases
from tests.integration.test_pipeline import gamebatch

pytestmark = pytest.mark.integration

INPUT = "2\n1 1\na\n2 3\nab\nb\n"
RESULT = answers(get_problem("strgame"), INPUT)


@pytest.fixture
def given(tmp_path: Path) -> Path:
    path = tmp_path / "x.in"
    path.write_text(INPUT)
    return path


def _one_error_line(result: subprocess.CompletedProcess[str], status: int, words: str) -> None:
    assert result.returncode == status, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gamebatch: error: "), result.stderr
    assert words in lines[0], lines[0]


def test_a_character_device_is_written_not_replaced(tmp_path: Path, given: Path) -> None:
    null = tmp_path / "null"
    full = tmp_path / "full"
    try:  # copies of /dev/null and /dev/full: the real ones are never put at risk
        os.mknod(null, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        os.mknod(full, stat.S_IFCHR | 0o666, os.makedev(1, 7))
    except PermissionError:
        pytest.skip("mknod needs root")
    ok = gamebatch("solve", "-p", "strgame", str(given), "-o", str(null), "-q")
    assert ok.returncode == 0, ok.stderr
    refused = gamebatch("solve", "-p", "strgame", str(given), "-o", str(full), "-q")
    _one_error_line(refused, 1, f"cannot write {full}: No space left on device")
    for device in (null, full):
        assert stat.S_ISCHR(device.lstat().st_mode), f"{device} was replaced"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["full", "null", "x.in"]


def test_a_fifo_is_written_not_replaced(tmp_path: Path, given: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received: list[str] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_text()), daemon=True)
    reader.start()
    result = gamebatch("solve", "-p", "strgame", str(given), "-o", str(fifo), "-q")
    reader.join(30)
    assert result.returncode == 0, result.stderr
    assert received == [RESULT]
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


def test_a_link_is_followed_and_kept(tmp_path: Path, given: Path) -> None:
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "r.out"
    target.write_text("old\n")
    link = tmp_path / "r.out"
    link.symlink_to(target)
    result = gamebatch("solve", "-p", "strgame", str(given), "-o", str(link), "-q")
    assert result.returncode == 0, result.stderr
    assert link.is_symlink() and target.read_text() == RESULT


def test_the_input_is_never_the_output(tmp_path: Path, given: Path) -> None:
    alias = tmp_path / "alias.in"
    alias.symlink_to(given)
    hard = tmp_path / "hard.in"
    os.link(given, hard)
    for out in (given, alias, hard):
        refused = gamebatch("solve", "-p", "strgame", str(given), "-o", str(out))
        _one_error_line(refused, 2, "the result would replace it")
    folder = tmp_path / "od"
    folder.mkdir()
    (folder / "x.in.out").symlink_to(given)  # --out-dir's name for x.in is the input itself
    refused = gamebatch("solve", "-p", "strgame", str(given), "--out-dir", str(folder))
    _one_error_line(refused, 2, "the result would replace it")
    assert given.read_text() == INPUT


def test_out_dir_name_clashes_are_refused_before_any_work(tmp_path: Path) -> None:
    for side in ("a", "b"):
        (tmp_path / side).mkdir()
        (tmp_path / side / "x.in").write_text(INPUT)
    out = tmp_path / "od"
    refused = gamebatch(
        "solve",
        "-p",
        "strgame",
        str(tmp_path / "a/x.in"),
        str(tmp_path / "b/x.in"),
        "--out-dir",
        str(out),
    )
    _one_error_line(refused, 2, f"{tmp_path / 'a/x.in'} and {tmp_path / 'b/x.in'} would both")
    assert not out.exists(), "a refused command made its output folder"


def test_out_dir_is_created(tmp_path: Path, given: Path) -> None:
    out = tmp_path / "new" / "folder"
    result = gamebatch("solve", "-p", "strgame", str(given), "--out-dir", str(out), "-q")
    assert result.returncode == 0, result.stderr
    assert (out / "x.in.out").read_text() == RESULT


def test_an_output_that_was_never_writable_is_refused_before_solving(
    tmp_path: Path, given: Path
) -> None:
    folder = tmp_path / "folder"
    folder.mkdir()
    _one_error_line(
        gamebatch("solve", "-p", "strgame", str(given), "-o", str(folder)), 2, "it is a folder"
    )
    _one_error_line(
        gamebatch("solve", "-p", "strgame", str(given), "-o", str(tmp_path / "no/such/r.out")),
        2,
        "does not exist",
    )
    with _mounted(tmp_path / "ro", "ro") as readonly:
        refused = gamebatch("solve", "-p", "strgame", str(given), "-o", str(readonly / "r.out"))
        _one_error_line(refused, 2, "Read-only file system")
        refused = gamebatch("gen", "-p", "strgame", "-o", str(readonly / "g.in"))
        _one_error_line(refused, 2, "Read-only file system")


def test_a_full_disk_after_solving_keeps_the_answers_for_collect(tmp_path: Path) -> None:
    big = tmp_path / "big.in"
    big.write_text("30000\n" + "1 1\na\n" * 30000)  # 180 kB of answers
    with _mounted(tmp_path / "small", "size=64k") as small:
        result = gamebatch("solve", "-p", "strgame", str(big), "-o", str(small / "r.out"), "-q")
        _one_error_line(result, 1, "No space left on device")
        assert list(small.iterdir()) == [], "a partial result was left behind"
    job = result.stderr.split("gamebatch collect ")[1].split()[0]
    later = gamebatch("collect", job, "-o", str(tmp_path / "r.out"), "-q")
    assert later.returncode == 0, later.stderr
    assert (tmp_path / "r.out").read_text() == answers(
        get_problem("strgame"), "1\n1 1\na\n"
    ) * 30000


def test_a_full_disk_under_the_embedded_redis_is_one_clear_line(tmp_path: Path) -> None:
    problem = get_problem("strgame")
    big = tmp_path / "big.in"  # about 1 MB of payloads: more than the state folder holds
    big.write_text(input_text(problem, random_cases(problem, "random", 3000, 300, seed=1)))
    with _mounted(tmp_path / "state", "size=1m") as state:
        env = {"GAMEBATCH_STATE_DIR": str(state), "GAMEBATCH_FILE_PAYLOADS": "false"}
        result = gamebatch(
            "solve", "-q", "-p", "strgame", str(big), "-o", str(tmp_path / "r.out"), env=env
        )
        _one_error_line(
            result,
            1,
            f"the embedded Redis cannot save its data in {state / 'redis'}:"
            " No space left on device; free some space there",
        )
        assert not (tmp_path / "r.out").exists()
        subprocess.run(["mount", "-o", "remount,size=64m", str(state)], check=True)
        again = gamebatch(
            "solve", "-q", "-p", "strgame", str(big), "-o", str(tmp_path / "r.out"), env=env
        )
        assert again.returncode == 0, again.stderr
        assert (tmp_path / "r.out").read_text() == answers(problem, big.read_text())
        log = (state / "redis" / "redis.log").read_text()
        assert "Bad file format" not in log and "Short write" in log  # the write that failed
        check = subprocess.run(
            ["redis-check-aof", str(state / "redis" / "appendonly.aof")],
            capture_output=True,
            text=True,
            check=False,
        )
        assert check.returncode == 0 and "is valid" in check.stdout, check.stdout


@contextmanager
def _mounted(path: Path, options: str) -> Iterator[Path]:
    """A tmpfs mounted at `path` for the test (the test is skipped where mounting is refused)."""
    path.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def test_several_results_on_a_full_disk_are_each_written_or_reported(tmp_path: Path) -> None:
    """A result that does not fit is one error line naming it; the results after it are
    still written, whole."""
    problem = get_problem("strgame")
    big, small, other = (tmp_path / name for name in ("big.in", "small.in", "other.in"))
    big.write_text("30000\n" + "1 1\na\n" * 30000)  # 180 kB of answers
    small.write_text("2\n1 1\na\n2 1\nab\nb\n")
    other.write_text("1\n1 1\nab\n")
    with _mounted(tmp_path / "out", "size=64k") as out:
        result = gamebatch(
            "solve", "-q", "-p", "strgame", str(big), str(small), str(other), "--out-dir", str(out)
        )
        _one_error_line(result, 1, f"cannot write {out / 'big.in.out'}: No space left on device")
        assert sorted(p.name for p in out.iterdir()) == ["other.in.out", "small.in.out"]
        for path in (small, other):
            assert (out / f"{path.name}.out").read_text() == answers(problem, path.read_text())


@pytest.mark.skipif(os.getuid() != 0 or not shutil.which("setpriv"), reason="root, setpriv")
@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["solve", "-p", "strgame", "{dir}/x.in"], "cannot read {dir}/x.in: Permission denied"),
        (["submit", "-p", "strgame", "{dir}/x.in"], "cannot read {dir}/x.in: Permission denied"),
        (["grade", "-p", "strgame", "{dir}/x.in", "{dir}/x.out"], "cannot read {dir}/x.in"),
        (
            ["grade", "-p", "strgame", "--tests", "{dir}/t", "--submissions", "{dir}"],
            "cannot read tests folder {dir}/t: Permission denied",
        ),
    ],
)
def test_an_input_in_an_unreadable_folder_is_one_line(
    tmp_path: Path, args: list[str], words: str
) -> None:
    """As a user who may not read the folder (root without CAP_DAC_OVERRIDE)."""
    folder = tmp_path / "closed"
    (folder / "t").mkdir(parents=True)
    (folder / "x.in").write_text("1\n1 1\na\n")
    folder.chmod(0)
    try:
        given = [a.format(dir=folder) for a in args]
        result = subprocess.run(
            [
                "setpriv",
                "--bounding-set=-dac_override,-dac_read_search",
                sys.executable,
                "-m",
                "pipeline.cli",
                *given,
            ],
            capture_output=True,
            text=True,
            env=command_env(),
            timeout=60,
            check=False,
        )
    finally:
        folder.chmod(0o700)
    _one_error_line(result, 2, words.format(dir=folder))


def test_check_output_and_atomic_write_directly(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="it is a folder"):
        check_output(tmp_path)
    with pytest.raises(OutputError, match="it is a folder"):
        atomic_write(tmp_path, "x")
    check_output(tmp_path / "new.out")  # a new file in a writable folder passes
    assert list(tmp_path.iterdir()) == [], "the check left its probe behind"


def test_dev_stdout_is_written_even_when_it_is_a_pipe(given: Path) -> None:
    result = gamebatch("solve", "-p", "strgame", str(given), "-o", "/dev/stdout", "-q")
    assert (result.returncode, result.stdout) == (0, RESULT), result.stderr
