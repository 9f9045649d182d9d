"""Verdict explanation: a finished job's raw results judged into a status, rank results and notes.

runner/service.py runs jobs; this module says what happened to one: which rank failed first and why (an
exception, a signal, memory, CPU time, a GPU the host lacks), where stuck ranks were (their stack dumps
read against the snippet), what the runner itself did (deadline, CPU-wait credit, ranks it stopped after a
failure), and the usual ways a snippet written for a workstation fails here.  Nothing here runs a process:
it reads what runner/executor.py gathered.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from runner import hardware
from runner.analysis import parse_snippet, source_line
from runner.executor import JobRaw, RankRaw
from runner.gpus import GpuLease, asks_missing_device, cuda_oom_note, is_cuda_oom, more_ranks_than_gpus
from runner.stacks import SnippetCalls, returned_from_spawn_target, stuck_at
from runner.verdict import (
    ChildStuckAt,
    ExceptionInfo,
    Hardware,
    Mode,
    RankResult,
    Status,
    StuckAt,
    Verdict,
)

# How a snippet that needs CUDA fails on a machine without it, across torch versions and call sites.
_NEEDS_CUDA = (
    "Torch not compiled with CUDA enabled",
    "No CUDA GPUs are available",
    "Found no NVIDIA driver",
    "no CUDA-capable device",
    "ProcessGroupNCCL is only supported with GPUs",
    "doesn't have NCCL built in",
    "CUDA driver initialization failed",
    "Cannot access accelerator device when none is available",
    "requires CUDA support",
    "compiled without CUDA support",
)
# On a CPU-only build torch.cuda's bindings simply do not exist, so calls that reach them first fail with
# an AttributeError naming the missing binding (torch.cuda.set_device -> _cuda_setDevice, the NCCL version
# -> _nccl_version), and CUDA-only classes are placeholders that refuse to be built (torch.cuda.Event).
_CUDA_BINDING_MISSING = re.compile(
    r"module 'torch\._C' has no attribute '_(?:cuda|nccl|cudnn|cudart)\w*'"
    r"|Tried to instantiate dummy base class \w+"
)
_OUT_OF_MEMORY = ("can't allocate memory", "DefaultCPUAllocator", "out of memory", "Cannot allocate memory")
_SIGXCPU = 24

DUMP_MARKER = re.compile(r"^### rankzero-dump (rank|child) pid=(\d{1,9})$", re.MULTILINE)  # inside/


@dataclass(frozen=True)
class JudgeLimits:
    """The runner's limits a verdict's notes name (from its config and its sandbox launcher)."""

    flood_bytes: int
    memory_mb: int
    output_cap_bytes: int
    files_per_process: int


@dataclass(frozen=True)
class JobFacts:
    """What the host knew of the job it ran: the snippet, where it was written, the deadline and hardware."""

    code: str
    path: str
    timeout_s: float
    hw: Hardware
    memory_rlimit: str | None
    lease: GpuLease | None = None


def judge(verdict: Verdict, raw: JobRaw, job: JobFacts, limits: JudgeLimits) -> None:
    """Fill ``verdict`` from a finished job: elapsed time, rank results, root cause, status and notes."""
    verdict.elapsed_s = raw.elapsed_s
    calls = SnippetCalls(job.code)  # one parse of the snippet for every dump of this verdict
    verdict.ranks = [_rank_result(r, calls, job.path) for r in raw.ranks]
    failing = sorted(
        (r for r in raw.ranks if r.exited and not r.stopped_by_runner and _failed(r)),
        key=lambda r: r.exit_order if r.exit_order is not None else 1 << 30,
    )
    root = failing[0] if failing else None
    if root is not None:
        verdict.root_cause_rank = root.rank
    _status(verdict, raw, root, job, limits)
    _runner_notes(verdict, raw, root, job.timeout_s)
    _explain(verdict, raw, root, job.code, job.hw)
    notes = verdict.notes
    if any(_ran_out_of_files(r) for r in raw.ranks):
        notes.append(
            f"open files: each process of a job may hold {limits.files_per_process} descriptors "
            "(RLIMIT_NOFILE; the host's open-file table is shared by every job)"
        )
    if any(r.truncated for r in verdict.ranks):
        notes.append(f"output over {limits.output_cap_bytes} bytes per stream was dropped")
    if not verdict.sandbox.isolated:
        notes.append("ran WITHOUT a sandbox (--unsafe-no-sandbox)")


def _status(verdict: Verdict, raw: JobRaw, root: RankRaw | None, job: JobFacts, limits: JudgeLimits) -> None:
    """The verdict's status, and the note that says why when the status alone does not."""
    notes = verdict.notes
    if raw.flooded:
        verdict.status = Status.OUTPUT_LIMIT
        notes.append(f"output flood: the job was stopped after {limits.flood_bytes} bytes of output")
    elif raw.oom_killed:
        verdict.status = Status.OOM
        notes.append("the sandbox's memory cgroup limit was reached: the kernel killed a process")
    elif root is not None:
        _failure_status(verdict, root, job, limits)
    elif raw.timed_out:
        verdict.status = Status.TIMEOUT
    elif raw.supervisor_lost or not all(r.exited for r in raw.ranks):
        verdict.status = Status.CRASHED
        notes.append("the sandbox stopped before every rank reported its exit")
    else:
        verdict.status = Status.OK


def _failure_status(verdict: Verdict, root: RankRaw, job: JobFacts, limits: JudgeLimits) -> None:
    """The status of a job whose rank ``root`` failed first, and the note on its cause."""
    notes, hw = verdict.notes, job.hw
    verdict.status = _status_of(root, hw)
    failure = _failure_text(root)
    if verdict.status == Status.UNSUPPORTED:
        notes.append(needs_cuda(hw, verdict.nproc))
    elif verdict.status == Status.OOM and hw.gpus > 0 and is_cuda_oom(failure):
        indices = job.lease.indices if job.lease is not None else tuple(range(hw.gpus))
        # The device's figures from torch's own message; else from the host, after the job.
        notes.append(cuda_oom_note(failure, indices, hw.names, hardware.gpu_memory))
    elif verdict.status == Status.OOM:
        notes.append(_memory_note(limits.memory_mb, job.memory_rlimit))
    elif 0 < hw.gpus < verdict.nproc and asks_missing_device(failure):
        # Written for a host with a GPU per rank: it fails here as under a bare torchrun, and the
        # runner cannot say what it would print there.
        verdict.status = Status.UNSUPPORTED
        notes.append(more_ranks_than_gpus(hw.gpus, verdict.nproc, verdict.backend))
    elif root.signal == _SIGXCPU:
        notes.append("CPU time limit reached")


def _runner_notes(verdict: Verdict, raw: JobRaw, root: RankRaw | None, timeout_s: float) -> None:
    """What the runner did to the job: its deadline and CPU-wait credit, what it stopped, what it noticed."""
    notes = verdict.notes
    if raw.timed_out:
        notes.append(_deadline_note(timeout_s, raw))
        notes += _teardown_notes(raw)
    elif raw.waited_s > 0:
        notes.append(
            f"the job waited {raw.waited_s:.1f} s for a CPU behind other work: its deadline of "
            f"{timeout_s:g} s was moved by that much (wall time {raw.elapsed_s:.1f} s)"
        )
    notes += raw.notes
    if raw.memory_note and verdict.status == Status.OOM:
        # The clamp is the host's memory shared by the concurrent jobs: an operator's matter (logged,
        # and shown by `rankzero-runner run`), and a player's only when the job ran out of memory.
        notes.append(raw.memory_note)
    stopped = [r.rank for r in raw.ranks if r.stopped_by_runner]
    if stopped and root is not None:
        listed = ", ".join(str(r) for r in stopped)
        notes.append(f"rank {listed} stopped by the runner after rank {root.rank} failed")
    for rank in raw.ranks:
        if rank.report_problem:
            notes.append(f"rank {rank.rank}'s exception report was unreadable ({rank.report_problem})")


def _teardown_notes(raw: JobRaw) -> list[str]:
    """Name the mp.spawn workers that hung after their function returned (torch's teardown, not the code)."""
    notes = []
    for rank in raw.ranks:
        if not rank.dumped:
            continue
        dump = bytes(rank.dump.data).decode(errors="replace")
        pids = [
            pid
            for role, pid, text in _dump_parts(dump)
            if role == "child" and returned_from_spawn_target(text)
        ]
        if pids:
            listed = ", ".join(str(p) for p in pids[:8])
            notes.append(
                f"rank {rank.rank}'s mp.spawn worker(s) {listed} had returned from the worker function "
                "and hung while freeing its objects (with torch 2.13, freeing a DistributedDataParallel "
                "model can deadlock in its gloo process group's destructor: pytorch/pytorch#56297); "
                "the snippet's own code had finished in those workers"
            )
    return notes


