"""The syscall wall around judged programs: a classic-BPF seccomp filter (bubblewrap's
`--seccomp FD`) that refuses, with an error and not a kill, the calls no contest program
needs and that have been the road to kernel exploits (no I/O here)."""

from __future__ import annotations

import errno
import platform
import struct
from functools import cache

from pipeline.errors import UsageError

# What is refused, by why (docs/judging.md shows this table); each call returns EPERM.
DENIED: dict[str, tuple[str, ...]] = {
    "asynchronous I/O rings": ("io_uring_setup", "io_uring_enter", "io_uring_register"),
    "performance counters": ("perf_event_open",),
    "page faults in user space": ("userfaultfd",),
    "kernel keyrings": ("keyctl", "add_key", "request_key"),
    "BPF programs": ("bpf",),
    "another process's memory": (
        "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp",
    ),
    "mounts and namespaces": (
        "mount", "umount2", "pivot_root", "chroot", "unshare", "setns", "fsopen", "fsconfig",
        "fsmount", "fspick", "move_mount", "open_tree", "mount_setattr",
    ),
    "kernels and modules": (
        "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
    ),
    "the machine's state": (
        "reboot", "swapon", "swapoff", "acct", "quotactl", "quotactl_fd", "syslog",
        "vhangup", "settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
        "sethostname", "setdomainname", "fanotify_init", "lookup_dcookie", "nfsservctl",
    ),
    "files by handle": ("open_by_handle_at", "name_to_handle_at"),
    "x86 ports and descriptor tables": ("iopl", "ioperm", "modify_ldt"),
    "obsolete calls": ("uselib", "ustat", "sysfs", "_sysctl"),
}  # fmt: skip
# Checked by argument, or refused with ENOSYS so that the C library falls back:
# personality: only asking (0xffffffff) and the default (0, PER_LINUX) pass;
# clone: no CLONE_NEW* flag; clone3 (flags in memory, unreadable here): ENOSYS, and glibc
# uses clone; a foreign ABI (i386's int 0x80, x32 numbers on x86-64): ENOSYS.
CLONE_NEW_FLAGS = 0x7E020000  # NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET
PERSONALITY_QUERY, PER_LINUX = 0xFFFFFFFF, 0
X32_SYSCALL_BIT = 0x40000000

# Per architecture: its AUDIT_ARCH value, and the numbers of the calls above that it has
# (from the kernel's unistd headers; a unit test compares them where the headers are).
_GENERIC = {
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
    "perf_event_open": 241, "userfaultfd": 282, "keyctl": 219, "add_key": 217,
    "request_key": 218, "bpf": 280, "ptrace": 117, "process_vm_readv": 270,
    "process_vm_writev": 271, "pidfd_getfd": 438, "kcmp": 272, "mount": 40, "umount2": 39,
    "pivot_root": 41, "chroot": 51, "unshare": 97, "setns": 268, "fsopen": 430,
    "fsconfig": 431, "fsmount": 432, "fspick": 433, "move_mount": 429, "open_tree": 428,
    "mount_setattr": 442, "kexec_load": 104, "kexec_file_load": 294, "init_module": 105,
    "finit_module": 273, "delete_module": 106, "reboot": 142, "swapon": 224, "swapoff": 225,
    "acct": 89, "quotactl": 60, "quotactl_fd": 443, "syslog": 116, "vhangup": 58,
    "settimeofday": 170, "clock_settime": 112, "clock_adjtime": 266, "adjtimex": 171,
    "sethostname": 161, "setdomainname": 162, "fanotify_init": 262, "lookup_dcookie": 18,
    "nfsservctl": 42, "open_by_handle_at": 265, "name_to_handle_at": 264,
    "personality": 92, "clone": 220, "clone3": 435,
}  # fmt: skip
_X86_64 = {
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
    "perf_event_open": 298, "userfaultfd": 323, "keyctl": 250, "add_key": 248,
    "request_key": 249, "bpf": 321, "ptrace": 101, "process_vm_readv": 310,
    "process_vm_writev": 311, "pidfd_getfd": 438, "kcmp": 312, "mount": 165, "umount2": 166,
    "pivot_root": 155, "chroot": 161, "unshare": 272, "setns": 308, "fsopen": 430,
    "fsconfig": 431, "fsmount": 432, "fspick": 433, "move_mount": 429, "open_tree": 428,
    "mount_setattr": 442, "kexec_load": 246, "kexec_file_load": 320, "init_module": 175,
    "finit_module": 313, "delete_module": 176, "reboot": 169, "swapon": 167, "swapoff": 168,
    "acct": 163, "quotactl": 179, "quotactl_fd": 443, "syslog": 103, "vhangup": 153,
    "settimeofday": 164, "clock_settime": 227, "clock_adjtime": 305, "adjtimex": 159,
    "sethostname": 170, "setdomainname": 171, "fanotify_init": 300, "lookup_dcookie": 212,
    "nfsservctl": 180, "open_by_handle_at": 304, "name_to_handle_at": 303, "iopl": 172,
    "ioperm": 173, "modify_ldt": 154, "uselib": 134, "ustat": 136, "sysfs": 139,
    "_sysctl": 156, "personality": 135, "clone": 56, "clone3": 435,
}  # fmt: skip
ARCHES: dict[str, tuple[int, dict[str, int]]] = {
    "x86_64": (0xC000003E, _X86_64),
    "aarch64": (0xC00000B7, _GENERIC),
}

