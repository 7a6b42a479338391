"""Contestants' programs run in a sandbox: bubblewrap namespaces (no network, its own PIDs,
a read-only system, a private /tmp), an unprivileged uid per run slot, rlimits, and a cgroup
v1 per run that limits memory and processes and measures CPU time and peak memory."""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import secrets
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import IO

from pipeline.errors import UsageError
from pipeline.judging import seccomp

CGROUPS = Path("/sys/fs/cgroup")
CONTROLLERS = ("memory", "cpuacct", "pids")
GROUP = "gamebatch"  # the parent cgroup of every run's
# what runs may reach (0711, root's): compiled programs; a lock file per slot (one run per
# uid at a time) in a folder of its own that no run sees
ROOT = Path("/run/gamebatch-sandbox")
SLOTS = ROOT / "slots"
POLL = 0.01  # seconds between looks at a run's CPU time
_CLEAN_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}
_SYSTEM = ("/usr", "/bin", "/lib", "/lib64", "/sbin", "/etc/alternatives", "/etc/ld.so.cache")


@dataclass(frozen=True)
class Limits:
    """What one run may use."""

    cpu_seconds: float = 1.0
    memory_bytes: int = 256 << 20
    output_bytes: int = 64 << 20
    processes: int = 16
    open_files: int = 64
    tmp_bytes: int = 16 << 20
    wall_seconds: float | None = None  # None: 2 x cpu_seconds + 1

    @property
    def wall(self) -> float:
        """The wall clock limit."""
        return self.wall_seconds if self.wall_seconds is not None else 2 * self.cpu_seconds + 1


class Status(StrEnum):
    """How a run ended."""

    OK = "ok"  # exit status 0 within every limit
    TLE = "tle"  # CPU time or wall clock
    MLE = "mle"
    OLE = "ole"
    RE = "re"  # another exit status, or a signal


@dataclass(frozen=True)
class Run:
    """A finished run: how it ended and what it used."""

    status: Status
    cpu_seconds: float
    wall_seconds: float
    peak_bytes: int
    exit_code: int | None = None  # RE: the exit status, or
    signal: int | None = None  # the signal that ended it
    wall_clock: bool = False  # TLE: it was stopped by the wall clock (it slept, or waited)

    @property
    def detail(self) -> str:
        """Why a failed run failed, as a report shows it."""
        if self.status == Status.TLE:
            if self.wall_clock:
                return f"wall clock {self.wall_seconds:.1f} s"
            return f"CPU {self.cpu_seconds:.2f} s"
        if self.status == Status.MLE:
            return f"memory {self.peak_bytes / (1 << 20):.0f} MiB"
        if self.status == Status.OLE:
            return "output over the limit"
        if self.signal is not None:
            try:
                return f"signal {signal.Signals(self.signal).name}"
            except ValueError:
                return f"signal {self.signal}"
        return f"exit code {self.exit_code}" if self.exit_code is not None else ""


@dataclass(frozen=True)
class Bind:
    """A host folder seen in the sandbox at `inside` (read-only unless `writable`)."""

    host: Path
    inside: str
    writable: bool = False


class SandboxFailed(RuntimeError):
    """bubblewrap could not start a program (not the program's fault)."""


def shared_folder(name: str) -> Path:
    """A folder under ROOT that the runs' uids can enter (they may read what is 0755 in it)."""
    ROOT.mkdir(mode=0o711, exist_ok=True)
    os.chmod(ROOT, 0o711)
    folder = ROOT / name
    folder.mkdir(mode=0o711, exist_ok=True)
    return folder


