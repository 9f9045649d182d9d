"""In-sandbox supervisor: pre-warms torch, then runs exactly one job's ranks.

This file is executed as a standalone script inside the sandbox (it is bind-mounted there on its own), so
it imports nothing from the ``runner`` package, only the standard library and torch.

Lifecycle:

1. Set up the job's identity (runner started as root): a user namespace of its own, in which the
   supervisor is root (one host uid of the job's pair) and the ranks will be uid 1000 (the other); a fresh
   session keyring; the process limit; then the job's syscall filter (bubblewrap loaded the base one).
2. Import torch (the expensive part, done while the sandbox waits in the pool), report ``ready``.
3. Read one job (a JSON line) from the control pipe, write the snippet to ``main.py`` and fork one
   process per rank.  Each rank gets its own stdout/stderr/stack-dump pipes that lead straight to the host.
4. Report each rank's exit on the status pipe.  On ``dump`` from the host (at the deadline, or right
   after a rank failed: fail fast instead of waiting for a 30-minute collective timeout), dump the stacks
   of the ranks still running; on ``kill``, kill them.

Only the supervisor holds the status pipe: the host trusts what arrives there, so a rank (running the
snippet) must never be able to write to it.  Ranks close it right after the fork, run under another uid
than the supervisor, and the supervisor makes itself non-dumpable, so that no rank can reopen it through
``/proc/1/fd``, ptrace the supervisor, signal it, or change its limits or its scheduling.
Each rank's exit code comes from ``waitpid``; the only thing a rank reports itself is the description of
the exception it died of, over a report pipe of its own, and the supervisor attaches it only to a non-zero
exit, so a forged description can never turn a failure into a success or blame another rank.

The supervisor normally runs as PID 1 of the sandbox's PID namespace: a snippet cannot kill it (the
kernel drops signals to a namespace init that has no handler), and when it exits the kernel kills every
process left in the namespace, daemons included.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import faulthandler
import functools
import gc
import getpass
import io
import json
import os
import resource
import select
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
import types
import uuid
import weakref
from collections.abc import Callable, Iterator
from typing import Any

# Names of the files and markers shared with the host side (runner/executor.py mirrors them).
SNIPPET_NAME = "main.py"
# The host's line on the control pipe, before the job, when a job that needs no compiler stack (no DDP
# model, FSDP, DTensor, torch.compile) waits for this sandbox while it warms: the rest of the warm-up is
# skipped (runner/sandbox.py writes it).
HINT_LIGHT = b'{"hint": "light"}\n'
EXCEPTION_MARKER = "exception"


EVENT_MAX_BYTES = 4000  # below PIPE_BUF: the supervisor's threads' writes never interleave


def _emit(fd: int, event: dict[str, Any]) -> None:
    """Write one JSON event line; lines stay below PIPE_BUF so concurrent writers never interleave.

    A long exception message is shortened until the line fits: a cut line would not parse, and the host
    would lose the whole event (a rank's exit with it).
    """
    data = (json.dumps(event, ensure_ascii=False) + "\n").encode()
    exception = event.get(EXCEPTION_MARKER)
    while len(data) > EVENT_MAX_BYTES and isinstance(exception, dict) and exception.get("message"):
        message = str(exception["message"])
        exception["message"] = message[: len(message) * 3 // 4 - 1]
        data = (json.dumps(event, ensure_ascii=False) + "\n").encode()
    if len(data) > EVENT_MAX_BYTES and isinstance(exception, dict):
        # Every field is bounded, so this cannot happen; if it did, the exit must still arrive whole.
        event[EXCEPTION_MARKER] = None
        event["report_problem"] = "too long"
        data = (json.dumps(event, ensure_ascii=False) + "\n").encode()
    if len(data) <= EVENT_MAX_BYTES:
        with contextlib.suppress(OSError):
            os.write(fd, data)


REPORT_MAX_READ = 1 << 20  # the most a pipe can hold (fs.pipe-max-size); more is never read
REPORT_LINE_MAX = 32 * 1024  # a real description: 200 + 1500 characters, at most 12 bytes each as JSON
REPORT_TYPE_MAX = 200
REPORT_MESSAGE_MAX = 1500
LINE_NUMBER_MAX = 10_000_000


def parse_report(line: bytes) -> tuple[dict[str, Any] | None, str | None]:
    """Check one exception description written by a rank: ``(description, None)`` or ``(None, why)``."""
    if len(line) > REPORT_LINE_MAX:
        return None, f"over {REPORT_LINE_MAX} bytes"
    try:
        found = json.loads(line)
    except (ValueError, RecursionError):  # RecursionError: nested deeper than the parser recurses
        return None, "not JSON"
    if not isinstance(found, dict):
        return None, "not a JSON object"
    kind, message, number = found.get("type"), found.get("message", ""), found.get("line")
    if not isinstance(kind, str) or not 0 < len(kind) <= REPORT_TYPE_MAX:
        return None, "no valid exception type"
    if not isinstance(message, str):
        return None, "message is not text"
    if number is not None and (
        not isinstance(number, int) or isinstance(number, bool) or not 0 < number <= LINE_NUMBER_MAX
    ):
        return None, "line is not a line number"
    return {
        "type": _text(kind, REPORT_TYPE_MAX),
        "message": _text(message, REPORT_MESSAGE_MAX),
        "line": number,
    }, None


def _text(value: object, limit: int) -> str:
    # Lone surrogates (a snippet can raise with "\ud800") become visible escapes: the verdict is UTF-8 JSON.
    return str(value).encode("utf-8", "backslashreplace").decode("utf-8")[:limit]


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


def _libc() -> ctypes.CDLL:
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
        libc = _libc()
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
        libc = _libc()
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
    _check(_libc().prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0), "seccomp")


def _setup_identity(spec: dict[str, Any]) -> None:
    """Everything between bubblewrap and the torch import: identity, keyring, limits, syscall filter."""
    userns = spec.get("userns")
    if isinstance(userns, dict) and os.geteuid() == 0:
        _enter_user_namespace(int(userns["sup_outer"]), int(userns["job_outer"]))
    # Changing credentials clears the parent-death signal bubblewrap set: set it again, so that killing
    # bwrap from the host still tears the whole sandbox down.
    _die_with_parent()
    _fresh_session_keyring()
    nproc_limit = int(spec.get("nproc_limit", 0))
    if nproc_limit > 0:
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc_limit, nproc_limit))
    nofile_limit = int(spec.get("nofile_limit", 0))
    if nofile_limit > 0:
        # Soft = hard, set before any rank exists: open files are a host-wide table (fs.file-max), and
        # processes x this limit is the job's bound on it (runner/sandbox.py files_per_process).
        _set_limit(resource.RLIMIT_NOFILE, nofile_limit)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if spec.get("seccomp_fd") is not None:
        _load_seccomp(int(spec["seccomp_fd"]))


def _become_rank_user() -> None:
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
        _libc().prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0)
    _die_with_parent()


def _make_undumpable() -> None:
    # A non-dumpable process's /proc/PID/fd and memory are root's, and a same-uid process cannot ptrace
    # it: a second guard on the status pipe, for a runner without a per-job user namespace (not root),
    # where the ranks keep the supervisor's uid.
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_dumpable = 4
        libc.prctl(pr_set_dumpable, 0, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _die_with_parent() -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass


FRESH_TORCH: dict[str, int] = {}

# torch.cuda.is_available() asks the CUDA runtime for the device count (cudaGetDeviceCount), which starts
# the driver in the calling process and arms torch's fork poisoning: every rank or worker forked from that
# process afterwards fails its first CUDA call with "Cannot re-initialize CUDA in forked subprocess".  With
# this variable set, is_available() and device_count() ask NVML instead, which is fork-safe.
NVML_CHECK = "PYTORCH_NVML_BASED_CUDA_CHECK"


@contextlib.contextmanager
def cuda_runtime_untouched(gpus: int) -> Iterator[None]:
    """While the supervisor warms up, answer torch's CUDA queries without the CUDA runtime.

    The supervisor forks every rank (and, through them, every warm worker), so it must never start the
    CUDA runtime (runner/README.md, "GPUs").  Importing torch's compiler stack calls
    ``torch.cuda.is_available()`` (``torch._dynamo.reset``): here that goes to NVML, and should NVML be
    missing (torch then falls back to ``cudaGetDeviceCount``), the runtime's count is answered with
    ``gpus``, the count the host probed for this sandbox (hardware probing stays in the host process).
    Both are restored afterwards, before any snippet runs: a rank's snippet sees torch and its environment
    exactly as under ``torchrun``.  On a CPU-only torch build none of this is reached (``is_available``
    returns False before asking anything).
    """
    torch = sys.modules.get("torch")
    c_module = getattr(torch, "_C", None)
    runtime_count = getattr(c_module, "_cuda_getDeviceCount", None)
    saved = os.environ.get(NVML_CHECK)
    os.environ[NVML_CHECK] = "1"
    if runtime_count is not None:
        c_module._cuda_getDeviceCount = lambda: gpus  # type: ignore[union-attr]
    try:
        yield
    finally:
        if runtime_count is not None:
            c_module._cuda_getDeviceCount = runtime_count  # type: ignore[union-attr]
        if saved is None:
            os.environ.pop(NVML_CHECK, None)
        else:
            os.environ[NVML_CHECK] = saved


def _preload(level: str = "full", enough: Callable[[], bool] | None = None) -> bool:
    """Import what snippets use, so that a job only pays for its own work.

    ``full`` (the warm pool) also imports what real snippets reach for next: the DistributedDataParallel
    constructor imports the compiler stack (dynamo) on first use, which alone costs more than a second,
    plus FSDP, DTensor, the DDP communication hooks, optimizers and data loaders.  ``torch`` (a sandbox
    started for a job that is already waiting) imports torch only: the snippet then pays for the rest
    exactly as it would under a bare ``torchrun``.  None of this may start the CUDA runtime (a forked child
    could not use CUDA afterwards): the caller holds ``cuda_runtime_untouched``.  ``enough`` is asked
    before each costly step of ``full``: True (the host's hint that the job already waiting for this
    sandbox needs no compiler stack) skips the rest.  True when the whole ``full`` warm-up was imported.
    """
    import torch
    import torch.distributed
    import torch.multiprocessing
    import torch.nn
    import torch.nn.parallel

    # The thread count a fresh interpreter's torch starts with (without OMP_NUM_THREADS), before any job
    # changes it: a process the spawn zygote serves (see SpawnZygote) is put back to it.
    FRESH_TORCH.update(threads=torch.get_num_threads())
    if level != "full" or (enough is not None and enough()):
        return False
    import torch.compiler
    import torch.distributed.algorithms.ddp_comm_hooks
    import torch.distributed.elastic.multiprocessing.errors
    import torch.distributed.fsdp
    import torch.distributed.tensor
    import torch.optim
    import torch.utils.data

    if enough is not None and enough():
        return False
    # The public way to import the compiler stack (torch.compiler.reset imports it); the caches it resets
    # are empty here.  DistributedDataParallel's constructor would import it on first use otherwise.
    # Resetting makes inductor's cache folder in the temporary directory: a job must find /tmp as empty
    # as without the warm-up, so a folder made here is removed again.
    try:
        cache = os.path.join(tempfile.gettempdir(), f"torchinductor_{getpass.getuser()}")
    except (KeyError, OSError):  # no passwd entry for the job's uid
        cache = os.path.join(tempfile.gettempdir(), f"torchinductor_uid_{os.getuid()}")
    existed = os.path.lexists(cache)
    torch.compiler.reset()
    if not existed and os.path.isdir(cache) and not os.path.islink(cache):
        shutil.rmtree(cache, ignore_errors=True)
    return True


def _keep_warm_up_finalizers_at_exit() -> None:
    """Let the ranks and spawned workers leave without running the warm-up's exit finalizers.

    Importing the warm-up registers about 170 ``weakref.finalize`` objects that run at exit (torch.library
    registrations of the compiler stack, FSDP, DTensor...).  Every forked process inherits them, and a rank
    or worker runs the exit hooks as it leaves (``_run_exit_hooks``): undoing those registrations cost
    80-100 ms per process, in a process about to end, for modules a fresh interpreter running the same
    snippet might never have imported.  They belong to the supervisor, so their ``atexit`` flag (public,
    writable) is cleared here, before any fork; finalizers the snippet registers itself still run.
    ``gc.get_objects`` is the public way to find them (about 0.1 s, once per sandbox, before its job).
    """
    for obj in gc.get_objects():
        if issubclass(type(obj), weakref.finalize):  # type(): no __class__ lookup on lazy objects
            obj.atexit = False


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


def _set_limit(which: int, value: int, hard: int | None = None) -> None:
    _, inherited_hard = resource.getrlimit(which)
    soft, new_hard = clamp_limits(value, value if hard is None else hard, inherited_hard)
    # Clamped, setrlimit has nothing left to refuse; the suppression only covers an exotic kernel.
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(which, (soft, new_hard))


def _user_line(tb: types.TracebackType | None, path: str) -> int | None:
    line = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == path:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def _describe(exc: BaseException, path: str) -> dict[str, Any]:
    line = _user_line(exc.__traceback__, path)
    if isinstance(exc, SyntaxError) and exc.filename == path:
        # A syntax error in the snippet has no snippet frame: the compiler reports the line instead.
        line = exc.lineno
    message = exc.msg if isinstance(exc, SyntaxError) else str(exc)
    return {"type": type(exc).__name__, "message": str(message)[:1500], "line": line}


# python and dp jobs print as in a terminal (see _run_rank); set in a rank before anything forks from it.
TERMINAL_LINES = {"on": False}


def _make_stream(fd: int) -> io.TextIOWrapper:
    """A rank's stdout or stderr: unbuffered as under torchrun (``-u``), or line by line as in a terminal.

    Unbuffered, every print reaches the pipe at once, piece by piece (``print(a, b)`` is three writes), so
    output survives a crash and keeps its order.  Line-buffered, each line is one write: processes that
    print at the same moment (``mp.spawn`` workers sharing the pipe) come out in whole lines, as in a
    terminal, instead of spliced mid-line.
    """
    raw = io.FileIO(fd, "w", closefd=False)
    if TERMINAL_LINES["on"]:
        return io.TextIOWrapper(
            io.BufferedWriter(raw), encoding="utf-8", errors="backslashreplace", line_buffering=True
        )
    return io.TextIOWrapper(raw, encoding="utf-8", errors="backslashreplace", write_through=True)


def _report_exception(report_fd: int, description: dict[str, Any]) -> None:
    # The report pipe is non-blocking: a snippet that filled it loses its exception details, never hangs.
    # No cut to PIPE_BUF here: a cut line would not parse, and only this rank writes to this pipe.
    data = (json.dumps(description) + "\n").encode()
    with contextlib.suppress(OSError):
        os.write(report_fd, data)


TORCHRUN_SIGNALS = "SIGTERM,SIGINT,SIGHUP,SIGQUIT"


def torchrun_env(rank: int, nproc: int, master_port: int, run_id: str) -> dict[str, str]:
    """The variables ``torchrun --nproc_per_node=N`` sets for one worker, variable for variable.

    Checked against a real torchrun by tests/runner/test_modes.py.  Like torchrun, the ranks use the
    launcher's store (``TORCHELASTIC_USE_AGENT_STORE``): the supervisor hosts it on ``MASTER_PORT``, so a
    script that starts a store of its own on another port hangs, as it does under torchrun, instead of
    failing with EADDRINUSE.
    """
    env = {
        "RANK": str(rank),
        "LOCAL_RANK": str(rank),
        "WORLD_SIZE": str(nproc),
        "LOCAL_WORLD_SIZE": str(nproc),
        "GROUP_RANK": "0",
        "GROUP_WORLD_SIZE": "1",
        "ROLE_NAME": "default",
        "ROLE_RANK": str(rank),
        "ROLE_WORLD_SIZE": str(nproc),
        "MASTER_ADDR": "localhost",
        "MASTER_PORT": str(master_port),
        "TORCHELASTIC_RUN_ID": run_id,
        "TORCHELASTIC_USE_AGENT_STORE": "True",
        "TORCHELASTIC_RESTART_COUNT": "0",
        "TORCHELASTIC_MAX_RESTARTS": "0",
        "TORCHELASTIC_ERROR_FILE": error_file(run_id, rank),
        "TORCHELASTIC_SIGNALS_TO_HANDLE": TORCHRUN_SIGNALS,
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
    }
    if nproc > 1:
        env["OMP_NUM_THREADS"] = "1"  # torchrun sets it only for more than one worker per node
    return env


def error_file(run_id: str, rank: int) -> str:
    """Where ``@record`` writes a worker's error, laid out as torchrun's (attempt_0/<rank>/error.json)."""
    return f"/tmp/torchelastic/{run_id}/attempt_0/{rank}/error.json"  # noqa: S108 - sandbox-private tmpfs


DESTROYED_GROUPS_KEPT = 16


def _keep_destroyed_groups_referenced() -> None:
    """Keep a destroyed process group referenced while something holds it, so a DDP model never frees it.

    A ``DistributedDataParallel`` model keeps its process group alive through its C++ reducer.  When the
    snippet calls ``destroy_process_group()`` while the model still lives (the DDP tutorials' ``main()``
    ends that way, the model being a local), the model's death later drops the group's last reference
    *holding the GIL*: the gloo group's destructor joins gloo's work thread, which may still wait for the GIL
    to free its last work's tensors, and both wait forever (pytorch/pytorch#56297, see runner/README.md,
    "Warm pool").  Ranks forked from a warm supervisor lose that race most of the time (3 of 4 runs of the
    uneven-inputs ``Join`` example; a bare torchrun, 0 of 4), so a snippet that finishes under torchrun
    timed out here.  With a reference kept, the group outlives the model and dies with the rank (which
    leaves through ``os._exit``), or, past the last ``DESTROYED_GROUPS_KEPT`` destroyed, when this list
    drops it (the group's own binding releases the GIL in its destructor, the part of #56297 torch fixed;
    not measured here).  The bound keeps a snippet that creates and destroys groups in a loop from
    piling up gloo threads against the sandbox's process limit.  A group nothing else holds at its destroy
    is not kept (it dies then, as under torchrun), and the kept ones are let go when the snippet makes a
    new default group: a kept group holds its store and gloo context, and keeping every one made a second
    ``init_process_group`` on the same store hang (1 warm run in 2).
    """
    dist = sys.modules.get("torch.distributed")
    if dist is None or not dist.is_available():
        return
    c10d = sys.modules.get("torch.distributed.distributed_c10d")
    original = dist.destroy_process_group
    original_init = dist.init_process_group
    kept: list[Any] = []

    @functools.wraps(original)
    def destroy_process_group(group: Any = None) -> None:
        target = None
        with contextlib.suppress(Exception):  # best effort: the call itself decides what is valid
            target = dist.group.WORLD if group is None else group
        original(group)
        if target is None or target is dist.GroupMember.NON_GROUP_MEMBER:
            return
        # Keep it only when something else still holds it (a DDP model keeps its group in an attribute
        # as well as in its reducer): with nothing else, it dies here, exactly as in a bare run.
        own = 2 + (group is target)  # ``target``, getrefcount's argument, and ``group`` when the same
        if sys.getrefcount(target) > own:
            kept.append(target)
            del kept[:-DESTROYED_GROUPS_KEPT]

    @functools.wraps(original_init)
    def init_process_group(*args: Any, **kwargs: Any) -> Any:
        # A new default group: let the kept ones go first, as a bare run would have at their destroy.  A
        # kept group holds its store and gloo context, and a second init on the same store then hung
        # (measured: a ddp snippet that inits, destroys and inits again timed out 1 run in 2 warm).
        # Dropping the last Python reference is safe (the group's own binding releases the GIL); a
        # group a live model still holds stays alive through the model, as under torchrun.
        kept.clear()
        return original_init(*args, **kwargs)

    modules: tuple[Any, ...] = (dist, c10d)  # torch's modules: attributes mypy cannot see on ModuleType
    for module in modules:
        if module is None:
            continue
        if getattr(module, "destroy_process_group", None) is original:
            module.destroy_process_group = destroy_process_group
        if getattr(module, "init_process_group", None) is original_init:
            module.init_process_group = init_process_group


def _pass_dump_fd_to_spawned_children(dump_fd: int, zygote: SpawnZygote | None = None) -> None:
    """Let processes that multiprocessing starts with a fresh interpreter dump their stacks too.

    ``spawn`` and ``forkserver`` children (``mp.spawn``, DataLoader workers) exec a new interpreter that
    closes every descriptor but the ones it is handed: this hands it the rank's dump pipe and registers
    faulthandler on SIGUSR1 there before multiprocessing's own code runs, so that a hang inside an
    ``mp.spawn`` child can be located.  Forked children inherit both already.  With a ``zygote``, such a
    process is a warm fork instead (see SpawnZygote), which registers the same handler; a request the
    zygote cannot take starts a fresh interpreter as before.
    """
    import multiprocessing.util as mp_util

    original = mp_util.spawnv_passfds
    # The second line: a terminal makes a new interpreter's streams line-buffered, a pipe would make its
    # stdout block-buffered (its lines late, grouped per process, lost when it is killed).
    prologue = (
        "import faulthandler as _rz_f, signal as _rz_s, sys as _rz_y; "
        f"_rz_f.register(_rz_s.SIGUSR1, file={dump_fd}, all_threads=True, chain=False); "
        "[_s.reconfigure(line_buffering=True) for _s in (_rz_y.stdout, _rz_y.stderr) if _s]; "
        "del _rz_f, _rz_s, _rz_y; "
    )

    def spawnv_passfds(path: Any, args: Any, passfds: Any) -> int:
        args = list(args)
        if zygote is not None:
            pid = zygote.start(path, args, (*passfds, dump_fd), dump_fd)
            if pid is not None:
                return pid
        if "-c" in args[:-1]:
            index = args.index("-c") + 1
            args[index] = prologue + args[index]
            passfds = (*passfds, dump_fd)
        return int(original(path, args, passfds))

    mp_util.spawnv_passfds = spawnv_passfds


# --- fresh interpreters, served warm ---------------------------------------------------------------------

# A snippet that mentions none of these never starts a fresh interpreter through multiprocessing (the
# default start method on Linux is fork), so its ranks fork no zygote.
SPAWN_HINTS = ("spawn", "forkserver", "start_processes")
_PR_SET_CHILD_SUBREAPER = 36
ZYGOTE_MAX_FDS = 64
ZYGOTE_MAX_REQUEST = 1 << 20


def may_start_interpreters(code: str) -> bool:
    """Whether a snippet may start processes with a fresh interpreter (``spawn``, ``forkserver``)."""
    return any(hint in code for hint in SPAWN_HINTS)


SUBGROUP_WORDS = ("new_group", "new_subgroups", "split_group", "device_mesh", "DeviceMesh")
"""Words of a snippet that makes process groups beside the world (see ``serves_spawn_warm``)."""


def serves_spawn_warm(setting: str, code: str) -> bool:
    """Whether a rank of this snippet forks a spawn zygote, under the runner's ``warm_spawn`` setting.

    When a DistributedDataParallel model is freed in a worker after its group was destroyed, torch 2.13
    destroys the gloo group holding the GIL and joins gloo's work thread, which may be waiting for the GIL
    (pytorch/pytorch#56297); warm workers lose that race far more often than fresh ones (runner/README.md,
    "Warm pool").  Every rank and warm worker keeps the groups the snippet destroys referenced
    (``_keep_destroyed_groups_referenced``), which takes that path away, so ``auto`` serves DDP snippets warm
    too, except those that also make subgroups (``new_group``, ``new_subgroups``, a device mesh): the
    subgroups ``destroy_process_group()`` destroys implicitly are not kept, and a DDP model over one of them
    could still lose the race.  A snippet that hides the names only risks its own verdict.
    """
    if setting == "on":
        return may_start_interpreters(code)
    if setting == "auto":
        return may_start_interpreters(code) and not (
            "DistributedDataParallel" in code and any(word in code for word in SUBGROUP_WORDS)
        )
    return False


class SpawnZygote:
    """A clean copy of a rank, taken before the snippet runs, that starts multiprocessing's interpreters.

    ``mp.spawn`` workers, a ``forkserver`` and multiprocessing's resource tracker are started through
    ``multiprocessing.util.spawnv_passfds``: a new interpreter runs ``python -c CMD`` and imports torch
    again (seconds, as in a bare run) before CMD gets anywhere.  The rank hands such a request to its zygote
    instead, which forks a process that puts itself in the state a new interpreter would be in (see
    ``_as_fresh_interpreter``) and runs CMD there; what CMD does next (read the process object, import the
    snippet as ``__mp_main__``, run the target) is multiprocessing's own code, exactly as in a real spawn.

    The zygote is forked before a line of the snippet runs, under the rank's uid, filters and limits, so
    what it starts carries nothing of the snippet's state.  Multiprocessing waits for what it started with
    ``waitpid``, so that process must be the rank's child, not the zygote's: the zygote forks an
    intermediate process that forks it and exits, and the rank, a child subreaper for that moment only,
    adopts it.
    """

    def __init__(self, close_in_zygote: list[int]) -> None:
        """Fork the zygote; raises OSError when it cannot be forked (the rank then runs without one)."""
        rank_end, zygote_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.owner = os.getpid()
        self.lock = threading.Lock()
        self.broken = False
        try:
            self.pid = os.fork()
        except OSError:
            rank_end.close()
            zygote_end.close()
            raise
        if self.pid == 0:  # pragma: no cover - runs in the zygote
            try:
                rank_end.close()
                _zygote_serve(zygote_end, self.owner, close_in_zygote)
            finally:
                os._exit(0)
        zygote_end.close()
        self.sock = rank_end

    def start(self, path: str | bytes, args: list[Any], passfds: tuple[int, ...], dump_fd: int) -> int | None:
        """The pid of a warm process running ``args`` (a ``python -c`` line), the rank's child.

        None when the zygote cannot take the request (another executable, a forked child of the rank
        asking, the zygote gone before it was asked): the caller then starts a fresh interpreter, as
        multiprocessing would.  A failure once the zygote has the request raises OSError, as a failed fork
        would: falling back then could start the process twice.
        """
        # multiprocessing keeps the executable as bytes (spawn.set_executable encodes it).
        path = os.fsdecode(path)
        args = [os.fsdecode(arg) for arg in args]
        if os.getpid() != self.owner or self.broken or path != sys.executable or not args:
            return None
        if args[0] != path or "-c" not in args[:-1]:
            return None
        targets = sorted({fd for fd in (0, 1, 2) if _is_open(fd)} | {int(fd) for fd in passfds})
        try:
            cwd = os.getcwd()
        except OSError:  # a removed working directory: leave it to a real exec
            return None
        umask = os.umask(0o22)
        os.umask(umask)
        request = {
            "argv": args,
            "fds": targets,
            "dump_fd": dump_fd,
            "env": dict(os.environ),
            "cwd": cwd,
            "umask": umask,
            "pgid": os.getpgid(0),
            "limits": _own_limits(),
            "ignored": _ignored_signals(),
        }
        data = json.dumps(request).encode("utf-8", "surrogateescape")
        if len(targets) > ZYGOTE_MAX_FDS or len(data) > ZYGOTE_MAX_REQUEST:
            return None
        with self.lock:
            libc = _libc()
            libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
            try:
                try:
                    socket.send_fds(self.sock, [data], targets)
                except OSError:  # the zygote is gone (or the request too big): nothing was started
                    self.broken = True
                    return None
                reply = self.sock.recv(4096)
            finally:
                libc.prctl(_PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
        if not reply:
            self.broken = True
            raise OSError(errno.EAGAIN, "the spawn zygote ended while starting a process")
        answer = json.loads(reply)
        if "pid" in answer:
            return int(answer["pid"])
        raise OSError(int(answer.get("errno") or errno.EAGAIN), str(answer.get("error", "")))


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def _own_limits() -> list[list[int]]:
    limits = []
    for name in dir(resource):
        if name.startswith("RLIMIT_"):
            number = getattr(resource, name)
            with contextlib.suppress(ValueError, OSError):
                limits.append([number, *resource.getrlimit(number)])
    return limits


def _ignored_signals() -> list[int]:
    # Ignored signals survive exec (handled ones are reset to the default), so a fresh interpreter started
    # by a process that ignores SIGTERM ignores it too.
    ignored = []
    for sig in signal.valid_signals():
        if sig in (signal.SIGKILL, signal.SIGSTOP):
            continue
        with contextlib.suppress(ValueError, OSError):
            if signal.getsignal(sig) == signal.SIG_IGN:
                ignored.append(int(sig))
    return ignored


def _zygote_serve(sock: socket.socket, rank_pid: int, close_fds: list[int]) -> None:
    """The zygote's loop: one request, one process, until the rank goes away."""
    _die_with_parent()
    if os.getppid() != rank_pid:
        return
    # Never dumped (it runs no snippet code) and never stopped by the snippet's Ctrl-C.
    faulthandler.unregister(signal.SIGUSR1)
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Holds none of the rank's pipes: the host sees the end of a rank's output when the rank's processes
    # are done, whatever the zygote does.
    # The rank's stdin object owns its descriptor: closed here, before a process placed at that number
    # could lose it to the object's finalizer.
    with contextlib.suppress(Exception):
        sys.stdin.close()
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    for fd in close_fds:
        with contextlib.suppress(OSError):
            os.close(fd)
    while True:
        try:
            data, fds, flags, _ = socket.recv_fds(sock, ZYGOTE_MAX_REQUEST, ZYGOTE_MAX_FDS)
        except OSError:
            return
        if not data and not fds:
            return  # the rank closed its end
        reply: dict[str, Any]
        try:
            if flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
                raise ValueError("request too large")
            request = json.loads(data.decode("utf-8", "surrogateescape"))
            reply = {"pid": _zygote_fork(sock, request, fds)}
        except OSError as exc:
            reply = {"errno": exc.errno or errno.EAGAIN, "error": str(exc.strerror or exc)[:200]}
        except Exception as exc:  # a request the rank's own code forged: refused, never fatal
            reply = {"errno": errno.EINVAL, "error": f"bad request: {type(exc).__name__}"}
        finally:
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
        try:
            sock.send(json.dumps(reply).encode())
        except OSError:
            return


