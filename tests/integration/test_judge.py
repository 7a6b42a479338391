"""Judging programs: real C, C++ and Python programs, compiled and run in the bubblewrap
sandbox, a verdict per case; hostile programs each get their verdict, see nothing of the
machine, and leave no process behind."""

from __future__ import annotations

import dataclasses
import gzip
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from pipeline.judging.sandbox import (
    CGROUPS,
    GROUP,
    Bind,
    Limits,
    Sandbox,
    Status,
    shared_folder,
    sweep_runs,
)
from pipeline.local.redis_server import RedisServer
from tests.conftest import Workers
from tests.helpers import command_env, judge_first_uid
from tests.integration.server import Server, wait_until_ended

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="the sandbox runs programs as other uids: it needs root"
)
FIRST_UID = judge_first_uid()  # this test process's own (see tests/helpers.py)
GOOD = r"""
#include <bits/stdc++.h>
using namespace std;
int main() {
  ios::sync_with_stdio(false);
  int T;
  cin >> T;
  while (T--) {
    int n;
    long long K;
    cin >> n >> K;
    vector<array<int, 26>> next(1);
    next[0].fill(-1);
    string word;
    for (int i = 0; i < n; i++) {
      cin >> word;
      int at = 0;
      for (char c : word) {
        if (next[at][c - 'a'] < 0) {
          next[at][c - 'a'] = (int)next.size();
          next.push_back({});
          next.back().fill(-1);
        }
        at = next[at][c - 'a'];
      }
    }
    vector<char> win(next.size()), lose(next.size());
    for (int v = (int)next.size() - 1; v >= 0; v--) {
      bool leaf = true, w = false, l = false;
      for (int c : next[v]) {
        if (c < 0) continue;
        leaf = false;
        w = w || !win[c];
        l = l || !lose[c];
      }
      win[v] = w;
      lose[v] = leaf || l;
    }
    bool pure = win[0] && (lose[0] || K % 2 == 1);
    // FAULT
    cout << (pure ? "Pure" : "Dirty") << "\n";
  }
}
"""
PYTHON = (Path(__file__).resolve().parents[1] / "programs" / "strgame" / "strgame.py").read_text()
C_PROGRAM = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static int (*next)[26];
static int count, room;
static char word[200005];
static int node(void) {
  if (count == room) {
    room = room ? 2 * room : 1024;
    next = realloc(next, sizeof *next * room);
  }
  memset(next[count], -1, sizeof next[count]);
  return count++;
}
int main(void) {
  int t;
  if (scanf("%d", &t) != 1) return 0;
  while (t--) {
    int n;
    long long k;
    if (scanf("%d %lld", &n, &k) != 2) return 1;
    count = 0;
    node();
    for (int i = 0; i < n; i++) {
      if (scanf("%200000s", word) != 1) return 1;
      int at = 0;
      for (char *c = word; *c; c++) {
        if (next[at][*c - 'a'] < 0) {
          int v = node();
          next[at][*c - 'a'] = v;
        }
        at = next[at][*c - 'a'];
      }
    }
    char *win = calloc(count, 1), *lose = calloc(count, 1);
    for (int v = count - 1; v >= 0; v--) {
      int leaf = 1, w = 0, l = 0;
      for (int j = 0; j < 26; j++) {
        int c = next[v][j];
        if (c < 0) continue;
        leaf = 0;
        w |= !win[c];
        l |= !lose[c];
      }
      win[v] = w;
      lose[v] = leaf || l;
    }
    puts(win[0] && (lose[0] || k % 2 == 1) ? "Pure" : "Dirty");
    free(win);
    free(lose);
  }
  return 0;
}
"""
# Calls no contest program needs (the syscall wall refuses them): true if any succeeded.
PROBER = r"""
#include <string.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/perf_event.h>
static bool escaped() {
  char params[120] = {0};
  struct perf_event_attr a;
  memset(&a, 0, sizeof a);
  a.size = sizeof a;
  a.type = PERF_TYPE_SOFTWARE;
  a.exclude_kernel = 1;
  long got[] = {
      syscall(SYS_io_uring_setup, 4, params),
      syscall(SYS_perf_event_open, &a, 0, -1, -1, 0),
      syscall(SYS_userfaultfd, 1),
      syscall(SYS_keyctl, 0, -3, 0),
      syscall(SYS_add_key, "user", "k", "v", 1, -3),
      syscall(SYS_personality, 0x0040000),
      syscall(SYS_unshare, CLONE_NEWUSER),
  };
  for (long g : got)
    if (g >= 0) return true;
  return false;
}
"""
# Each case's (n, K), to know where a fault strikes without asking any solver.
CASES = [(1, 1), (3, 2), (2, 5), (1, 3), (4, 7), (2, 2), (5, 10), (3, 3), (1, 8), (2, 9)]


def _test_input(path: Path, cases: list[tuple[int, int]] = CASES) -> None:
    lines = [str(len(cases))]
    for i, (n, k) in enumerate(cases):
        lines.append(f"{n} {k}")
        lines += ["ab"[: 1 + (i + j) % 2] + "c" * j for j in range(n)]
    path.write_text("\n".join(lines) + "\n")


def _contest(root: Path) -> tuple[Path, Path]:
    tests, progs = root / "tests", root / "progs"
    tests.mkdir()
    _test_input(tests / "t1.in")
    faults = {
        "good": "",
        "crash": "if (n == 4) { volatile int *p = nullptr; *p = 1; }",
        "wrong": "if (K % 3 == 0) pure = !pure;",
        "loop": "if (K == 5) { volatile long x = 0; for (;;) x++; }",
        "broken": "this is no C++;",
        "prober": "if (escaped()) pure = !pure;",  # an answer computed after an escape is wrong
    }
    mark = f"// {root.name} {os.getpid()}\n"  # sources of this run's own (the machine keeps
    for name, fault in faults.items():  # what it compiled, and verdicts, by content)
        (progs / name).mkdir(parents=True)
        source = GOOD.replace("// FAULT", fault)
        if name == "prober":
            source = PROBER + source
        (progs / name / "main.cpp").write_text(source + mark)
    (progs / "snake").mkdir()
    (progs / "snake" / "main.py").write_text(PYTHON + mark.replace("//", "#"))
    (progs / "cee").mkdir()
    (progs / "cee" / "main.c").write_text(C_PROGRAM + mark)
    (progs / "huge").mkdir()  # over judge.max_source_kb: a compile error, never compiled
    (progs / "huge" / "main.cpp").write_text(GOOD + mark + "// padding\n" * 30_000)
    (progs / "empty").mkdir()  # no source file: skipped with a warning
    return tests, progs


def _gamebatch(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pipeline.cli", *args],
        capture_output=True,
        text=True,
        check=False,
        env=env or command_env(),
        timeout=300,
    )


def _grade(tests: Path, progs: Path, report: Path) -> subprocess.CompletedProcess[str]:
    where = ["--tests", str(tests), "--programs", str(progs), "--json", str(report)]
    return _gamebatch("grade", "-p", "strgame", *where, "--time-limit", "0.5", "-q")


def test_tests_with_the_same_answers_are_judged_each_on_its_own_input(tmp_path: Path) -> None:
    """Two one-case tests whose answers are both Pure: a program wrong on one of them only
    gets its WA there (its verdicts were once keyed by the answers alone, and the second
    test took the first one's)."""
    tests, progs = tmp_path / "tests", tmp_path / "progs" / "two"
    tests.mkdir()
    progs.mkdir(parents=True)
    for name, text in (("t1", "1\n1 1\na\n"), ("t2", "1\n2 1\na\na\n")):
        (tests / f"{name}.in").write_text(text)
        (tests / f"{name}.ans").write_text("Pure\n")
    wrong_on_two = GOOD.replace("// FAULT", "if (n == 2) pure = !pure;")
    (progs / "main.cpp").write_text(wrong_on_two + f"// {tmp_path.name} {os.getpid()}\n")
    report = tmp_path / "report.json"
    done = _grade(tests, tmp_path / "progs", report)
    assert done.returncode == 1, done.stderr
    assert "judged 2 of 2 (program, test) pairs" in done.stderr, done.stderr
    found = {s["test"]: s["verdicts"] for s in json.loads(report.read_text())["submissions"]}
    assert found == {"t1": "A", "t2": "W"}


def test_every_case_gets_its_own_verdict_and_a_rejudge_runs_only_what_changed(
    tmp_path: Path,
) -> None:
    tests, progs = _contest(tmp_path)
    report = tmp_path / "report.json"
    first = _grade(tests, progs, report)
    assert first.returncode == 1, first.stderr  # some programs are wrong
    assert "empty: no source file" in first.stderr
    assert "judged 9 of 9 (program, test) pairs" in first.stderr, first.stderr
    doc = json.loads(report.read_text())
    codes = {s["contestant"]: s["verdicts"] for s in doc["submissions"]}
    at = {name: "".join(name_of(n, k) for n, k in CASES) for name, name_of in _FAULTS.items()}
    assert codes == at, codes
    crash = next(s for s in doc["submissions"] if s["contestant"] == "crash")
    assert crash["mismatches"][0]["found"] == "signal SIGSEGV"
    loop = next(s for s in doc["submissions"] if s["contestant"] == "loop")
    # the CPU limit, or on a machine too busy to give it 0.5 s in 2 s, the wall clock
    # (which limit stops which run is the sandbox's test below)
    assert re.fullmatch(r"CPU 0\.5\d s|wall clock 2\.\d s", loop["mismatches"][0]["found"])
    broken = next(s for s in doc["submissions"] if s["contestant"] == "broken")
    assert "error" in broken["mismatches"][0]["found"]
    huge = next(s for s in doc["submissions"] if s["contestant"] == "huge")
    assert huge["mismatches"][0]["found"] == "the source is over judge.max_source_kb (256)"
    assert len(crash["time_ms"]) == len(crash["memory_kib"]) == len(CASES)
    assert all(kib > 0 for kib in crash["memory_kib"])
    # the same contest again: nothing runs; one contestant resubmits: only it runs
    again = _grade(tests, progs, report)
    assert "judged 0 of 9" in again.stderr, again.stderr
    fixed = GOOD.replace("// FAULT", "") + f"// fixed {tmp_path.name} {os.getpid()}\n"
    (progs / "wrong" / "main.cpp").write_text(fixed)
    third = _grade(tests, progs, report)
    assert "judged 1 of 9" in third.stderr, third.stderr
    codes = {s["contestant"]: s["verdicts"] for s in json.loads(report.read_text())["submissions"]}
    assert codes["wrong"] == "A" * len(CASES)
    # the test gains a case: every pair is judged again, but only the new case runs
    _test_input(tests / "t1.in", [*CASES, (2, 6)])
    fourth = _grade(tests, progs, report)
    assert "judged 9 of 9" in fourth.stderr, fourth.stderr
    ran = "programs 7/9 compiled, 2 did not compile; 7 cases run,"  # 7 that compile, 1 each
    assert f"{ran} {7 * len(CASES)} verdicts kept from before" in fourth.stderr, fourth.stderr
    codes = {s["contestant"]: s["verdicts"] for s in json.loads(report.read_text())["submissions"]}
    at = {
        name: "".join(name_of(n, k) for n, k in [*CASES, (2, 6)])
        for name, name_of in _FAULTS.items()
    }
    at["wrong"] = "A" * (len(CASES) + 1)  # fixed above
    assert codes == at, codes


_FAULTS = {
    "good": lambda n, k: "A",
    "crash": lambda n, k: "R" if n == 4 else "A",
    "wrong": lambda n, k: "W" if k % 3 == 0 else "A",
    "loop": lambda n, k: "T" if k == 5 else "A",
    "broken": lambda n, k: "C",
    "prober": lambda n, k: "A",
    "snake": lambda n, k: "A",
    "cee": lambda n, k: "A",
    "huge": lambda n, k: "C",
}

# ---- hostile programs, straight on the sandbox

HOSTILE = {
    "fork_bomb": "#include <unistd.h>\nint main(){for(;;)fork();}",
    "endless": "int main(){volatile long x=0;for(;;)x++;}",
    "allocate": "#include <stdlib.h>\nint main(){volatile char*p=malloc(1L<<30);"
    "if(!p)return 7;for(long i=0;i<(1L<<30);i+=4096)p[i]=1;return 0;}",
    "flood": "#include <stdio.h>\nint main(){static char b[1<<16];"
    "for(long i=0;i<(1L<<16);i++)fwrite(b,1,sizeof b,stdout);}",
    "sleeper": "#include <unistd.h>\nint main(){sleep(100);}",
    "fill_tmp": '#include <stdio.h>\nint main(){FILE*f=fopen("/tmp/x","w");'
    "static char b[1<<16];for(;;)if(fwrite(b,1,sizeof b,f)!=sizeof b)return 5;}",
    "parricide": "#include <signal.h>\n#include <unistd.h>\n"
    "int main(){kill(getppid(),SIGKILL);kill(1,SIGKILL);kill(-1,SIGKILL);return 0;}",
}
EXPECTED = {
    "fork_bomb": {Status.TLE, Status.RE},  # it spins on refused forks, or dies of them
    "endless": {Status.TLE},
    "allocate": {Status.MLE},
    "flood": {Status.OLE},
    "sleeper": {Status.TLE},
    "fill_tmp": {Status.OLE, Status.RE},  # the file size limit, or a full /tmp
    "parricide": {Status.OK},  # nothing it may kill
}
LIMITS = Limits(cpu_seconds=0.5, memory_bytes=128 << 20, output_bytes=4 << 20, wall_seconds=2)


@pytest.fixture(scope="module")
def hostile() -> Iterator[Path]:
    """The hostile programs, compiled where the runs' uids can reach them."""
    box = Path(tempfile.mkdtemp(dir=shared_folder("tests")))
    os.chmod(box, 0o755)
    try:
        for name, source in {**HOSTILE, "peek": PEEK, "syscalls": SYSCALLS}.items():
            (box / f"{name}.c").write_text(source)
            command = ["gcc", "-O2", "-pthread", "-o", str(box / name), str(box / f"{name}.c")]
            subprocess.run(command, check=True)
        yield box
    finally:
        shutil.rmtree(box)


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_program_gets_its_verdict_and_leaves_nothing(hostile: Path, name: str) -> None:
    out = hostile / f"{name}.out"
    with out.open("wb") as stdout:
        run = Sandbox(FIRST_UID).run([f"./{name}"], LIMITS, [Bind(hostile, "/box")], stdout=stdout)
    assert run.status in EXPECTED[name], run
    assert out.stat().st_size <= LIMITS.output_bytes
    assert run.wall_seconds < LIMITS.wall + 2
    nothing_left()


def test_a_run_is_told_which_limit_stopped_it(hostile: Path) -> None:
    """A spinning program is stopped by its CPU time (a wall clock it cannot reach however
    busy the machine is), a sleeping one by the wall clock."""
    roomy = dataclasses.replace(LIMITS, wall_seconds=60)
    spun = Sandbox(FIRST_UID).run(["./endless"], roomy, [Bind(hostile, "/box")])
    assert (spun.status, spun.wall_clock) == (Status.TLE, False), spun
    assert re.fullmatch(r"CPU 0\.5\d s", spun.detail), spun.detail
    slept = Sandbox(FIRST_UID).run(["./sleeper"], LIMITS, [Bind(hostile, "/box")])
    assert (slept.status, slept.wall_clock) == (Status.TLE, True), slept
    assert re.fullmatch(r"wall clock 2\.\d s", slept.detail), slept.detail
    nothing_left()


PEEK = r"""
#define _GNU_SOURCE
#include <sched.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/socket.h>
extern char **environ;
int main(int argc, char **argv) {
  for (int i = 2; i < argc; i++)
    if (open(argv[i], O_RDONLY) >= 0) printf("opened %s\n", argv[i]);
  char seen[65536];
  for (int pid = 1; pid < 8; pid++) {  /* the environment of every process it can see */
    char name[64];
    snprintf(name, sizeof name, "/proc/%d/environ", pid);
    int fd = open(name, O_RDONLY);
    if (fd < 0) continue;
    long got = read(fd, seen, sizeof seen - 1);
    for (long j = 0; j < got; j++) if (!seen[j]) seen[j] = ' ';
    if (got > 0) { seen[got] = 0; printf("proc %d %s\n", pid, seen); }
  }
  int s = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_port = htons(atoi(argv[1]));
  a.sin_addr.s_addr = inet_addr("127.0.0.1");
  if (connect(s, (struct sockaddr *)&a, sizeof a) == 0) printf("connected\n");
  for (char **e = environ; *e; e++) printf("env %s\n", *e);
  if (unshare(CLONE_NEWUSER) == 0) printf("a user namespace of its own\n");
  printf("uid %d\n", (int)getuid());
  return 0;
}
"""


def test_a_program_sees_no_secret_no_other_file_and_no_network(
    hostile: Path, tmp_path: Path, redis_server: RedisServer
) -> None:
    answers, other = tmp_path / "t1.ans", tmp_path / "other" / "main.cpp"
    answers.write_text("Pure\n")
    other.parent.mkdir()
    other.write_text("int main(){}")
    state = Path(os.environ["GAMEBATCH_STATE_DIR"])
    paths = ["/etc/shadow", str(answers), str(other), str(state), "/root"]
    out = tmp_path / "peek.out"
    with out.open("wb") as stdout:
        run = Sandbox(FIRST_UID).run(
            ["./peek", str(redis_server.port), *paths],
            LIMITS,
            [Bind(hostile, "/box")],
            stdout=stdout,
        )
    seen = out.read_text()
    assert run.status == Status.OK, (run, seen)
    assert "opened" not in seen and "connected" not in seen, seen
    assert "user namespace" not in seen, seen  # no namespace of its own to gain powers in
    env = [line for line in seen.splitlines() if line.startswith("env ")]
    assert sorted(e.split("=")[0] for e in env) == [
        "env HOME",
        "env LANG",
        "env PATH",
        "env PWD",
    ], env
    assert redis_server.password not in seen and "GAMEBATCH" not in seen, seen
    uid = int(seen.rsplit("uid ", 1)[1])
    assert FIRST_UID <= uid < FIRST_UID + 64  # not root, a uid of its own
    nothing_left()


SYSCALLS = r"""
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/perf_event.h>
static void show(const char *name, long got) {
  printf("%s %s\n", name, got >= 0 ? "ok" : strerrorname_np(errno));
}
static void *nothing(void *arg) { return arg; }
int main(void) {
  char params[120] = {0};
  struct perf_event_attr a;
  memset(&a, 0, sizeof a);
  a.size = sizeof a;
  a.type = PERF_TYPE_SOFTWARE;
  a.exclude_kernel = 1;
  show("io_uring_setup", syscall(SYS_io_uring_setup, 4, params));
  show("perf_event_open", syscall(SYS_perf_event_open, &a, 0, -1, -1, 0));
  show("userfaultfd", syscall(SYS_userfaultfd, 1));
  show("keyctl", syscall(SYS_keyctl, 0, -3, 0));
  show("add_key", syscall(SYS_add_key, "user", "k", "v", 1, -3));
  show("request_key", syscall(SYS_request_key, "user", "k", NULL, 0));
  show("bpf", syscall(SYS_bpf, 0, NULL, 0));
  show("ptrace", ptrace(PTRACE_TRACEME, 0, NULL, NULL));
  show("unshare", unshare(CLONE_NEWUSER));
  show("clone_newnet", syscall(SYS_clone, CLONE_NEWNET | SIGCHLD, 0, 0, 0, 0));
  show("mount", mount("none", "/tmp", "tmpfs", 0, NULL));
  show("personality_change", syscall(SYS_personality, 0x0040000));
  show("kexec_load", syscall(SYS_kexec_load, 0, 0, NULL, 0));
  show("init_module", syscall(SYS_init_module, NULL, 0, ""));
#ifdef __x86_64__
  long got;
  __asm__ volatile("int $0x80" : "=a"(got) : "a"(20) : "memory");  /* i386 getpid */
  printf("i386 %s\n", got >= 0 ? "ok" : got == -ENOSYS ? "ENOSYS" : "refused");
  show("x32", syscall(0x40000000 | 39));
#endif
  /* what honest programs do */
  show("personality_query", syscall(SYS_personality, 0xffffffff));
  pthread_t thread;
  show("thread", -pthread_create(&thread, NULL, nothing, NULL));
  pthread_join(thread, NULL);
  pid_t child = fork();
  if (child == 0) _exit(0);
  int status;
  show("fork", child > 0 && waitpid(child, &status, 0) == child ? 0 : -1);
  return 0;
}
"""
REFUSED = {
    "io_uring_setup": "EPERM",
    "perf_event_open": "EPERM",
    "userfaultfd": "EPERM",
    "keyctl": "EPERM",
    "add_key": "EPERM",
    "request_key": "EPERM",
    "bpf": "EPERM",
    "ptrace": "EPERM",
    "unshare": "EPERM",
    "clone_newnet": "EPERM",
    "mount": "EPERM",
    "personality_change": "EPERM",
    "kexec_load": "EPERM",
    "init_module": "EPERM",
    "personality_query": "ok",
    "thread": "ok",
    "fork": "ok",
}
if os.uname().machine == "x86_64":
    REFUSED |= {"i386": "ENOSYS", "x32": "ENOSYS"}


def test_the_syscall_wall_refuses_what_no_contest_program_needs(hostile: Path) -> None:
    out = hostile / "syscalls.out"
    with out.open("wb") as stdout:
        run = Sandbox(FIRST_UID).run(["./syscalls"], LIMITS, [Bind(hostile, "/box")], stdout=stdout)
    seen = dict(line.split() for line in out.read_text().splitlines())
    assert run.status == Status.OK, (run, seen)
    assert seen == REFUSED
    nothing_left()


def test_a_missing_sandbox_is_a_clear_error_at_start(tmp_path: Path) -> None:
    tests, progs = _contest(tmp_path)
    env = command_env(PATH=str(tmp_path / "nothing"))
    where = ["--tests", str(tests), "--programs", str(progs)]
    result = _gamebatch("grade", "-p", "strgame", *where, env=env)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == (
        "gamebatch: error: judging programs needs bubblewrap (apt-get install bubblewrap)"
    )


def test_bubblewrap_is_installed_where_the_tests_run() -> None:
    assert shutil.which("bwrap"), ".ci/run installs bubblewrap: the judge's tests need it"


def nothing_left(*, cgroups: bool = True) -> None:
    """No process of a run's uid is alive (killed ones may take a moment to be reaped by
    the machine's init), and no run's cgroup is left."""
    left: list[str] = []
    for _ in range(40):
        ps = subprocess.run(
            ["ps", "-e", "-o", "uid=,stat=,args="], capture_output=True, text=True, check=True
        )
        rows = [line.split(None, 2) for line in ps.stdout.splitlines()]
        left = [" ".join(r) for r in rows if FIRST_UID <= int(r[0]) < FIRST_UID + 64]
        if not left or all(r.split()[1].startswith("Z") for r in left):
            break
        time.sleep(0.05)
    assert all(r.split()[1].startswith("Z") for r in left), f"a run left a process: {left}"
    if not cgroups:
        return
    for controller in ("memory", "pids", "cpuacct"):
        parent = CGROUPS / controller / GROUP
        ours = [f"-u{uid}-" for uid in range(FIRST_UID, FIRST_UID + 128)]
        left = [p for p in parent.glob("run-*") if any(u in p.name for u in ours)]
        assert not left, f"a {controller} cgroup: {left}"


def test_a_worker_killed_while_it_judges_loses_nothing(
    tmp_path: Path, redis_server: RedisServer, workers: Workers
) -> None:
    tests, progs = tmp_path / "tests", tmp_path / "progs"
    tests.mkdir()
    _test_input(tests / "t1.in")
    mark = f"// {tmp_path.name} {os.getpid()}\n"
    for name, fault in (("good", ""), ("wrong", "if (K % 3 == 0) pure = !pure;")):
        (progs / name).mkdir(parents=True)
        slow = "usleep(300000);\n" + fault  # every run takes a while: the kill lands in one
        source = GOOD.replace("// FAULT", slow).replace(
            "using namespace", "#include <unistd.h>\nusing namespace"
        )
        (progs / name / "main.cpp").write_text(source + mark)
    env = {"GAMEBATCH_JUDGE__BATCH_CASES": "2", "GAMEBATCH_LEASE_SECONDS": "3"}  # 5 chunks each
    first = workers.start(concurrency=1, **env)
    report = tmp_path / "report.json"
    grading = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pipeline.cli",
            "grade",
            "-p",
            "strgame",
            "--tests",
            str(tests),
            "--programs",
            str(progs),
            "--json",
            str(report),
            "-q",
            "--broker",
            redis_server.url,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=command_env(**env),
    )
    client = redis.Redis.from_url(redis_server.url)
    deadline = time.monotonic() + 60
    while not (_judged_chunks(client) and _runs_alive()):  # the worker is in a run
        assert time.monotonic() < deadline and grading.poll() is None, grading.stderr
        time.sleep(0.02)
    os.killpg(first.pid, signal.SIGKILL)
    workers.start(concurrency=2, **env)
    attempts = 0  # the most runs of one chunk, seen while the grading waits
    while grading.poll() is None and time.monotonic() < deadline + 120:
        for key in client.scan_iter(match="gb:job:judge.*:attempts"):
            attempts = max([attempts, *(int(v) for v in client.hvals(key))])
        time.sleep(0.05)
    _, err = grading.communicate(timeout=180)
    assert grading.returncode == 1, err
    codes = {s["contestant"]: s["verdicts"] for s in json.loads(report.read_text())["submissions"]}
    assert codes == {
        "good": "A" * len(CASES),
        "wrong": "".join(_FAULTS["wrong"](n, k) for n, k in CASES),
    }, err
    assert attempts >= 2, attempts  # the killed worker's chunk was run again
    sweep_runs()  # what the next judge on this host does first (a guard usually did it)
    nothing_left()  # the killed worker's run is over, its cgroups gone
    client.close()