class Sandbox:
    """Runs programs under bubblewrap as uids `first_uid`... (one per concurrent run)."""

    def __init__(self, first_uid: int = 61000, slots: int = 64) -> None:
        self.first_uid, self.slots = first_uid, slots
        self.bwrap = shutil.which("bwrap") or ""
        self.arch = seccomp.machine_arch()
        _become_subreaper()
        _guard()

    def check(self) -> None:
        """Raise a one-line error unless programs can be run sandboxed here: bubblewrap,
        root (to run as other uids and make cgroups), cgroup v1 hierarchies and a syscall
        filter for this machine."""
        if not self.bwrap:
            raise UsageError("judging programs needs bubblewrap (apt-get install bubblewrap)")
        seccomp.build(self.arch)
        if os.geteuid() != 0:
            raise UsageError("judging programs runs as root (each run as its own uid)")
        missing = [c for c in CONTROLLERS if not (CGROUPS / c / "cgroup.procs").exists()]
        if missing:
            raise UsageError(f"judging programs needs cgroup v1 {', '.join(missing)} here")
        for tool in ("setpriv", "prlimit"):
            if shutil.which(tool) is None:
                raise UsageError(f"judging programs needs {tool} (util-linux)")
        sweep_runs()
        with tempfile.TemporaryFile() as err:
            try:
                self.run(
                    ["/bin/true"], Limits(), [Bind(shared_folder("empty"), "/box")], stderr=err
                )
            except SandboxFailed:
                err.seek(0)
                said = err.read().decode(errors="replace").strip().splitlines() or ["no word"]
                raise UsageError(f"the sandbox does not start here: {said[-1]}") from None

    def run(
        self,
        argv: list[str],
        limits: Limits,
        binds: list[Bind],
        *,
        stdin: IO[bytes] | int = subprocess.DEVNULL,
        stdout: IO[bytes] | int = subprocess.DEVNULL,
        stderr: IO[bytes] | int = subprocess.DEVNULL,
    ) -> Run:
        """Run `argv` in /box of a fresh sandbox until it ends or breaks a limit."""
        with self._slot() as uid, _Cgroup(limits, uid) as group:
            for bind in binds:
                if bind.writable:
                    os.chown(bind.host, uid, uid)

            def command(status: int, syscalls: int) -> list[str]:
                return [
                    "/bin/sh", "-c", group.enter_script(), "sh",
                    "setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                    "--pdeathsig=KILL", "--inh-caps=-all", "--bounding-set=-all",
                    "prlimit", *_rlimits(limits), "--",
                    self.bwrap, "--json-status-fd", str(status), "--seccomp", str(syscalls),
                    *_bwrap_args(limits, binds), "--", *argv,
                ]  # fmt: skip

            started = time.monotonic()
            process, status_read = _launch(command, seccomp.build(self.arch), stdin, stdout, stderr)
            with os.fdopen(status_read, "rb") as status:
                killed = _watch(process, group, limits, started)
                wall = time.monotonic() - started
                group.kill_all()
                self._reap()
                if b"child-pid" not in status.read():
                    raise SandboxFailed(f"bwrap could not start {argv[0]}")
            return _ended(process.returncode, killed, group, limits, wall)

    def _reap(self) -> None:
        """Reap the runs' orphans that became this process's children (bwrap's helpers):
        unreaped, they would count against their uid's process limit, run after run."""
        for task in Path("/proc/self/task").iterdir():
            with contextlib.suppress(OSError):
                for pid in (task / "children").read_text().split():
                    if self._orphan(int(pid)):
                        with contextlib.suppress(ChildProcessError):
                            os.waitpid(int(pid), os.WNOHANG)

    def _orphan(self, pid: int) -> bool:
        """Whether a child of ours is an ended process of a run (a zombie of a run's uid)."""
        try:
            status = Path(f"/proc/{pid}/status").read_text().splitlines()
        except OSError:
            return False
        fields = dict(line.split(":", 1) for line in status if ":" in line)
        uid = int(fields.get("Uid", "-1").split()[0])
        ended = fields.get("State", "").strip().startswith("Z")
        return ended and self.first_uid <= uid < self.first_uid + self.slots

    @contextlib.contextmanager
    def _slot(self) -> Iterator[int]:
        """A uid no other run of this machine uses now (a lock file per slot)."""
        ROOT.mkdir(mode=0o711, exist_ok=True)
        SLOTS.mkdir(mode=0o700, exist_ok=True)
        start = secrets.randbelow(self.slots)
        for step in range(self.slots * 20):
            slot = (start + step) % self.slots
            handle = (SLOTS / f"{slot}.lock").open("a")
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.close()
                if step % self.slots == self.slots - 1:
                    time.sleep(0.05)
                continue
            try:
                yield self.first_uid + slot
            finally:
                handle.close()
            return
        raise RuntimeError(f"all {self.slots} sandbox slots stayed busy")