def _zygote_fork(sock: socket.socket, request: dict[str, Any], fds: list[int]) -> int:
    """Start one process for ``request`` as the rank's child (double fork, see SpawnZygote); its pid."""
    targets = [int(fd) for fd in request["fds"]]
    if len(targets) != len(fds) or any(not 0 <= fd < 1 << 20 for fd in targets):
        raise ValueError("descriptors do not match")
    pid_r, pid_w = os.pipe()
    try:
        middle = os.fork()
    except OSError:
        os.close(pid_r)
        os.close(pid_w)
        raise
    if middle == 0:  # pragma: no cover - runs in the intermediate process
        try:
            os.close(pid_r)
            try:
                child = os.fork()
            except OSError as exc:
                os.write(pid_w, f"-{exc.errno or errno.EAGAIN}".encode())
                os._exit(0)
            if child == 0:
                os.close(pid_w)
                _as_fresh_interpreter(sock, request, fds, targets)
            os.write(pid_w, str(child).encode())
        finally:
            os._exit(0)
    os.close(pid_w)
    try:
        # Once the intermediate process is reaped, its child already belongs to the rank.
        os.waitpid(middle, 0)
        answer = os.read(pid_r, 64)
    finally:
        os.close(pid_r)
    number = int(answer) if answer else -errno.EAGAIN
    if number <= 0:
        raise OSError(-number, os.strerror(-number))
    return number


