"""The runner's use case: run one snippet in a fresh sandbox and judge the outcome into a verdict."""

from __future__ import annotations

import ast
import asyncio
import logging
import os
import re
import threading
from dataclasses import dataclass
from typing import Any

from runner import hardware
from runner.analysis import observes_string_hashes, parse_snippet, source_line
from runner.config import MAX_CODE_BYTES, RunnerConfig
from runner.executor import JobRaw, RankRaw, run_job
from runner.gpus import (
    GpuAllocator,
    GpuLease,
    asks_missing_device,
    cuda_oom_note,
    gpus_needed,
    is_cuda_oom,
    more_ranks_than_gpus,
    visible_devices,
)
from runner.inside.zygote import may_start_interpreters
from runner.pool import WarmPool
from runner.sandbox import SandboxLauncher, job_env
from runner.stacks import SnippetCalls, returned_from_spawn_target, stuck_at
from runner.verdict import (
    ChildStuckAt,
    ExceptionInfo,
    Hardware,
    Mode,
    RankResult,
    SandboxInfo,
    Status,
    StuckAt,
    Verdict,
)

log = logging.getLogger(__name__)

SNIPPET_NAME = "main.py"  # mirrors runner/inside/protocol.py
# Words of a snippet that will import torch's compiler stack (the DDP constructor does): a sandbox still
# warming when such a job takes it finishes its warm-up; for any other job it skips that part.
NEEDS_COMPILER_STACK = (
    "DistributedDataParallel",
    "FullyShardedDataParallel",
    "fsdp",
    "FSDP",
    "fully_shard",
    "compile",
    "dynamo",
    "inductor",
    "DTensor",
    "distributed.tensor",
    "ddp_comm_hooks",
)
# Words of a snippet that may start processes of its own (see RunnerService.cpu_ranks).
# Whole words and calls, so that nn.MaxPool2d, num_workers=0 or the word "spawn" in a comment do not count.
STARTS_PROCESSES = re.compile(
    r"\bmultiprocessing\b|\bstart_processes\b|\bforkserver\b|\.spawn\(|\bos\.fork\(|\bfork\(\)"
    r"|\bnum_workers\s*=\s*[1-9]|(?<![A-Za-z_])Pool\(|\bProcessPoolExecutor\b"
)
DUMP_MARKER = re.compile(r"^### rankzero-dump (rank|child) pid=(\d{1,9})$", re.MULTILINE)  # inside/
MASTER_PORT = 29500

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
FRESH_NOTE = (
    "the snippet builds sets or calls hash(), whose order depends on each interpreter's string hash seed: "
    "its ranks and workers ran as fresh interpreters, each with a seed of its own as under torchrun "
    "(slower than warm ones)"
)


@dataclass(frozen=True)
class RunRequest:
    """One run, as asked over HTTP or on the command line (see runner/README.md for the defaults)."""

    code: str
    mode: Mode = Mode.PYTHON
    nproc: int = 1
    backend: str = "auto"
    timeout_s: float | None = None
    init_process_group: bool = False