def sweep_runs() -> None:
    """End the runs of processes that are gone (a worker killed while it judged: bwrap's
    own process in the sandbox outlives it) and remove their cgroups."""
    for controller in ("pids", *(c for c in CONTROLLERS if c != "pids")):  # kill first
        parent = CGROUPS / controller / GROUP
        for run in parent.glob("run-*") if parent.is_dir() else ():
            pid = run.name.split("-")[1]
            if not pid.isdigit() or Path(f"/proc/{pid}").exists():
                continue
            with contextlib.suppress(OSError):
                for left in (run / "cgroup.procs").read_text().split():
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(int(left), signal.SIGKILL)
            with contextlib.suppress(OSError):  # still busy: a later sweep takes it
                run.rmdir()


# process -> its guard, and the pipe's end the guard waits on
_GUARDED: dict[int, tuple[subprocess.Popen[bytes], int]] = {}


def _guard() -> None:
    """A process that outlives this one ends this process's runs when it exits or is
    killed: bwrap's own process in the sandbox does not die with bwrap."""
    if os.getpid() in _GUARDED:
        return
    read, write = os.pipe()  # the guard reads end-of-file when this process is gone
    guard = subprocess.Popen(
        [sys.executable, "-m", "pipeline.judging.sandbox", str(os.getpid())],
        stdin=read,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # not killed with this process's group
        env=_CLEAN_ENV | {"PYTHONPATH": os.pathsep.join(sys.path)},
    )
    os.close(read)
    _GUARDED[os.getpid()] = (guard, write)


def end_runs_of(pid: int) -> None:
    """Kill what is left of the runs of process `pid` and remove their cgroups."""
    for _ in range(100):
        runs = list((CGROUPS / "pids" / GROUP).glob(f"run-{pid}-*"))
        left = [int(p) for run in runs for p in (run / "cgroup.procs").read_text().split()]
        if not left:
            break
        for each in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(each, signal.SIGKILL)
        time.sleep(0.02)
    for controller in CONTROLLERS:
        for run in (CGROUPS / controller / GROUP).glob(f"run-{pid}-*"):
            with contextlib.suppress(OSError):
                run.rmdir()


def _launch(
    command: Callable[[int, int], list[str]],
    program: bytes,
    stdin: IO[bytes] | int,
    stdout: IO[bytes] | int,
    stderr: IO[bytes] | int,
) -> tuple[subprocess.Popen[bytes], int]:
    """Start a run's chain, given its command for bwrap's status pipe and syscall filter
    (descriptors passed on): the process, and the status pipe's read end (bwrap says there
    when the program starts). Every descriptor is closed on the way out of an error."""
    status_read, status_write = os.pipe()
    syscalls = -1
    try:
        syscalls = _filter_pipe(program)
        process = subprocess.Popen(
            command(status_write, syscalls),
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,
            pass_fds=(status_write, syscalls),
            env=_CLEAN_ENV,  # bwrap's own process in the sandbox shows its environ
        )
    except BaseException:
        os.close(status_read)
        raise
    finally:
        os.close(status_write)
        if syscalls >= 0:
            os.close(syscalls)
    return process, status_read


def _filter_pipe(program: bytes) -> int:
    """A pipe's read end that holds the filter whole (it is far smaller than a pipe)."""
    read, write = os.pipe()
    try:
        os.write(write, program)
    except BaseException:
        os.close(read)
        raise
    finally:
        os.close(write)
    return read