def _as_fresh_interpreter(
    sock: socket.socket, request: dict[str, Any], fds: list[int], targets: list[int]
) -> None:
    """Become what ``python -c CMD`` started by the rank would be, run CMD, and exit (never returns).

    A new interpreter would have: exactly the descriptors it was handed, at their numbers (0-2 included);
    the caller's environment, working directory, umask, process group and limits; the signals the caller
    ignores ignored, the others at their defaults (SIGINT raising KeyboardInterrupt); standard streams set
    up from its environment; torch's default thread count (or OMP_NUM_THREADS); torch's, numpy's and
    Python's generators seeded afresh; an empty ``__main__``.  Only the modules already imported (and the
    hash seed, fixed per sandbox) remain of the zygote.  The stack-dump handler is the runner's, as in a
    spawned interpreter.
    """
    code = 1
    try:
        sock.close()
        _place_descriptors(fds, targets)
        env = {str(k): str(v) for k, v in dict(request["env"]).items()}
        os.environ.clear()
        os.environ.update(env)
        os.chdir(str(request["cwd"]))
        os.umask(int(request["umask"]))
        with contextlib.suppress(OSError):
            os.setpgid(0, int(request["pgid"]))
        for number, soft, hard in request["limits"]:
            with contextlib.suppress(ValueError, OSError):
                resource.setrlimit(int(number), (int(soft), int(hard)))
        argv = [str(a) for a in request["argv"]]
        at = argv.index("-c")
        _fresh_streams(env, argv[1:at])
        _fresh_signals({int(s) for s in request["ignored"]}, request.get("dump_fd"), targets, env)
        _fresh_threads(env)
        reseed()
        sys.argv = ["-c", *argv[at + 2 :]]
        code = _run_command(argv[at + 1])
    finally:
        os._exit(code)


def _place_descriptors(fds: list[int], targets: list[int]) -> None:
    import fcntl

    # Received descriptors get whatever numbers were free: move them above every number involved first,
    # so that placing one never closes another.
    base = max([*fds, *targets, 2]) + 1
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, base) for fd in fds]
    for fd in fds:
        os.close(fd)
    for fd in (0, 1, 2):
        if fd not in targets:
            os.close(fd)
    for source, target in zip(high, targets, strict=True):
        os.dup2(source, target)  # inheritable, as the descriptors a spawned interpreter is handed
        os.close(source)


def _fresh_streams(env: dict[str, str], flags: list[str]) -> None:
    # As the interpreter builds them at start-up (unbuffered with PYTHONUNBUFFERED or -u), with the encoding
    # and error handlers the supervisor's own interpreter got from the same environment.
    unbuffered = "-u" in flags or (bool(env.get("PYTHONUNBUFFERED")) and not sys.flags.ignore_environment)
    streams: list[io.TextIOWrapper | None] = []
    templates = (sys.__stdin__, sys.__stdout__, sys.__stderr__)
    for fd, template in enumerate(templates):
        if not _is_open(fd):
            streams.append(None)
            continue
        write = fd > 0
        raw = io.FileIO(fd, "w" if write else "r", closefd=False)
        buffer: Any = raw
        if not write:
            buffer = io.BufferedReader(raw)
        elif not unbuffered:
            buffer = io.BufferedWriter(raw)
        streams.append(
            io.TextIOWrapper(
                buffer,
                encoding=getattr(template, "encoding", None) or "utf-8",
                errors=getattr(template, "errors", None) or ("backslashreplace" if fd == 2 else "strict"),
                line_buffering=write and not unbuffered,  # as on a terminal
                write_through=write and unbuffered,
            )
        )
    sys.stdin = sys.__stdin__ = streams[0]  # type: ignore[misc]
    sys.stdout = sys.__stdout__ = streams[1]  # type: ignore[misc]
    sys.stderr = sys.__stderr__ = streams[2]  # type: ignore[misc]


def _fresh_signals(ignored: set[int], dump_fd: object, targets: list[int], env: dict[str, str]) -> None:
    faulthandler.disable()
    for sig in signal.valid_signals():
        if sig in (signal.SIGKILL, signal.SIGSTOP):
            continue
        with contextlib.suppress(ValueError, OSError):
            if int(sig) in ignored:
                signal.signal(sig, signal.SIG_IGN)
            elif sig == signal.SIGINT:
                signal.signal(sig, signal.default_int_handler)
            elif signal.getsignal(sig) not in (signal.SIG_DFL, None) and sig not in (
                signal.SIGPIPE,
                signal.SIGXFSZ,
            ):
                signal.signal(sig, signal.SIG_DFL)
    if isinstance(dump_fd, int) and dump_fd in targets and signal.SIGUSR1 not in ignored:
        faulthandler.register(signal.SIGUSR1, file=dump_fd, all_threads=True, chain=False)
    if env.get("PYTHONFAULTHANDLER") and sys.stderr is not None:
        faulthandler.enable(file=sys.stderr, all_threads=True)


def _fresh_threads(env: dict[str, str]) -> None:
    # torch reads OMP_NUM_THREADS when it is imported; here it was imported long before this environment.
    torch = sys.modules.get("torch")
    if torch is not None and FRESH_TORCH:
        threads = env.get("OMP_NUM_THREADS", "")
        torch.set_num_threads(
            int(threads) if threads.isdigit() and int(threads) > 0 else FRESH_TORCH["threads"]
        )


def reseed() -> None:
    """Seed torch's and numpy's default generators afresh, as a new interpreter does.

    A forked process shares its parent's generator states; Python's ``random`` reseeds itself after a
    fork, torch and numpy do not.  Under torchrun every worker is a new interpreter with a seed of its own
    (torch picks a non-deterministic one), so ranks and spawned processes forked from a warm supervisor
    must not all draw the same "random" numbers.  Only the CPU generator: CUDA's are seeded when CUDA
    starts, after the fork.
    """
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.default_generator.seed()
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        with contextlib.suppress(Exception):
            numpy.random.seed()


def _run_command(command: str) -> int:
    """Run a ``-c`` command as the interpreter would: in an empty ``__main__``; its exit code."""
    import builtins

    main = types.ModuleType("__main__")
    main.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = main
    here = os.path.dirname(os.path.abspath(__file__))
    if sys.path and sys.path[0] == here:
        sys.path[0] = ""  # python -c puts the working directory first, not the runner's folder
    try:
        exec(compile(command, "<string>", "exec"), main.__dict__)  # noqa: S102 - multiprocessing's own line
        code = 0
    except SystemExit as stop:
        code = _exit_code(stop)
    except BaseException as exc:
        with contextlib.suppress(Exception):
            sys.excepthook(type(exc), exc, exc.__traceback__)
        code = 1
    _run_exit_hooks()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            stream.flush()
    return code