class RunnerService:
    """Owns the sandbox launcher and the warm pool; thread-safe."""

    def __init__(self, config: RunnerConfig, gpus: GpuAllocator | None = None) -> None:
        """``gpus``: the allocator of the host's GPUs; by default one over the GPUs torch sees here (tests
        pass one with a made-up count).
        """
        self.config = config
        self._gpus = gpus
        self.launcher = SandboxLauncher(config)
        self.pool = WarmPool(self.launcher, config.pool)
        self._slots = threading.BoundedSemaphore(config.max_concurrent_jobs)
        self._running = 0
        # Jobs admitted and not finished, those waiting for a slot included: free slots for /v1/health.
        self._admitted = 0
        self._lock = threading.Lock()

    def start(self) -> None:
        """Check the sandbox works, then start warming the pool."""
        self.launcher.check()
        hardware.probe()
        _ = self.gpus
        self.pool.start()

    @property
    def gpus(self) -> GpuAllocator:
        """The allocator of the host's GPUs, made on first use from the host's probe (never in a sandbox)."""
        if self._gpus is None:
            with self._lock:
                if self._gpus is None:
                    self._gpus = GpuAllocator(hardware.probe().gpus, share=self.config.share_gpus)
        return self._gpus

    def close(self) -> None:
        """Kill warm sandboxes; remove the runner's cgroups and its /etc folder."""
        self.pool.stop()
        if self.launcher.cgroups is not None:
            self.launcher.cgroups.close()
        self.launcher.close()

    @property
    def sandbox_info(self) -> SandboxInfo:
        """Engine and isolation reported with every verdict."""
        return SandboxInfo(engine=self.launcher.engine, isolated=self.launcher.isolated)

    def advertised(self) -> tuple[Hardware, list[str]]:
        """The hardware and backends /v1/health reports: the real ones, or the test-only advertised shape.

        With ``test_advertise_gpus`` the runner claims that many GPUs (and NCCL, which GPUs imply) so that a
        bot's routing can be tested without GPUs; the jobs still run on :func:`hardware.probe`'s answer.
        """
        hw = hardware.probe()
        backends = hardware.backends()
        shape = self.config.test_advertise_gpus
        if shape is None:
            return hw, backends
        names = [f"advertised for tests (really {hw.gpus} GPUs)"] * shape
        # NCCL goes with the GPUs advertised, not with the torch build.
        advertised = [b for b in backends if b != "nccl"] + (["nccl"] if shape else [])
        return Hardware(gpus=shape, names=names, torch=hw.torch, cuda=hw.cuda), advertised

    def health(self) -> dict[str, Any]:
        """Capabilities for GET /v1/health."""
        hw, backends = self.advertised()
        with self._lock:
            running, admitted = self._running, self._admitted
        pool = self.pool.state()
        return {
            # "degraded": jobs still run (cold), but the warm pool cannot refill; pool.refill says why.
            "status": "ok" if pool["refill"]["ok"] else "degraded",
            "hardware": {"gpus": hw.gpus, "names": hw.names, "torch": hw.torch, "cuda": hw.cuda},
            "test_advertised": self.config.test_advertise_gpus is not None,
            "capacity": {
                "cpu_cores": hardware.cpu_cores(),
                "max_concurrent_jobs": self.config.max_concurrent_jobs,
                "free_slots": max(0, self.config.max_concurrent_jobs - admitted),
                "queued_jobs": max(0, admitted - running),
            },
            "backends": backends,
            "modes": [m.value for m in Mode],
            "sandbox": {
                "engine": self.launcher.engine,
                "isolated": self.launcher.isolated,
                "cgroup": self.launcher.cgroups.version if self.launcher.cgroups else 0,
            },
            "pool": pool,
            "limits": {
                "max_nproc": self.config.max_nproc,
                "max_timeout_s": self.config.max_timeout_s,
                "default_timeout_s": self.config.default_timeout_s,
                "memory_mb_per_rank": self.config.memory_mb,
                "max_code_bytes": MAX_CODE_BYTES,
                "output_cap_bytes": self.config.output_cap_bytes,
            },
            "running_jobs": running,
        }

    async def run_async(self, request: RunRequest) -> Verdict:
        """``run`` off the event loop."""
        return await asyncio.to_thread(self.run, request)

    def run(self, request: RunRequest, operator_notes: list[str] | None = None) -> Verdict:
        """Run the request and answer its verdict; job failures are verdicts, never exceptions.

        ``operator_notes`` collects what concerns the runner's operator, not the player (the memory clamp
        of a host whose memory is shared by the concurrent jobs); those go to the log as well.
        """
        hw = hardware.probe()
        mode = Mode(request.mode)
        nproc = request.nproc if mode == Mode.DDP else 1
        timeout_s = request.timeout_s if request.timeout_s is not None else self.config.default_timeout_s
        backend, notes = self._resolve_backend(mode, nproc, request.backend, hw)
        verdict = Verdict(
            status=Status.OK,
            mode=mode,
            nproc=nproc,
            backend=backend,
            elapsed_s=0.0,
            hardware=hw,
            sandbox=self.sandbox_info,
            notes=notes,
        )
        if self.config.test_advertise_gpus is not None:
            # Test-only: whoever reads the verdict must not take it for a run on the advertised GPUs.
            verdict.notes.insert(
                0,
                f"test runner: it advertises {self.config.test_advertise_gpus} GPUs "
                f"(--test-advertise-gpus) but ran this job on its real hardware ({hw.gpus} GPUs)",
            )
        refusal = self._refusal(request, mode, timeout_s)
        if refusal:
            verdict.status = Status.REJECTED
            verdict.notes.append(refusal)
            return verdict
        if backend == "nccl" and hw.gpus < nproc:
            verdict.status = Status.UNSUPPORTED
            verdict.notes.append(_needs_cuda(hw, nproc))
            return verdict
        need = gpus_needed(mode.value, nproc, backend, request.code, self.gpus.count)
        verdict.notes += _static_notes(request.code, mode, nproc, hw)
        if mode != Mode.DDP and request.nproc != 1:
            verdict.notes.append(f"mode {mode.value} runs one process: nproc={request.nproc} was ignored")
        fresh = observes_string_hashes(parse_snippet(request.code))
        if fresh and ((mode == Mode.DDP and nproc > 1) or may_start_interpreters(request.code)):
            verdict.notes.append(FRESH_NOTE)

        job = {
            "code": request.code,
            "mode": mode.value,
            "nproc": nproc,
            "backend": backend or "gloo",
            "init_process_group": request.init_process_group,
            "master_port": MASTER_PORT,
            "warm_spawn": self.config.warm_spawn,
            "fresh_interpreters": fresh,
            "env": self._rank_env(),
            "limits": {
                "memory_bytes": self.config.memory_mb * 1024 * 1024,
                "cpu_s": self.config.cpu_time_s or int(timeout_s * 2) + 5,
                "fsize_bytes": self.config.file_size_mb * 1024 * 1024,
            },
        }
        with self._lock:
            self._admitted += 1
        try:
            # The GPUs before a slot: a job waiting for devices must not hold a slot a CPU job could use.
            # Released only once the sandbox is gone (pool.release waits for its last process), so the
            # next job never finds the device still held.
            with self.gpus.lease(need) as lease, self._slots:
                self._give_gpus(job, lease, verdict)
                with self._lock:
                    self._running += 1
                try:
                    raw, workdir, memory_rlimit = self._execute(nproc, job, timeout_s, hw)
                    # Judging reads the job's dumps and parses its snippet: host CPU the job controls,
                    # spent inside its slot so that it counts against the concurrency like the job.
                    snippet_path = f"{workdir}/{SNIPPET_NAME}"
                    self._judge(verdict, raw, request.code, snippet_path, timeout_s, hw, memory_rlimit, lease)
                finally:
                    with self._lock:
                        self._running -= 1
        finally:
            with self._lock:
                self._admitted -= 1
        if raw.memory_note:
            log.info("%s", raw.memory_note)
            if operator_notes is not None:
                operator_notes.append(raw.memory_note)
        return verdict

    def _give_gpus(self, job: dict[str, Any], lease: GpuLease, verdict: Verdict) -> None:
        """Export the lease to the job as CUDA_VISIBLE_DEVICES, and say so when it is not every GPU.

        A runner without GPUs changes nothing (its jobs' environment stays torchrun's, variable for
        variable).  A job given none on a GPU runner gets an empty value: CUDA then sees no device.
        """
        total = self.gpus.count
        if total == 0:
            return
        value = visible_devices(lease.indices, os.environ.get("CUDA_VISIBLE_DEVICES"))
        job["env"]["CUDA_VISIBLE_DEVICES"] = value
        if "CUDA_DEVICE_ORDER" in os.environ:
            # The runner's indices follow its own order; the job must number the devices the same way.
            job["env"]["CUDA_DEVICE_ORDER"] = os.environ["CUDA_DEVICE_ORDER"]
        if lease.waited_s >= 0.1:
            verdict.notes.append(f"the job waited {lease.waited_s:.1f} s for GPUs other jobs held")
        if not lease.indices:
            verdict.notes.append(
                f"the code names no GPU (cuda, nccl, DataParallel, device_ids...): the job ran without "
                f"one of this runner's {total} GPUs (CUDA_VISIBLE_DEVICES='')"
            )
        elif len(lease.indices) < total or self.gpus.share:
            listed = ",".join(str(i) for i in lease.indices)
            shared = ", shared with other jobs (--share-gpus)" if self.gpus.share else ""
            verdict.notes.append(
                f"ran on GPU {listed} of this runner's {total} (CUDA_VISIBLE_DEVICES={value}){shared}"
            )

    def cpu_ranks(self, nproc: int, job: dict[str, Any]) -> int:
        """How many ranks' CPU a job gets: its ranks, or the most a job may have when it starts its own.

        A python or dp job whose snippet starts worker processes (``mp.spawn``, a multiprocessing pool,
        DataLoader workers) is a multi-process job in all but name; held to one core, its workers would take
        longer than a bare run on the same host.  A plain substring test: a snippet that hides it only runs
        on one core.  The job's CPU weight stays that of every other job, so it still competes fairly.  Its
        memory limit is not scaled: workers forked from the warm rank share its pages, and fresh ones (a
        DDP model over subgroups under ``auto``) fit in one rank's default 4 GiB a few at a time.
        """
        if job["mode"] == Mode.DDP.value or STARTS_PROCESSES.search(str(job["code"])) is None:
            return nproc
        return max(nproc, self.config.max_nproc)

    def _execute(
        self, nproc: int, job: dict[str, Any], timeout_s: float, hw: Hardware
    ) -> tuple[JobRaw, str, str | None]:
        # A plain substring test is enough: a snippet that hides its torch import still works, it only
        # pays for the import itself.
        # A ddp job's supervisor hosts torchrun's agent store, which needs torch.
        needs_torch = "torch" in str(job["code"]) or job["mode"] == Mode.DDP.value
        light = not any(word in str(job["code"]) for word in NEEDS_COMPILER_STACK)
        sandbox = self.pool.acquire(nproc, needs_torch=needs_torch, light=light)
        try:
            # A warm sandbox's cgroup was sized for its capacity; the job gets its own rank count's limits.
            self.launcher.fit(sandbox, nproc, self.cpu_ranks(nproc, job))
            if not sandbox.isolated:
                job["env"].update(HOME=sandbox.workdir, TMPDIR=sandbox.workdir)
            memory_rlimit = memory_rlimit_for(hw.gpus, sandbox.cgroup is not None)
            job["limits"]["memory_rlimit"] = memory_rlimit
            raw = run_job(sandbox, job, timeout_s, self.config.output_cap_bytes, self.config.flood_bytes)
            return raw, sandbox.workdir, memory_rlimit
        finally:
            self.pool.release(sandbox)

    def _rank_env(self) -> dict[str, str]:
        return job_env()

    def _refusal(self, request: RunRequest, mode: Mode, timeout_s: float) -> str | None:
        if len(request.code.encode("utf-8", "surrogatepass")) > MAX_CODE_BYTES:
            return f"code is over {MAX_CODE_BYTES // 1024} KiB"
        if mode == Mode.DDP and not 1 <= request.nproc <= self.config.max_nproc:
            return f"nproc must be between 1 and {self.config.max_nproc} on this runner"
        if not 0 < timeout_s <= self.config.max_timeout_s:
            return f"timeout_s must be in (0, {self.config.max_timeout_s:g}] on this runner"
        if "\x00" in request.code:
            return "code contains a NUL character"
        try:
            request.code.encode("utf-8")
        except UnicodeEncodeError as exc:
            # A JSON string may carry a lone surrogate ("\ud800"): it is no text a file can hold.
            return f"code is not valid Unicode text: {exc.reason} at character {exc.start}"
        return None

    def _resolve_backend(
        self, mode: Mode, nproc: int, asked: str, hw: Hardware
    ) -> tuple[str | None, list[str]]:
        if mode != Mode.DDP:
            return None, []
        if asked != "auto":
            return asked, []
        if hw.gpus >= nproc and "nccl" in hardware.backends():
            return "nccl", [f"backend auto chose nccl: {nproc} ranks, {hw.gpus} GPUs"]
        return "gloo", [f"backend auto chose gloo: {nproc} ranks, {hw.gpus} GPUs"]

    def _judge(
        self,
        verdict: Verdict,
        raw: JobRaw,
        code: str,
        path: str,
        timeout_s: float,
        hw: Hardware,
        memory_rlimit: str | None,
        lease: GpuLease | None = None,
    ) -> None:
        verdict.elapsed_s = raw.elapsed_s
        calls = SnippetCalls(code)  # one parse of the snippet for every dump of this verdict
        verdict.ranks = [_rank_result(r, calls, path) for r in raw.ranks]
        failing = sorted(
            (r for r in raw.ranks if r.exited and not r.stopped_by_runner and _failed(r)),
            key=lambda r: r.exit_order if r.exit_order is not None else 1 << 30,
        )
        root = failing[0] if failing else None
        if root is not None:
            verdict.root_cause_rank = root.rank
        notes = verdict.notes

        if raw.flooded:
            verdict.status = Status.OUTPUT_LIMIT
            notes.append(f"output flood: the job was stopped after {self.config.flood_bytes} bytes of output")
        elif raw.oom_killed:
            verdict.status = Status.OOM
            notes.append("the sandbox's memory cgroup limit was reached: the kernel killed a process")
        elif root is not None:
            verdict.status = _status_of(root, hw)
            failure = _failure_text(root)
            if verdict.status == Status.UNSUPPORTED:
                notes.append(_needs_cuda(hw, verdict.nproc))
            elif verdict.status == Status.OOM and hw.gpus > 0 and is_cuda_oom(failure):
                indices = lease.indices if lease is not None else tuple(range(hw.gpus))
                # The device's figures from torch's own message; else from the host, after the job.
                notes.append(cuda_oom_note(failure, indices, hw.names, hardware.gpu_memory))
            elif verdict.status == Status.OOM:
                notes.append(_memory_note(self.config.memory_mb, memory_rlimit))
            elif 0 < hw.gpus < verdict.nproc and asks_missing_device(failure):
                # Written for a host with a GPU per rank: it fails here as under a bare torchrun, and the
                # runner cannot say what it would print there.
                verdict.status = Status.UNSUPPORTED
                notes.append(more_ranks_than_gpus(hw.gpus, verdict.nproc, verdict.backend))
            elif root.signal == _SIGXCPU:
                notes.append("CPU time limit reached")
        elif raw.timed_out:
            verdict.status = Status.TIMEOUT
        elif raw.supervisor_lost or not all(r.exited for r in raw.ranks):
            verdict.status = Status.CRASHED
            notes.append("the sandbox stopped before every rank reported its exit")
        else:
            verdict.status = Status.OK

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
        _explain(verdict, raw, root, code, hw)
        if any(_ran_out_of_files(r) for r in raw.ranks):
            notes.append(
                f"open files: each process of a job may hold {self.launcher.files_per_process} descriptors "
                "(RLIMIT_NOFILE; the host's open-file table is shared by every job)"
            )
        if any(r.truncated for r in verdict.ranks):
            notes.append(f"output over {self.config.output_cap_bytes} bytes per stream was dropped")
        if not verdict.sandbox.isolated:
            notes.append("ran WITHOUT a sandbox (--unsafe-no-sandbox)")


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


def memory_rlimit_for(gpus: int, has_cgroup: bool) -> str | None:
    """Which per-rank memory rlimit a job gets: ``"as"``, ``"data"`` or None (the cgroup alone).

    RLIMIT_AS is the tightest bound, but CUDA reserves tens of GiB of virtual address space when it
    initialises, so on a runner with GPUs it would make every CUDA snippet fail: there the sandbox's memory
    cgroup bounds memory, or, where the host has none, RLIMIT_DATA (which does not count those
    reservations).
    """
    if gpus == 0:
        return "as"
    return None if has_cgroup else "data"


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


def _needs_cuda(hw: Hardware, nproc: int) -> str:
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


def _static_notes(code: str, mode: Mode, nproc: int, hw: Hardware) -> list[str]:
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
