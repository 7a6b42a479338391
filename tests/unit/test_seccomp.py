"""The syscall filter, run by a small classic-BPF interpreter of the test's own on made-up
calls, and its numbers checked against the kernel headers where they are installed."""

from __future__ import annotations

import errno
import re
import struct
from pathlib import Path

import pytest

from pipeline.errors import UsageError
from pipeline.judging import seccomp

ALLOW, KILL = "allow", "kill"
AUDIT_I386 = 0x40000003
CLONE_THREAD_FLAGS = 0x003D0F00  # what glibc's pthread_create passes
CLONE_NEWNET, CLONE_NEWUSER, CLONE_NEWNS = 0x40000000, 0x10000000, 0x00020000


def run_filter(program: bytes, nr: int, arch: int, args: tuple[int, ...] = ()) -> str | int:
    """What the kernel would do with this call: ALLOW, KILL, or the errno returned."""
    ops = [struct.unpack("=HBBI", program[i : i + 8]) for i in range(0, len(program), 8)]
    words = [nr, arch, 0, 0]  # nr, arch, instruction pointer (two halves)
    for value in (*args, *([0] * (6 - len(args)))):
        words += [value & 0xFFFFFFFF, value >> 32]
    data = struct.pack("=iI" + "I" * (len(words) - 2), *words)
    pc, acc = 0, 0
    for _ in range(len(ops)):  # classic BPF only jumps forwards: this many steps at most
        code, jt, jf, k = ops[pc]
        if code == 0x20:  # ld word at k
            acc = struct.unpack_from("=I", data, k)[0]
            pc += 1
        elif code in (0x15, 0x35, 0x45):  # jeq, jge, jset
            hit = {0x15: acc == k, 0x35: acc >= k, 0x45: bool(acc & k)}[code]
            pc += 1 + (jt if hit else jf)
        elif code == 0x06:  # ret k
            if k == 0x7FFF0000:
                return ALLOW
            if k & 0xFFFF0000 == 0x00050000:
                return k & 0xFFFF
            return KILL
        else:
            raise AssertionError(f"an instruction the filter should not hold: {code:#x}")
    raise AssertionError("the filter ran off its end")


@pytest.mark.parametrize("arch", sorted(seccomp.ARCHES))
def test_every_denied_call_is_refused_with_eperm(arch: str) -> None:
    audit, numbers = seccomp.ARCHES[arch]
    program = seccomp.build(arch)
    assert len(program) % 8 == 0 and len(program) // 8 < 4096  # BPF_MAXINSNS
    denied = {n for names in seccomp.DENIED.values() for n in names}
    for name in sorted(denied & numbers.keys()):
        assert run_filter(program, numbers[name], audit) == errno.EPERM, name
    # the five that succeeded in the sandbox before the filter, on both architectures
    for name in ("io_uring_setup", "perf_event_open", "userfaultfd", "keyctl", "add_key"):
        assert name in numbers and run_filter(program, numbers[name], audit) == errno.EPERM


@pytest.mark.parametrize("arch", sorted(seccomp.ARCHES))
def test_what_programs_need_passes(arch: str) -> None:
    audit, numbers = seccomp.ARCHES[arch]
    program = seccomp.build(arch)
    refused = set(numbers.values())
    ordinary = [n for n in range(0, 450) if n not in refused]
    assert len(ordinary) > 350
    for nr in ordinary:  # read, write, mmap, brk, futex, exit_group... everything else
        assert run_filter(program, nr, audit, (CLONE_NEWNET, 0)) == ALLOW, nr


@pytest.mark.parametrize("arch", sorted(seccomp.ARCHES))
def test_personality_and_clone_are_judged_by_their_argument(arch: str) -> None:
    audit, numbers = seccomp.ARCHES[arch]
    program = seccomp.build(arch)
    persona, clone = numbers["personality"], numbers["clone"]
    assert run_filter(program, persona, audit, (0xFFFFFFFF,)) == ALLOW  # asking
    assert run_filter(program, persona, audit, (0,)) == ALLOW  # PER_LINUX
    for other in (0x0008, 0x0040000, 0x0400000, 0x20000):  # 32-bit, no ASLR, exec-implies..
        assert run_filter(program, persona, audit, (other,)) == errno.EPERM, hex(other)
    assert run_filter(program, clone, audit, (CLONE_THREAD_FLAGS,)) == ALLOW
    assert run_filter(program, clone, audit, (0x11,)) == ALLOW  # fork: SIGCHLD
    for flag in (CLONE_NEWNET, CLONE_NEWUSER, CLONE_NEWNS, 0x20000000, 0x02000000):
        assert run_filter(program, clone, audit, (0x11 | flag,)) == errno.EPERM, hex(flag)
    assert run_filter(program, numbers["clone3"], audit) == errno.ENOSYS  # glibc falls back


def test_foreign_abis_are_refused_on_x86_64() -> None:
    audit, _ = seccomp.ARCHES["x86_64"]
    program = seccomp.build("x86_64")
    assert run_filter(program, 20, AUDIT_I386) == errno.ENOSYS  # int 0x80 getpid
    assert run_filter(program, 0x40000000 | 39, audit) == errno.ENOSYS  # x32 getpid
    assert run_filter(program, 39, audit) == ALLOW  # getpid
    other, _ = seccomp.ARCHES["aarch64"]
    assert run_filter(program, 172, other) == errno.ENOSYS  # another machine's numbers


def test_a_machine_without_a_table_does_not_judge() -> None:
    with pytest.raises(UsageError, match="there is none for riscv64"):
        seccomp.build("riscv64")


HEADERS = {
    "x86_64": Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h"),
    "aarch64": Path("/usr/include/asm-generic/unistd.h"),
}


@pytest.mark.parametrize("arch", sorted(seccomp.ARCHES))
def test_numbers_match_the_kernel_headers(arch: str) -> None:
    header = HEADERS[arch]
    if not header.exists():
        pytest.skip(f"{header} is not installed (linux-libc-dev)")
    found = dict(re.findall(r"#define __NR(?:3264)?_(\w+)\s+(\d+)", header.read_text()))
    _, numbers = seccomp.ARCHES[arch]
    assert {name: int(found[name]) for name in numbers if name in found} == numbers
    everything = {n for names in seccomp.DENIED.values() for n in names} | {
        "personality",
        "clone",
        "clone3",
    }
    assert set(found) & everything == set(numbers)  # no call the header has is missing
