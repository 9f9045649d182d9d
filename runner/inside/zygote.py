"""Fresh interpreters served warm: the zygote of a rank; the dump pipe of what multiprocessing starts."""

from __future__ import annotations

import contextlib
import errno
import faulthandler
import io
import json
import os
import resource
import signal
import socket
import sys
import threading
import types
from typing import Any

from runner.inside.identity import die_with_parent, libc_handle
from runner.inside.interpreter import reseed, run_exit_hooks, system_exit_code
from runner.inside.warmup import FRESH_TORCH


def pass_dump_fd_to_spawned_children(dump_fd: int, zygote: SpawnZygote | None = None) -> None:
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
#: What runner/inside/__main__.py puts first on the module path: the folder holding ``runner``.
SEARCH_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
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
    (``keep_destroyed_groups_referenced``), which takes that path away, so ``auto`` serves DDP snippets warm
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
            libc = libc_handle()
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
    die_with_parent()
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


def _run_command(command: str) -> int:
    """Run a ``-c`` command as the interpreter would: in an empty ``__main__``; its exit code."""
    import builtins

    main = types.ModuleType("__main__")
    main.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = main
    if sys.path and sys.path[0] == SEARCH_ROOT:
        sys.path[0] = ""  # python -c puts the working directory first, not the runner's folder
    try:
        exec(compile(command, "<string>", "exec"), main.__dict__)  # noqa: S102 - multiprocessing's own line
        code = 0
    except SystemExit as stop:
        code = system_exit_code(stop)
    except BaseException as exc:
        with contextlib.suppress(Exception):
            sys.excepthook(type(exc), exc, exc.__traceback__)
        code = 1
    run_exit_hooks()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            stream.flush()
    return code