# classic BPF, as linux/filter.h and linux/seccomp.h spell it
_LD_W_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_ALLOW, _ERRNO = 0x7FFF0000, 0x00050000
_NR, _ARCH, _ARG0 = 0, 4, 16  # offsets in struct seccomp_data (arg0's low half: little-endian)


def _op(code: int, k: int = 0, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def _refuse(code: int) -> bytes:
    return _op(_RET, _ERRNO | code)


def machine_arch() -> str:
    """This machine's architecture, as the filter tables name it."""
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(platform.machine(), platform.machine())


@cache
def build(arch: str) -> bytes:
    """The filter for `arch`, as bubblewrap reads it (struct sock_filter, in order); a
    UsageError where there is no table for it: such a machine does not judge."""
    if arch not in ARCHES:
        raise UsageError(
            f"judging programs needs a syscall filter, and there is none for {arch}"
            f" (only {', '.join(ARCHES)})"
        )
    audit, numbers = ARCHES[arch]
    ops = [_op(_LD_W_ABS, _ARCH), _op(_JEQ, audit, jt=1), _refuse(errno.ENOSYS)]
    ops.append(_op(_LD_W_ABS, _NR))
    if arch == "x86_64":
        ops += [_op(_JGE, X32_SYSCALL_BIT, jf=1), _refuse(errno.ENOSYS)]
    for name in sorted({n for names in DENIED.values() for n in names} & numbers.keys()):
        ops += [_op(_JEQ, numbers[name], jf=1), _refuse(errno.EPERM)]
    ops += [_op(_JEQ, numbers["clone3"], jf=1), _refuse(errno.ENOSYS)]
    # personality and clone read their first argument: each block ends in a return
    ops += [
        _op(_JEQ, numbers["personality"], jf=5),
        _op(_LD_W_ABS, _ARG0),
        _op(_JEQ, PER_LINUX, jt=1),
        _op(_JEQ, PERSONALITY_QUERY, jf=1),
        _op(_RET, _ALLOW),
        _refuse(errno.EPERM),
    ]
    ops += [
        _op(_JEQ, numbers["clone"], jf=4),
        _op(_LD_W_ABS, _ARG0),
        _op(_JSET, CLONE_NEW_FLAGS, jf=1),
        _refuse(errno.EPERM),
        _op(_RET, _ALLOW),
    ]
    ops.append(_op(_RET, _ALLOW))
    return b"".join(ops)
