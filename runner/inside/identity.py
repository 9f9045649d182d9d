"""Who the sandbox's processes are: the job's user namespace, keyring, syscall filter, dumpability, limits.

The supervisor sets its own identity up before the warm-up; each rank leaves the supervisor's uid before a
line of the snippet runs (see runner/inside/__init__.py for why the two must differ).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import signal
from typing import Any

# The job's identity inside its private user namespace: the supervisor is root there (mapped to one
# host uid of the job's pair), the ranks are JOB_UID (mapped to the other).  Different uids keep every rank
# off the supervisor: signals, prlimit, setpriority, sched_setaffinity, /proc/1 all need the same uid.
JOB_UID = 1000
_CLONE_NEWUSER = 0x10000000
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_PR_SET_DUMPABLE = 4
_KEYCTL_JOIN_SESSION_KEYRING = 1
_SYS_KEYCTL = {"x86_64": 250, "aarch64": 219}
_CAP_KILL = 5
_CAP_SETGID = 6
_CAP_SETUID = 7


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def libc_handle() -> ctypes.CDLL:
    """The C library, for the system calls Python does not wrap (unshare, capset, prctl, keyctl)."""
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _enter_user_namespace(sup_outer: int, job_outer: int) -> None:
    """Become root of a new user namespace that maps 0 -> ``sup_outer`` and JOB_UID -> ``job_outer``.

    Called as root of the host's user namespace (bubblewrap started without one, keeping CAP_SETUID and
    CAP_SETGID only).  The namespace is created after switching to ``sup_outer``, so that it is that uid's
    (every process of the job is counted per uid against it, not against root); a helper that stays
    privileged writes the two-line mapping, which only a process with CAP_SETUID in the parent may do.
    """
    me = os.getpid()
    go_r, go_w = os.pipe()
    done_r, done_w = os.pipe()
    helper = os.fork()
    if helper == 0:  # pragma: no cover - runs in the child
        code = 1
        try:
            os.close(go_w)
            os.close(done_r)
            if os.read(go_r, 1) == b"g":
                for name in ("uid_map", "gid_map"):
                    with open(f"/proc/{me}/{name}", "w") as fh:
                        fh.write(f"0 {sup_outer} 1\n{JOB_UID} {job_outer} 1\n")
                os.write(done_w, b"k")
                code = 0
        finally:
            os._exit(code)
    os.close(go_r)
    os.close(done_w)
    try:
        os.setgroups([])
        os.setresgid(sup_outer, sup_outer, sup_outer)
        os.setresuid(sup_outer, sup_outer, sup_outer)
        libc = libc_handle()
        _check(libc.unshare(_CLONE_NEWUSER), "unshare(CLONE_NEWUSER)")
        os.write(go_w, b"g")
        if os.read(done_r, 1) != b"k":
            raise OSError("the user namespace mapping could not be written")
    finally:
        os.close(go_w)
        os.close(done_r)
        os.waitpid(helper, 0)
    # Root of the new namespace holds every capability in it: keep only what forking the ranks (setuid,
    # setgid) and signalling them (stack dumps, stops: they run under another uid) need.
    header = _CapHeader(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
    keep = (1 << _CAP_SETUID) | (1 << _CAP_SETGID) | (1 << _CAP_KILL)
    data = (_CapData * 2)(_CapData(keep, keep, 0), _CapData(0, 0, 0))
    _check(libc.capset(ctypes.byref(header), data), "capset")


def _fresh_session_keyring() -> None:
    # The session keyring bubblewrap hands down is the runner's own; a new anonymous one is the job's.
    number = _SYS_KEYCTL.get(os.uname().machine)
    if number is not None:
        libc = libc_handle()
        libc.syscall.restype = ctypes.c_long
        if libc.syscall(number, _KEYCTL_JOIN_SESSION_KEYRING, None) < 0:
            raise OSError(ctypes.get_errno(), "keyctl(JOIN_SESSION_KEYRING) failed")


def _load_seccomp(fd: int) -> None:
    """Load the BPF program the host compiled (runner/seccomp_filter.py) from ``fd``; fatal on failure."""
    program = b""
    while chunk := os.read(fd, 65536):
        program += chunk
    os.close(fd)
    if not program or len(program) % 8:
        raise OSError("the seccomp program from the host is malformed")
    buffer = ctypes.create_string_buffer(program, len(program))
    prog = _SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    _check(libc_handle().prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0), "seccomp")


def setup_identity(spec: dict[str, Any]) -> None:
    """Everything between bubblewrap and the torch import: identity, keyring, limits, syscall filter."""
    userns = spec.get("userns")
    if isinstance(userns, dict) and os.geteuid() == 0:
        _enter_user_namespace(int(userns["sup_outer"]), int(userns["job_outer"]))
    # Changing credentials clears the parent-death signal bubblewrap set: set it again, so that killing
    # bwrap from the host still tears the whole sandbox down.
    die_with_parent()
    _fresh_session_keyring()
    nproc_limit = int(spec.get("nproc_limit", 0))
    if nproc_limit > 0:
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc_limit, nproc_limit))
    nofile_limit = int(spec.get("nofile_limit", 0))
    if nofile_limit > 0:
        # Soft = hard, set before any rank exists: open files are a host-wide table (fs.file-max), and
        # processes x this limit is the job's bound on it (runner/sandbox.py files_per_process).
        set_limit(resource.RLIMIT_NOFILE, nofile_limit)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if spec.get("seccomp_fd") is not None:
        _load_seccomp(int(spec["seccomp_fd"]))


def become_rank_user() -> None:
    """In a freshly forked rank of a job with its own user namespace: leave the supervisor's uid for JOB_UID.

    Without one (a runner that is not root, or --unsafe-no-sandbox) the ranks keep the supervisor's uid.
    """
    if os.getuid() != 0:
        return
    os.setgroups([])
    os.setresgid(JOB_UID, JOB_UID, JOB_UID)
    os.setresuid(JOB_UID, JOB_UID, JOB_UID)  # from 0 to non-zero: every capability is gone
    # The uid switch (and the supervisor) left the rank non-dumpable; its siblings share its uid and may
    # need its /proc entries; the supervisor stays out of their reach (pidfd_getfd is denied by the filter).
    with contextlib.suppress(OSError, AttributeError):
        libc_handle().prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0)
    die_with_parent()


def make_undumpable() -> None:
    """Make this process non-dumpable: no other process of its uid may ptrace it or open its /proc/PID/fd."""
    # A non-dumpable process's /proc/PID/fd and memory are root's, and a same-uid process cannot ptrace
    # it: a second guard on the status pipe, for a runner without a per-job user namespace (not root),
    # where the ranks keep the supervisor's uid.
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_dumpable = 4
        libc.prctl(pr_set_dumpable, 0, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def die_with_parent() -> None:
    """Ask the kernel to SIGKILL this process when its parent dies (best effort)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def clamp_limits(soft: int, hard: int, inherited_hard: int) -> tuple[int, int]:
    """The ``(soft, hard)`` pair to set, kept within the hard limit this process inherited.

    An already-lower inherited hard limit (set by the host) wins: raising it is neither possible for an
    unprivileged process nor wanted. The gap between the requested soft and hard limits is kept where the
    inherited one leaves room for it (RLIMIT_CPU needs soft < hard to deliver SIGXCPU before SIGKILL).
    Without this, ``setrlimit`` rejects a hard limit above the inherited one and no limit is set at all.
    """
    if inherited_hard == resource.RLIM_INFINITY or hard <= inherited_hard:
        return soft, hard
    gap = hard - soft
    return max(min(soft, inherited_hard - gap), 0), inherited_hard


def set_limit(which: int, value: int, hard: int | None = None) -> None:
    """Set one resource limit to ``value`` (soft) and ``hard``, clamped by ``clamp_limits``."""
    _, inherited_hard = resource.getrlimit(which)
    soft, new_hard = clamp_limits(value, value if hard is None else hard, inherited_hard)
    # Clamped, setrlimit has nothing left to refuse; the suppression only covers an exotic kernel.
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(which, (soft, new_hard))
