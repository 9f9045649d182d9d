"""The sandbox's syscall filters, compiled to BPF on the host with libseccomp (through ``pyseccomp``).

Two filters, both deny-lists (a syscall not named here is allowed: torch, gloo and NCCL use a wide and
version-dependent set of ordinary syscalls that an allow-list would break):

* ``base``: loaded by bubblewrap (``--seccomp FD``) right before the supervisor starts. It denies what no
  job needs and what widens the kernel surface: mounts, new namespaces other than a user namespace,
  ``setns``, io_uring and native AIO (``io_setup``...: both fill host-wide tables, ``fs.aio-max-nr``
  for AIO), perf events, BPF, ptrace, ``pidfd_getfd`` (a rank copying a sibling's pipes to the host),
  kexec, kernel modules, userfaultfd, personality changes, ``prlimit`` on another process, and
  ``AF_VSOCK`` sockets (vsock is not network-namespaced: on a VM host it reaches the hypervisor side).
* ``job``: loaded by the supervisor itself, once it has built the job's private user namespace and joined a
  fresh session keyring (which bubblewrap's filter would forbid, as it runs earlier): it denies new user
  namespaces and the kernel keyring (``keyctl``, ``add_key``, ``request_key``).

Filters stack: every process of the job runs under both. A denied call fails with EPERM, except
``clone3``, which fails with ENOSYS: its flags live in memory a filter cannot read, and ENOSYS makes glibc
fall back to ``clone``, whose flags the filter checks.  Syscalls of another architecture's ABI (32-bit
``int 0x80``) kill the process: libseccomp's default for a foreign architecture.
"""

from __future__ import annotations

import errno
import functools
import os
import tempfile
from typing import Any

# Namespace flags of clone(2)/unshare(2) (linux/sched.h).
CLONE_NEWTIME = 0x00000080
CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
# clone(2) keeps the exit signal in its low byte, so CLONE_NEWTIME can only be asked through unshare/clone3.
_NEW_NAMESPACES_CLONE = (
    CLONE_NEWNS,
    CLONE_NEWCGROUP,
    CLONE_NEWUTS,
    CLONE_NEWIPC,
    CLONE_NEWPID,
    CLONE_NEWNET,
)
_NEW_NAMESPACES_UNSHARE = (*_NEW_NAMESPACES_CLONE, CLONE_NEWTIME)

DENIED_ALWAYS = (
    # mounts and the new mount API
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "move_mount",
    "open_tree",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    # entering other namespaces
    "setns",
    # kernel surfaces a snippet has no use for
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    # Native AIO: every io_setup context is taken from the host-wide fs.aio-max-nr table, which no
    # cgroup bounds (glibc's POSIX aio_* functions use threads, not these calls).
    "io_setup",
    "io_destroy",
    "io_submit",
    "io_cancel",
    "io_getevents",
    "io_pgetevents",
    "perf_event_open",
    "bpf",
    "ptrace",
    # Copies another process's descriptor: a rank could take a sibling's dump or report pipe to the host
    # and forge that sibling's stuck_at or exception.  (NCCL passes cuMem handles over unix sockets.)
    "pidfd_getfd",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "userfaultfd",
    "acct",
    "swapon",
    "swapoff",
    "reboot",
    "syslog",
    "quotactl",
    "open_by_handle_at",
    "lookup_dcookie",
    "iopl",
    "ioperm",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "vhangup",
)
DENIED_KEYRING = ("keyctl", "add_key", "request_key")
# Socket families no job needs and that reach beyond the sandbox's network namespace (linux/socket.h).
AF_VSOCK = 40
DENIED_SOCKET_FAMILIES = (AF_VSOCK,)


class SeccompUnavailableError(RuntimeError):
    """libseccomp or its Python bindings are missing: the runner cannot build its syscall filter."""


def _seccomp() -> Any:  # pyseccomp ships no type information
    try:
        import pyseccomp
    except (ImportError, OSError, RuntimeError) as exc:  # the bindings load libseccomp.so.2 at import
        raise SeccompUnavailableError(
            f"the syscall filter needs libseccomp and its Python bindings ({exc}): "
            "apt-get install libseccomp2 && pip install pyseccomp (make setup does both)"
        ) from exc
    return pyseccomp


def _deny_flags(flt: Any, sc: Any, syscall: str, flags: tuple[int, ...]) -> None:
    eperm = sc.ERRNO(errno.EPERM)
    for flag in flags:
        # One rule per flag: a rule's comparisons are ANDed, and "any of these bits" is an OR.
        flt.add_rule(eperm, syscall, sc.Arg(0, sc.MASKED_EQ, flag, flag))


def _export(flt: Any) -> bytes:
    with tempfile.TemporaryFile() as fh:
        flt.export_bpf(fh)
        fh.seek(0)
        return fh.read()


@functools.cache
def base_filter() -> bytes:
    """BPF program bubblewrap loads before the supervisor starts (see the module docstring)."""
    sc = _seccomp()
    flt = sc.SyscallFilter(sc.ALLOW)
    eperm = sc.ERRNO(errno.EPERM)
    for name in DENIED_ALWAYS:
        flt.add_rule(eperm, name)
    flt.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    _deny_flags(flt, sc, "clone", _NEW_NAMESPACES_CLONE)
    _deny_flags(flt, sc, "unshare", _NEW_NAMESPACES_UNSHARE)
    # Only personality(PER_LINUX) = personality(0) passes: any bit of the (32-bit) persona set is a change
    # (READ_IMPLIES_EXEC, ADDR_NO_RANDOMIZE...), or the query, which no snippet needs either.
    _deny_flags(flt, sc, "personality", tuple(1 << bit for bit in range(32)))
    # Limits of other processes (the supervisor's, a sibling rank's) are not the job's to change;
    # setrlimit and prlimit(0, ...) on itself stay allowed.
    flt.add_rule(eperm, "prlimit64", sc.Arg(0, sc.NE, 0))
    # The family is socket(2)'s first argument, a plain integer the filter can compare; socketpair too,
    # so that no call of either creates one whatever the kernel supports.
    for family in DENIED_SOCKET_FAMILIES:
        for call in ("socket", "socketpair"):
            flt.add_rule(eperm, call, sc.Arg(0, sc.EQ, family))
    return _export(flt)


@functools.cache
def job_filter() -> bytes:
    """BPF program the supervisor loads once the job's user namespace and keyring are set up."""
    sc = _seccomp()
    flt = sc.SyscallFilter(sc.ALLOW)
    eperm = sc.ERRNO(errno.EPERM)
    for name in DENIED_KEYRING:
        flt.add_rule(eperm, name)
    _deny_flags(flt, sc, "clone", (CLONE_NEWUSER,))
    _deny_flags(flt, sc, "unshare", (CLONE_NEWUSER,))
    return _export(flt)


def memfd_with(data: bytes, name: str) -> int:
    """An anonymous file holding ``data``, offset 0, to hand to a child process (bwrap reads to EOF)."""
    fd = os.memfd_create(name, 0)
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd
