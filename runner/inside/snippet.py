"""One rank's body: its streams, environment and limits, then the snippet itself, and its exception report."""

from __future__ import annotations

import builtins
import contextlib
import faulthandler
import io
import json
import os
import resource
import signal
import sys
import types
from typing import Any

from runner.inside.identity import set_limit
from runner.inside.interpreter import reseed, run_exit_hooks, system_exit_code
from runner.inside.torchcompat import destroy_group, keep_destroyed_groups_referenced, torchrun_env
from runner.inside.zygote import SpawnZygote, pass_dump_fd_to_spawned_children, serves_spawn_warm


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


# python and dp jobs print as in a terminal (see run_rank); set in a rank before anything forks from it.
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


def run_rank(
    job: dict[str, Any],
    rank: int,
    fds: dict[str, int],
    report_fd: int,
    path: str,
    go_fd: int | None = None,
) -> int:
    """Body of one forked rank process; returns its exit code."""
    nproc = int(job["nproc"])
    _rank_streams(job, fds)
    _rank_environment(job, rank, nproc)
    _rank_limits(job.get("limits", {}))
    _guard_spawned_processes(job, fds, report_fd, go_fd)
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
    return _run_snippet(job, path, report_fd)


def _rank_streams(job: dict[str, Any], fds: dict[str, int]) -> None:
    """Lead the rank's stdout and stderr to its own pipes, as a terminal or torchrun would buffer them."""
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


def _rank_environment(job: dict[str, Any], rank: int, nproc: int) -> None:
    """The rank's environment: the job's, plus torchrun's variables for a ddp rank."""
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


def _rank_limits(limits: dict[str, Any]) -> None:
    """The rank's own memory, CPU-time and file-size limits (the host decides which memory limit)."""
    # "as" on CPU-only runners; "data" on GPU runners without a memory cgroup (CUDA reserves huge address
    # ranges, so RLIMIT_AS breaks it); none when the cgroup alone bounds memory (the host decides).
    memory_rlimit = {"as": resource.RLIMIT_AS, "data": resource.RLIMIT_DATA}.get(
        str(limits.get("memory_rlimit", "as"))
    )
    if limits.get("memory_bytes") and memory_rlimit is not None:
        set_limit(memory_rlimit, int(limits["memory_bytes"]))
    if limits.get("cpu_s"):
        # The kernel sends SIGKILL, not SIGXCPU, when the soft limit equals the hard one: one more second
        # of hard limit lets the rank die of SIGXCPU, which the verdict reports as a CPU-time timeout.
        set_limit(resource.RLIMIT_CPU, int(limits["cpu_s"]), int(limits["cpu_s"]) + 1)
    if limits.get("fsize_bytes"):
        set_limit(resource.RLIMIT_FSIZE, int(limits["fsize_bytes"]))


def _guard_spawned_processes(
    job: dict[str, Any], fds: dict[str, int], report_fd: int, go_fd: int | None
) -> None:
    """Keep destroyed groups referenced, fork the spawn zygote where the snippet gets one, pass the dump."""
    # Before the zygote is forked: the processes it starts carry the same guard.
    keep_destroyed_groups_referenced()
    zygote = None
    warm_spawn = "off" if job.get("fresh_interpreters") else str(job.get("warm_spawn", "off"))
    if serves_spawn_warm(warm_spawn, str(job.get("code", ""))):
        # Forked now, under the rank's limits and before any snippet code: what it starts later must not
        # see the snippet's state, nor get limits the rank does not have.
        with contextlib.suppress(OSError):  # no zygote (the process limit): fresh interpreters, as before
            zygote = SpawnZygote([fds["dump"], report_fd, *([go_fd] if go_fd is not None else [])])
    pass_dump_fd_to_spawned_children(fds["dump"], zygote)


def _run_snippet(job: dict[str, Any], path: str, report_fd: int) -> int:
    """Run the snippet in the rank's ``__main__``; its exit code (its exception reported and printed)."""
    reseed()  # every rank draws its own numbers, as torchrun's workers (new interpreters) do
    module = types.ModuleType("__main__")
    module.__file__ = path
    # The builtins module, as `python main.py` gives __main__ (an imported module holds its dict).
    module.__dict__["__builtins__"] = builtins
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
        run_exit_hooks()
        if initialized_here:
            destroy_group()
    except SystemExit as stop:
        code = system_exit_code(stop)
        run_exit_hooks()
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
        run_exit_hooks()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    return code