def _runs_alive() -> bool:
    """Whether a program runs in the sandbox right now (a process of a run's uid)."""
    ps = subprocess.run(["ps", "-eo", "uid=,stat="], capture_output=True, text=True, check=True)
    rows = [line.split() for line in ps.stdout.splitlines()]
    return any(FIRST_UID <= int(r[0]) < FIRST_UID + 64 and r[1][0] != "Z" for r in rows)


def _judged_chunks(client: redis.Redis) -> int:
    """Chunks judged so far, over every judging job on the test's Redis."""
    done = 0
    for key in client.scan_iter(match="gb:job:judge.*"):
        if client.type(key) == b"hash":
            done += int(client.hget(key, "done_chunks") or 0)
    return done


def test_programs_in_an_archive_are_judged_over_http(
    tmp_path: Path, redis_server: RedisServer, workers: Workers
) -> None:
    mark = f"// {tmp_path.name} {os.getpid()} http\n"
    inputs = tmp_path / "t1.in"
    _test_input(inputs)
    files = {
        "tests/t1.in": inputs.read_bytes(),
        "progs/ann/main.cpp": (GOOD.replace("// FAULT", "") + mark).encode(),
        "progs/bob/main.cpp": (GOOD.replace("// FAULT", _CRASH) + mark).encode(),
    }
    workers.start(concurrency=2)
    running = Server(tmp_path, redis_server.url).start()
    try:
        with running.client() as http:
            bad = http.post(
                "/v1/gradings",
                params={"problem": "strgame", "time_limit": "-1"},
                content=_tar_gz(files),
            )
            assert bad.status_code == 400 and "time_limit" in bad.json()["error"]
            created = http.post(
                "/v1/gradings",
                params={"problem": "strgame", "time_limit": "0.5"},
                content=_tar_gz(files),
            )
            assert created.status_code == 201, created.text
            grading = created.json()["id"]
            ended = wait_until_ended(http, grading, kind="gradings")
            assert ended["state"] == "done", ended
            report = http.get(f"/v1/gradings/{grading}/report.json").json()
        client = _client_mode(tmp_path, files, running)  # the same, from the command line
    finally:
        running.stop()
    assert client.returncode == 1, client.stderr  # bob is wrong
    assert "bob/t1: 9/10 accepted" in client.stdout and "RE (signal SIGSEGV)" in client.stdout
    assert (
        json.loads((tmp_path / "client.json").read_text())["submissions"] == report["submissions"]
    )
    codes = {s["contestant"]: s["verdicts"] for s in report["submissions"]}
    assert codes == {
        "ann": "A" * len(CASES),
        "bob": "".join(_FAULTS["crash"](n, k) for n, k in CASES),
    }
    bob = next(s for s in report["submissions"] if s["contestant"] == "bob")
    assert bob["mismatches"][0]["found"] == "signal SIGSEGV" and len(bob["time_ms"]) == len(CASES)