def _become_subreaper() -> None:
    """Orphans of runs (bwrap's own process in the sandbox, when bwrap is killed) become
    this process's children, which it reaps, instead of waiting for the machine's init."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


def _rlimits(limits: Limits) -> list[str]:
    cpu = int(limits.cpu_seconds) + 1  # SIGXCPU a second after the limit; the watch kills first
    return [
        f"--cpu={cpu}:{cpu + 1}",
        f"--fsize={limits.output_bytes}",
        f"--nofile={limits.open_files}",
        f"--nproc={limits.processes}",
        f"--stack={limits.memory_bytes}",
        "--core=0",
    ]


def _bwrap_args(limits: Limits, binds: list[Bind]) -> list[str]:
    args = [
        "--unshare-all", "--unshare-user", "--disable-userns",  # no namespaces of its own
        "--die-with-parent", "--new-session", "--cap-drop", "ALL",
        "--clearenv", "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin",
        "--setenv", "HOME", "/tmp", "--setenv", "LANG", "C.UTF-8",
    ]  # fmt: skip
    for path in _SYSTEM:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.exists(path):
            args += ["--ro-bind", path, path]
    args += ["--proc", "/proc", "--dev", "/dev", "--size", str(limits.tmp_bytes), "--tmpfs", "/tmp"]
    for bind in binds:
        args += ["--bind" if bind.writable else "--ro-bind", str(bind.host), bind.inside]
    return [*args, "--chdir", "/box"]


class _Cgroup:
    """A cgroup per controller for one run: its limits, its usage, and its end."""

    def __init__(self, limits: Limits, uid: int) -> None:
        self.limits = limits
        name = f"run-{os.getpid()}-u{uid}-{secrets.token_hex(6)}"  # whose run, as which uid
        self.paths = {c: CGROUPS / c / GROUP / name for c in CONTROLLERS}

    def __enter__(self) -> _Cgroup:
        for path in self.paths.values():
            path.mkdir(parents=True)
        memory = self.paths["memory"]
        (memory / "memory.limit_in_bytes").write_text(str(self.limits.memory_bytes))
        with contextlib.suppress(OSError):  # no swap accounting: the limit above holds alone
            (memory / "memory.memsw.limit_in_bytes").write_text(str(self.limits.memory_bytes))
        (self.paths["pids"] / "pids.max").write_text(str(self.limits.processes))
        return self

    def enter_script(self) -> str:
        """The shell that joins these cgroups, then runs its arguments."""
        joins = "; ".join(f"echo $$ > {p / 'cgroup.procs'}" for p in self.paths.values())
        return f'{joins}; exec "$@"'

    def cpu_seconds(self) -> float:
        return int((self.paths["cpuacct"] / "cpuacct.usage").read_text()) / 1e9

    def peak_bytes(self) -> int:
        return int((self.paths["memory"] / "memory.max_usage_in_bytes").read_text())

    def oom_killed(self) -> bool:
        for line in (self.paths["memory"] / "memory.oom_control").read_text().splitlines():
            if line.startswith("oom_kill "):
                return int(line.split()[1]) > 0
        return int((self.paths["memory"] / "memory.failcnt").read_text()) > 0

    def kill_all(self) -> None:
        """Kill whatever of the run is left (nothing should be), and reap it: a killed
        run's processes are this process's orphans (it is their subreaper)."""
        procs = self.paths["pids"] / "cgroup.procs"
        for _ in range(400):
            pids = [int(p) for p in procs.read_text().split()]
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, os.WNOHANG)
            time.sleep(0.005)

    def __exit__(self, *exc: object) -> None:
        self.kill_all()
        for path in self.paths.values():
            for _ in range(100):
                try:
                    path.rmdir()
                    break
                except OSError:  # its last process is still exiting
                    time.sleep(0.01)


def _watch(process: subprocess.Popen[bytes], group: _Cgroup, limits: Limits, start: float) -> str:
    """Wait for the run, killing it past its CPU time or wall clock; why it was killed."""
    ended = os.pidfd_open(process.pid)  # readable once it ends: no sleep past its end
    try:
        while not select.select([ended], [], [], POLL)[0]:
            reason = _over(group, limits, start)
            if reason:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
                return reason
    finally:
        os.close(ended)
    process.wait()
    return ""


def _over(group: _Cgroup, limits: Limits, start: float) -> str:
    """Which limit a running run is past ("cpu", "wall"), or ""."""
    if group.cpu_seconds() > limits.cpu_seconds:
        return "cpu"
    if time.monotonic() - start > limits.wall:
        return "wall"
    return ""


def _ended(code: int, killed: str, group: _Cgroup, limits: Limits, wall: float) -> Run:
    cpu, peak = group.cpu_seconds(), group.peak_bytes()
    if killed or cpu > limits.cpu_seconds:
        return Run(Status.TLE, cpu, wall, peak, wall_clock=killed == "wall")
    if group.oom_killed():
        return Run(Status.MLE, cpu, wall, peak)
    number = code - 128 if code > 128 else None  # bwrap: 128 + n for a signal n
    if number == signal.SIGXCPU:
        return Run(Status.TLE, cpu, wall, peak)
    if number == signal.SIGXFSZ:
        return Run(Status.OLE, cpu, wall, peak)
    if code != 0:
        return Run(Status.RE, cpu, wall, peak, None if number else code, number)
    return Run(Status.OK, cpu, wall, peak)


if __name__ == "__main__":  # a process's guard (see _guard)
    sys.stdin.buffer.read()
    end_runs_of(int(sys.argv[1]))