def _run_rank(
    job: dict[str, Any],
    rank: int,
    fds: dict[str, int],
    report_fd: int,
    path: str,
    go_fd: int | None = None,
) -> int:
    """Body of one forked rank process; returns its exit code."""
    nproc = int(job["nproc"])
    # `python main.py` in a terminal: stdout and stderr line-buffered.  torchrun starts its workers with
    # -u: ddp ranks stay unbuffered.  What either starts (forked, warm or fresh) is line-buffered, as the
    # terminal makes it.
    TERMINAL_LINES["on"] = job["mode"] != "ddp"
    os.setpgid(0, 0)
    os.dup2(fds["out"], 1)
    os.dup2(fds["err"], 2)
    # Only 1 and 2 lead to the host's stdout/stderr captures from now on.
    for name in ("out", "err"):
        if fds[name] > 2:
            os.close(fds[name])
    sys.stdout = _make_stream(1)
    sys.stderr = _make_stream(2)
    sys.stdin = open(os.devnull)  # noqa: SIM115 - lives as long as the rank
    signal.signal(signal.SIGINT, signal.default_int_handler)
    faulthandler.enable(file=sys.stderr, all_threads=True)
    faulthandler.register(signal.SIGUSR1, file=fds["dump"], all_threads=True, chain=False)

    env = {str(k): str(v) for k, v in job.get("env", {}).items()}
    if job["mode"] == "ddp":
        env.update(
            torchrun_env(rank, nproc, int(job.get("master_port", 29500)), str(job.get("run_id", "none")))
        )
    # The supervisor's own setting (sandbox.job_env), not the snippet's: neither a terminal user's nor
    # torchrun's workers' environment has it (torchrun passes -u), and every interpreter the snippet
    # starts would print unbuffered, piece by piece.
    env.pop("PYTHONUNBUFFERED", None)
    os.environ.clear()
    os.environ.update(env)
    if "TORCHELASTIC_ERROR_FILE" in env:
        # torchrun makes the folder of each worker's error file; made by the rank itself, it is the rank's.
        with contextlib.suppress(OSError):
            os.makedirs(os.path.dirname(env["TORCHELASTIC_ERROR_FILE"]), exist_ok=True)

    limits = job.get("limits", {})
    # "as" on CPU-only runners; "data" on GPU runners without a memory cgroup (CUDA reserves huge address
    # ranges, so RLIMIT_AS breaks it); none when the cgroup alone bounds memory (the host decides).
    memory_rlimit = {"as": resource.RLIMIT_AS, "data": resource.RLIMIT_DATA}.get(
        str(limits.get("memory_rlimit", "as"))
    )
    if limits.get("memory_bytes") and memory_rlimit is not None:
        _set_limit(memory_rlimit, int(limits["memory_bytes"]))
    if limits.get("cpu_s"):
        # The kernel sends SIGKILL, not SIGXCPU, when the soft limit equals the hard one: one more second
        # of hard limit lets the rank die of SIGXCPU, which the verdict reports as a CPU-time timeout.
        _set_limit(resource.RLIMIT_CPU, int(limits["cpu_s"]), int(limits["cpu_s"]) + 1)
    if limits.get("fsize_bytes"):
        _set_limit(resource.RLIMIT_FSIZE, int(limits["fsize_bytes"]))

    # Before the zygote is forked: the processes it starts carry the same guard.
    _keep_destroyed_groups_referenced()
    zygote = None
    warm_spawn = "off" if job.get("fresh_interpreters") else str(job.get("warm_spawn", "off"))
    if serves_spawn_warm(warm_spawn, str(job.get("code", ""))):
        # Forked now, under the rank's limits and before any snippet code: what it starts later must not
        # see the snippet's state, nor get limits the rank does not have.
        with contextlib.suppress(OSError):  # no zygote (the process limit): fresh interpreters, as before
            zygote = SpawnZygote([fds["dump"], report_fd, *([go_fd] if go_fd is not None else [])])
    _pass_dump_fd_to_spawned_children(fds["dump"], zygote)

    if job["mode"] == "ddp" and nproc > 1:
        # Like torchrun (OMP_NUM_THREADS=1 is in the environment): N ranks on a shared machine should not
        # each start a full thread pool.  The variable is read when torch is imported, which already
        # happened here, so the thread count is set too.
        torch = sys.modules.get("torch")
        if torch is not None:
            torch.set_num_threads(1)
    if go_fd is not None:
        # Wait until the supervisor's agent store listens (see Supervisor.start): a rank that tried to
        # connect before would be refused and wait out c10d's retry back-off.
        with contextlib.suppress(OSError):
            os.read(go_fd, 1)
        os.close(go_fd)

    reseed()  # every rank draws its own numbers, as torchrun's workers (new interpreters) do
    module = types.ModuleType("__main__")
    module.__file__ = path
    module.__dict__["__builtins__"] = __builtins__
    sys.modules["__main__"] = module
    sys.argv = [path]
    sys.path[0:0] = [os.path.dirname(path)]

    code = 0
    initialized_here = False
    try:
        if job.get("init_process_group") and job["mode"] == "ddp":
            import torch.distributed as dist

            backend = job.get("backend", "gloo")
            if backend == "nccl":
                # As torchrun scripts do: NCCL needs each rank bound to its own GPU before the group.
                import torch.cuda as cuda

                cuda.set_device(int(os.environ["LOCAL_RANK"]))
            dist.init_process_group(backend=backend)
            initialized_here = True
        with open(path, encoding="utf-8") as fh:
            source = fh.read()
        compiled = compile(source, path, "exec")
        exec(compiled, module.__dict__)  # noqa: S102 - running the snippet is the point of the runner
        _run_exit_hooks()
        if initialized_here:
            _destroy_group()
    except SystemExit as stop:
        code = _exit_code(stop)
        _run_exit_hooks()
    except BaseException as exc:
        _report_exception(report_fd, _describe(exc, path))
        # Start the traceback at the snippet, as `python main.py` would: the runner's frame is noise.
        tb = exc.__traceback__
        if tb is not None and tb.tb_frame.f_code.co_filename != path and tb.tb_next is not None:
            tb = tb.tb_next
        with contextlib.suppress(Exception):  # the snippet may have closed its stderr
            # Through sys.excepthook, as the interpreter would: init_process_group installs one that
            # prefixes every line with "[rankN]: ", and a snippet may have installed its own.
            # The hook prints from the exception's own traceback: cut the runner's frame there too.
            sys.excepthook(type(exc), exc.with_traceback(tb), tb)
        code = 1
        _run_exit_hooks()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    return code


FRESH_RANK_FLAG = "--fresh-rank"


SETTLE_TIMEOUT_S = 30.0


def _wait_settled(settled_r: int, nproc: int) -> None:
    """Wait until every fresh rank said it is non-dumpable, or all of them are gone, or 30 s passed.

    A rank that dies first only costs the wait (the other ranks' end closes the pipe, the host's deadline
    bounds the rest).
    """
    got = 0
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    while got < nproc:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([settled_r], [], [], left)[0]:
            break
        chunk = os.read(settled_r, nproc)
        if not chunk:
            break
        got += len(chunk)
    os.close(settled_r)