def _deadline_note(timeout_s: float, raw: JobRaw) -> str:
    """Which clock the deadline was judged on: wall time, less any time spent waiting for a CPU."""
    cpu = "" if raw.cpu_s is None else f", CPU time used {raw.cpu_s:.1f} s"
    if raw.waited_s > 0:
        clock = (
            f"on the job's own clock: {raw.elapsed_s:.1f} s of wall time less the {raw.waited_s:.1f} s it "
            f"waited for a CPU behind other work{cpu}"
        )
    elif raw.cpu_s is not None:
        clock = f"on the wall clock (it waited under 0.5 s for a CPU behind other work){cpu}"
    else:
        clock = "on the wall clock"
    return f"deadline of {timeout_s:g} s reached {clock}; every rank's stack was dumped, then killed"


def _memory_note(memory_mb: int, memory_rlimit: str | None) -> str:
    if memory_rlimit == "as":
        return f"memory limit: {memory_mb} MiB of address space per rank"
    if memory_rlimit == "data":
        return f"memory limit: {memory_mb} MiB of data segment per rank (RLIMIT_DATA)"
    return "memory limit: the sandbox's memory cgroup"


def _failed(rank: RankRaw) -> bool:
    return rank.signal is not None or (rank.exit_code is not None and rank.exit_code != 0)


def _status_of(rank: RankRaw, hw: Hardware) -> Status:
    text = ""
    if rank.exception:
        text = f"{rank.exception['type']}: {rank.exception['message']}"
    tail = bytes(rank.stderr.data[-4000:]).decode(errors="replace")
    needs_cuda = any(p in text or p in tail for p in _NEEDS_CUDA)
    needs_cuda = needs_cuda or any(_CUDA_BINDING_MISSING.search(part) for part in (text, tail))
    if hw.gpus == 0 and needs_cuda:
        return Status.UNSUPPORTED
    memory_types = ("MemoryError", "OutOfMemoryError")  # the second is torch's CUDA allocator failure
    if rank.exception and (rank.exception["type"] in memory_types or any(p in text for p in _OUT_OF_MEMORY)):
        return Status.OOM
    if rank.signal is not None:
        return Status.TIMEOUT if rank.signal == _SIGXCPU else Status.CRASHED
    return Status.ERROR


def _ran_out_of_files(rank: RankRaw) -> bool:
    """Whether the rank failed on EMFILE (its descriptor limit), by its exception or its stderr's end."""
    if not _failed(rank):
        return False
    text = f"{(rank.exception or {}).get('message', '')}"
    tail = bytes(rank.stderr.data[-4000:]).decode(errors="replace")
    return any(p in text or p in tail for p in ("Too many open files", "[Errno 24]"))


def needs_cuda(hw: Hardware, nproc: int) -> str:
    """The note of a job that needs CUDA (or more GPUs) than this runner has."""
    if hw.gpus == 0:
        return "needs CUDA: this runner has 0 GPUs"
    return more_ranks_than_gpus(hw.gpus, nproc, "nccl")


def _failure_text(rank: RankRaw) -> str:
    """The rank's exception (type: message) and the end of its stderr, where the CUDA errors are."""
    text = ""
    if rank.exception:
        text = f"{rank.exception['type']}: {rank.exception['message']}\n"
    return text + bytes(rank.stderr.data[-4000:]).decode(errors="replace")


def _show(data: bytearray) -> str:
    # Keep undecodable bytes visible instead of failing or silently replacing them; NUL is made explicit
    # because many renderers cut strings at it.
    return bytes(data).decode("utf-8", "backslashreplace").replace("\x00", "\\x00")


def _rank_result(raw: RankRaw, calls: SnippetCalls, path: str) -> RankResult:
    exception = None
    if raw.exception is not None:
        exception = ExceptionInfo(
            type=raw.exception["type"], message=raw.exception["message"], line=raw.exception["line"]
        )
    # Only a dump the host asked for while the rank ran: a rank that exited has no stack to show.
    dump = bytes(raw.dump.data).decode(errors="replace") if raw.dumped else ""
    return RankResult(
        rank=raw.rank,
        exit_code=raw.exit_code,
        signal=raw.signal,
        stdout=_show(raw.stdout.data),
        stderr=_show(raw.stderr.data),
        truncated=raw.stdout.truncated or raw.stderr.truncated,
        exception=exception,
        stuck_at=_stuck_at_with_children(dump, path, calls) if dump else None,
    )


def _dump_parts(dump: str) -> list[tuple[str, int, str]]:
    """A rank's dump split at the supervisor's markers: ``(role, pid, text)``, role "rank" or "child"."""
    parts = []
    last = 0
    role, pid = "rank", 0
    for match in DUMP_MARKER.finditer(dump):
        parts.append((role, pid, dump[last : match.start()]))
        role, pid, last = match[1], int(match[2]), match.end()
    parts.append((role, pid, dump[last:]))
    return parts


def _stuck_at_with_children(dump: str, path: str, calls: SnippetCalls) -> StuckAt | None:
    """``stuck_at`` of the rank, with that of each process it started (the supervisor marks each dump)."""
    parts = _dump_parts(dump)
    own = [(pid, text) for role, pid, text in parts if role == "rank"]
    children = [(pid, text) for role, pid, text in parts if role != "rank"]
    main = stuck_at("".join(text for _, text in own), path, calls)
    found = []
    for child_pid, text in children:
        where = stuck_at(text, path, calls)
        if where is not None:
            found.append(
                ChildStuckAt(pid=child_pid, function=where.function, line=where.line, call=where.call)
            )
    if main is None or not found:
        return main
    return StuckAt(function=main.function, line=main.line, call=main.call, children=tuple(found))


def static_notes(code: str, mode: Mode, nproc: int, hw: Hardware) -> list[str]:
    """Notes that follow from the request alone: what the snippet asks for vs what was launched."""
    notes = []
    if mode == Mode.DP:
        if hw.gpus == 0:
            notes.append("ran with 0 GPUs: DataParallel was a pass-through")
        else:
            notes.append(f"DataParallel saw {hw.gpus} GPUs: {', '.join(hw.names)}")
    for asked in _literal_world_sizes(code):
        if asked != nproc:
            notes.append(f"requested world_size={asked}, launched {nproc}")
    return notes


def _literal_world_sizes(code: str) -> list[int]:
    tree = parse_snippet(code)
    if tree is None:
        return []
    sizes = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            for keyword in node.keywords:
                if (
                    keyword.arg == "world_size"
                    and isinstance(keyword.value, ast.Constant)
                    and isinstance(keyword.value.value, int)
                ):
                    sizes.append(keyword.value.value)
    return sorted(set(sizes))


_REQUIRED_ARGS = re.compile(r"error: the following arguments are required: ([^\n]{1,200})")
_NO_MODULE = re.compile(r"No module named '([A-Za-z0-9_.]{1,100})'")
_NO_NETWORK = (
    "Temporary failure in name resolution",
    "Name or service not known",
    "No address associated with hostname",
    "Network is unreachable",
    "nodename nor servname",
    "urlopen error",
)
_GPU_CHECK = re.compile(r"cuda\s*\.\s*(device_count|is_available)\s*\(|\bdevice_count\s*\(")
_ASKS_NCCL = re.compile(r"""(?:init_process_group\s*\(\s*|backend\s*=\s*)["'](?:cpu:gloo,cuda:)?nccl["']""")


def _explain(verdict: Verdict, raw: JobRaw, root: RankRaw | None, code: str, hw: Hardware) -> None:
    """Notes for the usual ways a snippet written for a workstation fails here, and what it asked for.

    A required argparse argument (snippets run without arguments), a download (there is no network), a
    package this runner lacks, and a GPU check on a runner without enough GPUs (``unsupported``, since the
    snippet would pass it on the hardware it was written for).
    """
    if root is None:
        if verdict.status == Status.UNSUPPORTED and _ASKS_NCCL.search(code):
            verdict.backend = "nccl"
        return
    exception = root.exception or {}
    text = f"{exception.get('type', '')}: {exception.get('message', '')}"
    tail = bytes(root.stderr.data[-4000:]).decode(errors="replace")
    notes = verdict.notes
    required = _REQUIRED_ARGS.search(tail)
    if root.exit_code == 2 and required:
        notes.append(
            "snippets run without command-line arguments: argparse needs "
            f"{required[1].strip()}; give those arguments defaults"
        )
    missing = (
        _NO_MODULE.search(text) if exception.get("type") in ("ModuleNotFoundError", "ImportError") else None
    )
    if missing:
        package = missing[1].split(".")[0]
        notes.append(f"package {package} is not installed on this runner (it has torch {hw.torch})")
    if any(p in text or p in tail for p in _NO_NETWORK):
        notes.append(
            "the sandbox has no network: downloads (datasets, pretrained weights) fail; use synthetic data "
            "such as torch.randn"
        )
    line = exception.get("line")
    if isinstance(line, int) and verdict.status == Status.ERROR and hw.gpus < max(verdict.nproc, 2):
        # The traceback's line numbering, not str.splitlines (a form feed or U+2028 would shift it).
        source = (source_line(code, line) or "").strip()[:200]
        if _GPU_CHECK.search(source):
            verdict.status = Status.UNSUPPORTED
            notes.append(f"line {line} checks for GPUs ({source}): this runner has {hw.gpus} GPUs")
    if verdict.status == Status.UNSUPPORTED and (_ASKS_NCCL.search(code) or "NCCL" in text):
        # Name what the snippet asked for, not the backend the runner would have picked.
        verdict.backend = "nccl"