_CRASH = "if (n == 4) { volatile int *p = nullptr; *p = 1; }"


def _client_mode(
    tmp_path: Path, files: dict[str, bytes], running: Server
) -> subprocess.CompletedProcess[str]:
    """`grade --programs --server` on the same files, laid out in folders."""
    for name, data in files.items():
        (tmp_path / "client" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "client" / name).write_bytes(data)
    command = ["grade", "-p", "strgame", "--tests", str(tmp_path / "client" / "tests")]
    command += ["--programs", str(tmp_path / "client" / "progs"), "--time-limit", "0.5"]
    command += ["--server", running.url, "--token-file", str(running.dir / "token")]
    command += ["--json", str(tmp_path / "client.json")]
    return _gamebatch(*command)


def _tar_gz(files: dict[str, bytes]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return gzip.compress(raw.getvalue(), mtime=0)


def test_many_runs_as_one_uid_leave_no_zombie_to_count_against_it(hostile: Path) -> None:
    # bwrap's helpers end after bwrap and become the judging process's children: unreaped,
    # they pile up under the slot's uid until its process limit refuses the next run
    # a uid no other test runs as: a run still ending elsewhere cannot count against it
    sandbox = Sandbox(FIRST_UID + 64, slots=1)
    limits = Limits(processes=4)
    runs = [sandbox.run(["./parricide"], limits, [Bind(hostile, "/box")]) for _ in range(3 * 4)]
    assert {run.status for run in runs} == {Status.OK}, [run.detail for run in runs]
    ps = subprocess.run(
        ["ps", "-o", "stat=,uid=", "--ppid", str(os.getpid())],
        capture_output=True,
        text=True,
        check=False,
    )
    rows = [line.split() for line in ps.stdout.splitlines()]
    zombies = [r for r in rows if r[0].startswith("Z") and int(r[1]) == FIRST_UID + 64]
    assert len(zombies) <= 2, ps.stdout


def test_lazy_judging_stops_each_test_at_its_first_failing_case(tmp_path: Path) -> None:
    """`grade --programs --lazy`: a program that times out on every case costs one case's
    limit, not twelve; the cases after a failure are NR (JUnit: skipped)."""
    tests, progs = tmp_path / "tests", tmp_path / "progs"
    tests.mkdir()
    _test_input(tests / "t1.in", [(n, k) for n in (1, 2, 3) for k in (1, 2, 3, 4)])
    mark = f"// {tmp_path.name} {os.getpid()}\n"
    for name, fault in {
        "good": "",
        "sleepy": "{ volatile long x = 0; for (;;) x++; }",
        "late": "if (n == 2 && K == 3) pure = !pure;",  # case 7 is its first wrong one
    }.items():
        (progs / name).mkdir(parents=True)
        (progs / name / "main.cpp").write_text(GOOD.replace("// FAULT", fault) + mark)
    report, junit = tmp_path / "lazy.json", tmp_path / "lazy.xml"
    lazy = _gamebatch(
        "grade", "-p", "strgame", "--tests", str(tests), "--programs", str(progs), "--lazy",
        "--time-limit", "0.5", "-q", "--json", str(report), "--junit", str(junit),
    )  # fmt: skip
    assert lazy.returncode == 1, lazy.stderr
    codes = {s["contestant"]: s["verdicts"] for s in json.loads(report.read_text())["submissions"]}
    assert codes == {"good": "A" * 12, "sleepy": "T" + "N" * 11, "late": "A" * 6 + "W" + "N" * 5}
    assert "1 of 12 cases wrong (11 not run after it: --lazy): case 1 TLE" in junit.read_text()
    whole = _gamebatch(
        "grade",
        "-p",
        "strgame",
        "--tests",
        str(tests),
        "--programs",
        str(progs),
        "--time-limit",
        "0.5",
        "-q",
        "--json",
        str(report),
    )  # fmt: skip  (the lazy verdicts are not the whole ones: judged again)
    codes = {s["contestant"]: s["verdicts"] for s in json.loads(report.read_text())["submissions"]}
    assert codes["sleepy"] == "T" * 12 and codes["late"] == "A" * 6 + "W" + "A" * 5, whole.stderr