def _exec_fresh_rank(
    job: dict[str, Any],
    rank: int,
    fds: dict[str, int],
    report_fd: int,
    path: str,
    go_fd: int,
    settled_fd: int,
) -> None:
    """Replace this forked rank with a new interpreter that runs ``_run_rank`` itself (never returns).

    What differs between separate interpreters and forks of one is what torchrun's workers have and warm
    ranks lack: each its own string hash seed (so iterating a set of parameter names gives a different
    order per rank), its own addresses (``id()``), nothing imported.  The cost is a bare start: the
    snippet imports torch itself, as under torchrun.  The rank's pipes pass through the exec; its
    arguments travel in a memory file (a job's code may be 64 KiB, past what one argument may hold).
    """
    keep = [*fds.values(), report_fd, go_fd, settled_fd]
    payload = {
        "job": job,
        "rank": rank,
        "fds": fds,
        "report_fd": report_fd,
        "path": path,
        "go_fd": go_fd,
        "settled_fd": settled_fd,
    }
    memfd = os.memfd_create("rankzero-rank", 0)  # not CLOEXEC: the new interpreter reads it
    os.write(memfd, json.dumps(payload).encode())
    for fd in keep:
        os.set_inheritable(fd, True)
    flags = ["-s"] if sys.flags.no_user_site else []
    argv = [sys.executable, *flags, os.path.abspath(__file__), FRESH_RANK_FLAG, str(memfd)]
    os.execv(sys.executable, argv)  # noqa: S606 - the rank's own interpreter, no shell involved


def _fresh_rank_main(memfd: int) -> int:
    """The new interpreter of ``_exec_fresh_rank``: read the rank's arguments and run it."""
    # First of all, as the forked rank was: no sibling may open this rank's pipes through /proc/PID/fd
    # (an exec made the process dumpable again); then tell the supervisor, which lets no rank go before.
    _make_undumpable()
    os.lseek(memfd, 0, os.SEEK_SET)
    with os.fdopen(memfd, "rb") as fh:
        args = json.loads(fh.read())
    settled = int(args["settled_fd"])
    with contextlib.suppress(OSError):
        os.write(settled, b"1")
    os.close(settled)
    return _run_rank(
        args["job"], int(args["rank"]), args["fds"], int(args["report_fd"]), args["path"], args["go_fd"]
    )


def _exit_code(stop: SystemExit) -> int:
    if stop.code is None:
        return 0
    if isinstance(stop.code, int):
        return stop.code & 0xFF
    print(stop.code, file=sys.stderr)
    return 1


def _run_exit_hooks() -> None:
    # A forked rank leaves through os._exit (the supervisor's own shutdown must not run twice), so the
    # normal interpreter shutdown steps a snippet may rely on are run here by hand.
    import atexit

    shutdown = getattr(threading, "_shutdown", None)
    try:
        if shutdown is not None:
            shutdown()
        atexit._run_exitfuncs()
    except BaseException:  # noqa: S110 - a failing exit hook must not hide the snippet's result
        pass


def _destroy_group() -> None:
    import torch.distributed as dist

    try:
        if dist.is_initialized():
            dist.destroy_process_group()
    except Exception:  # noqa: S110 - cleanup only
        pass


DUMP_MARKER = "### rankzero-dump"  # mirrored in runner/service.py
MAX_DUMPED_CHILDREN = 16


def _descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid`` (in this PID namespace), parents before children."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        # The command name is in parentheses and may contain anything: the fields follow the last ")".
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 1 and fields[1].isdigit():
            parents.setdefault(int(fields[1]), []).append(int(entry))
    found: list[int] = []
    queue = [pid]
    while queue and len(found) < 1000:
        children = sorted(parents.get(queue.pop(0), []))
        found += children
        queue += children
    return found


def _handles_sigusr1(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("SigCgt:"):
                    return bool(int(line.split()[1], 16) & (1 << (signal.SIGUSR1 - 1)))
    except (OSError, ValueError, IndexError):
        pass
    return False


def _agent_store(port: int) -> Any:
    """The store torchrun's agent hosts for its workers (``TORCHELASTIC_USE_AGENT_STORE``)."""
    try:
        import torch.distributed as dist

        # torch.distributed.TCPStore is public (documented) but not re-exported for type checkers.
        return dist.TCPStore("localhost", port, is_master=True, wait_for_workers=False, multi_tenant=True)  # type: ignore[attr-defined]
    except Exception as exc:  # the ranks then fail to connect, and the verdict shows it
        print(f"rankzero: could not start the agent store on port {port}: {exc}", file=sys.stderr)
        return None


class Supervisor:
    """Forks the ranks of one job and reports on them."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.control_fd = int(spec["control_fd"])
        self.status_fd = int(spec["status_fd"])
        self.rank_fds: list[dict[str, int]] = spec["ranks"]
        self.workdir = str(spec.get("workdir", "/tmp"))  # noqa: S108 - the sandbox's private tmpfs
        self.pids: dict[int, int] = {}
        self.reports: dict[int, int] = {}  # rank -> read end of its exception report pipe
        self.lock = threading.Lock()
        self.live: set[int] = set()  # rank pids not reaped yet
        # rank -> the supervisor's own copy of the rank's dump pipe, for the markers that tell the host
        # which process each stack dump comes from; closed when the rank is reaped.
        self.dump_fds: dict[int, int] = {}
        self.store: Any = None  # the agent store of a ddp job (kept alive until the supervisor exits)
        self.pending = b""  # what the control pipe held before wait_job (the host's hint, maybe the job)

    def hinted_light(self) -> bool:
        """Whether the host said, while this sandbox warmed, that its waiting job needs no compiler stack."""
        if not self.pending.startswith(HINT_LIGHT):
            readable, _, _ = select.select([self.control_fd], [], [], 0)
            if readable:
                self.pending += os.read(self.control_fd, 1 << 20)
        return self.pending.startswith(HINT_LIGHT)

    def wait_job(self) -> dict[str, Any] | None:
        """Block until the host sends the job (one JSON line); None if the host went away.

        The host's light hint may come first, read or not by ``hinted_light`` (it can arrive after the
        warm-up's last look): it is never taken for the job.
        """
        buf = self.pending
        while True:
            buf = buf.removeprefix(HINT_LIGHT)
            if b"\n" in buf:
                break
            chunk = os.read(self.control_fd, 1 << 20)
            if not chunk:
                return None
            buf += chunk
        line, _, rest = buf.partition(b"\n")
        del rest  # the host sends exactly one job per sandbox
        job: dict[str, Any] = json.loads(line)
        return job

    def start(self, job: dict[str, Any]) -> None:
        """Write the snippet and fork one process per rank."""
        path = os.path.join(self.workdir, SNIPPET_NAME)
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(job["code"])
        os.chdir(self.workdir)
        sys.stdout.flush()
        sys.stderr.flush()
        nproc = int(job["nproc"])
        ddp = job["mode"] == "ddp"
        # Ranks forked from this one interpreter share its string hash seed; torchrun's are separate
        # interpreters with one each.  A snippet that can see the difference (the host decides: it builds
        # sets or hashes) gets ranks that are fresh interpreters (see _exec_fresh_rank).
        fresh = ddp and nproc > 1 and bool(job.get("fresh_interpreters"))
        if ddp:
            job["run_id"] = str(uuid.uuid4())
        report_pipes = [os.pipe() for _ in range(nproc)]
        go_r, go_w = os.pipe() if ddp else (-1, -1)
        # Fresh ranks say on this pipe when they are non-dumpable again (an exec makes a process dumpable):
        # no rank is let go before every sibling's pipes are out of its reach through /proc.
        settled_r, settled_w = os.pipe() if fresh else (-1, -1)
        all_fds = {fd for fds in self.rank_fds for fd in fds.values()}
        all_fds |= {fd for pair in report_pipes for fd in pair}
        all_fds |= {fd for fd in (settled_r, settled_w) if fd >= 0}
        for rank in range(nproc):
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    report_w = report_pipes[rank][1]
                    mine = self.rank_fds[rank]
                    for fd in all_fds - {*mine.values(), report_w, settled_w}:
                        os.close(fd)
                    # The status and control pipes are the supervisor's alone (see the module docstring).
                    os.close(self.control_fd)
                    os.close(self.status_fd)
                    if ddp:
                        os.close(go_w)
                    os.set_blocking(report_w, False)
                    # Every rank, whatever the count the job asked of this sandbox, leaves the
                    # supervisor's uid before it runs a line of the snippet.
                    if isinstance(self.spec.get("userns"), dict):
                        _become_rank_user()
                    if fresh:
                        with contextlib.suppress(OSError):  # cannot exec: the rank runs warm, as before
                            _exec_fresh_rank(job, rank, mine, report_w, path, go_r, settled_w)
                        with contextlib.suppress(OSError):
                            os.write(settled_w, b"1")
                        os.close(settled_w)
                    code = _run_rank(job, rank, mine, report_w, path, go_r if ddp else None)
                finally:
                    os._exit(code)
            self.pids[pid] = rank
            with self.lock:
                self.live.add(pid)
        # Copied only once every rank is forked: a copy made earlier would be inherited by the ranks forked
        # after it, and one rank could then write into another's dump pipe.  Nothing is reaped before
        # start() returns, so every rank still has its pipe here.
        for rank in range(nproc):
            self.dump_fds[rank] = os.dup(self.rank_fds[rank]["dump"])
        # The supervisor keeps no rank output pipe open: the host sees EOF once the ranks (and their
        # children) exit.  Its dump copies are closed as each rank is reaped.
        for fd in {fd for fds in self.rank_fds for fd in fds.values()}:
            os.close(fd)
        if fresh:
            os.close(settled_w)
            _wait_settled(settled_r, nproc)
        if ddp:
            os.close(go_r)
            self.store = _agent_store(int(job.get("master_port", 29500)))
            os.close(go_w)  # the ranks start now
        for rank, (report_r, report_w) in enumerate(report_pipes):
            os.close(report_w)
            os.set_blocking(report_r, False)
            self.reports[rank] = report_r
        _emit(self.status_fd, {"event": "started", "pids": {str(r): p for p, r in self.pids.items()}})

    def reap_forever(self) -> None:
        """Reap ranks and any orphan that was reparented to us (we may be PID 1)."""
        live = set(self.pids)
        while live:
            try:
                pid, status = os.waitpid(-1, 0)
            except ChildProcessError:
                break
            if pid not in live:
                continue
            live.discard(pid)
            rank = self.pids[pid]
            with self.lock:
                dump_fd = self.dump_fds.pop(rank, None)
            if dump_fd is not None:
                os.close(dump_fd)
            exit_code = os.waitstatus_to_exitcode(status)
            event: dict[str, Any] = {
                "event": "exit",
                "rank": rank,
                "exit_code": None,
                "signal": None,
                EXCEPTION_MARKER: None,
            }
            if exit_code < 0:
                event["signal"] = -exit_code
            else:
                event["exit_code"] = exit_code
            if exit_code > 0:
                # Only a rank that really failed gets an exception; what it reported cannot change that.
                event[EXCEPTION_MARKER], problem = self.read_report(rank)
                if problem:
                    event["report_problem"] = problem
            with self.lock:
                self.live.discard(pid)
            # The host decides what follows a failure (dump the others' stacks, then "kill"): it alone
            # knows which dump-pipe bytes came after its own request.
            _emit(self.status_fd, event)
        _emit(self.status_fd, {"event": "done"})

    def read_report(self, rank: int) -> tuple[dict[str, Any] | None, str | None]:
        """``(description, problem)``: the last exception description in ``rank``'s report pipe, checked.

        The rank writes its description right before it exits, so it is already in the pipe when waitpid
        returns.  The snippet holds the write end too and may have written anything there first (deep
        JSON, a 5000-digit line number, megabytes): only the last line counts, it is parsed only when
        short, and every field is checked.  Nothing in it can raise here; an unusable report gives
        ``(None, why)``, which the verdict shows as an unreadable report.
        """
        fd = self.reports.pop(rank, None)
        if fd is None:
            return None, None
        data = b""
        with contextlib.suppress(OSError):  # EAGAIN: nothing (more) to read
            while len(data) < REPORT_MAX_READ:
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                data += chunk
        os.close(fd)
        lines = data.splitlines()
        if not lines:
            return None, None
        return parse_report(lines[-1])

    def dump(self, pids: set[int]) -> None:
        """Ask ranks, and the processes they started, to write their Python stacks to their dump pipes.

        Each dump is preceded by a marker line naming the process (``DUMP_MARKER``), and the processes of
        one rank are signalled one after the other, so that their dumps do not interleave.  Only processes
        that handle SIGUSR1 are signalled (the ranks, and the children the runner taught to dump): for any
        other the signal's default action would kill it.
        """
        groups = []
        for pid in pids:
            rank = self.pids.get(pid)
            if rank is not None:
                groups.append((rank, [pid, *_descendants(pid)[:MAX_DUMPED_CHILDREN]]))
        for wave in range(max((len(g) for _, g in groups), default=0)):
            for rank, members in groups:
                if wave >= len(members) or not _handles_sigusr1(members[wave]):
                    continue
                with self.lock:
                    fd = self.dump_fds.get(rank)
                if fd is None:
                    continue
                role = "rank" if wave == 0 else "child"
                with contextlib.suppress(OSError):
                    os.write(fd, f"\n{DUMP_MARKER} {role} pid={members[wave]}\n".encode())
                with contextlib.suppress(ProcessLookupError):
                    os.kill(members[wave], signal.SIGUSR1)
            if wave + 1 < max(len(g) for _, g in groups):
                time.sleep(0.03)
        # faulthandler writes from inside the signal handler; give it a moment before anything is killed.
        time.sleep(0.3)

    def serve_commands(self) -> None:
        """Answer the host's commands until the control pipe closes."""
        while True:
            data = os.read(self.control_fd, 4096)
            if not data:
                return
            for word in data.decode(errors="replace").split():
                with self.lock:
                    live = set(self.live)
                if word == "dump":
                    # Only ranks still running: a rank that exited has no stack, whatever its pipe holds.
                    self.dump(live)
                    _emit(self.status_fd, {"event": "dumped"})
                elif word == "kill":
                    for pid in live:
                        with contextlib.suppress(ProcessLookupError, PermissionError):
                            os.killpg(pid, signal.SIGKILL)


def main(argv: list[str]) -> int:
    """Entry point of the sandbox: ``bootstrap.py SPEC_JSON``."""
    if len(argv) == 3 and argv[1] == FRESH_RANK_FLAG:
        code = 1
        try:
            code = _fresh_rank_main(int(argv[2]))
        finally:
            os._exit(code)  # as a forked rank leaves (its exit hooks ran in _run_rank)
    spec: dict[str, Any] = json.loads(argv[1])
    # As PID 1 a default SIGINT disposition is simply ignored; Python's KeyboardInterrupt handler is not.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _setup_identity(spec)
    _make_undumpable()
    sup = Supervisor(spec)
    preload = spec.get("preload", "full")
    if preload:
        import torch  # noqa: F401 - the guard below replaces one of its functions while the warm-up runs

        with cuda_runtime_untouched(int(spec.get("gpus", 0))):
            whole = _preload("full" if preload is True else str(preload), sup.hinted_light)
        if whole:
            # Only after a whole warm-up: a sandbox cut short (or started for a waiting job) has its job
            # waiting now, and torch's own few finalizers cost its ranks less than the 0.1 s scan.
            _keep_warm_up_finalizers_at_exit()
    _emit(sup.status_fd, {"event": "ready", "pid": os.getpid()})
    job = sup.wait_job()
    if job is None:
        return 0
    job["nproc"] = min(int(job["nproc"]), len(sup.rank_fds))
    sup.start(job)
    threading.Thread(target=sup.serve_commands, daemon=True).start()
    sup.reap_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
