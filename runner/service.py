"""The runner's use case: run one snippet in a fresh sandbox, then have runner/judge.py judge the outcome."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import threading
from dataclasses import dataclass
from typing import Any

from runner import hardware
from runner.analysis import observes_string_hashes, parse_snippet
from runner.config import MAX_CODE_BYTES, RunnerConfig
from runner.executor import JobRaw, run_job
from runner.gpus import (
    GpuAllocator,
    GpuLease,
    gpus_needed,
    visible_devices,
)
from runner.inside.zygote import may_start_interpreters
from runner.judge import JobFacts, JudgeLimits, judge, needs_cuda, static_notes
from runner.pool import WarmPool
from runner.sandbox import SandboxLauncher, job_env
from runner.verdict import (
    Hardware,
    Mode,
    SandboxInfo,
    Status,
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
MASTER_PORT = 29500

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

    def load(self) -> tuple[int, int]:
        """Jobs running now, and jobs admitted that wait for a slot or GPUs (the metrics' gauges)."""
        with self._lock:
            return self._running, max(0, self._admitted - self._running)

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
        verdict = self._new_verdict(mode, nproc, backend, hw, notes)
        refusal = self._refusal(request, mode, timeout_s)
        if refusal:
            verdict.status = Status.REJECTED
            verdict.notes.append(refusal)
            return verdict
        if backend == "nccl" and hw.gpus < nproc:
            verdict.status = Status.UNSUPPORTED
            verdict.notes.append(needs_cuda(hw, nproc))
            return verdict
        need = gpus_needed(mode.value, nproc, backend, request.code, self.gpus.count)
        verdict.notes += static_notes(request.code, mode, nproc, hw)
        if mode != Mode.DDP and request.nproc != 1:
            verdict.notes.append(f"mode {mode.value} runs one process: nproc={request.nproc} was ignored")
        fresh = observes_string_hashes(parse_snippet(request.code))
        if fresh and ((mode == Mode.DDP and nproc > 1) or may_start_interpreters(request.code)):
            verdict.notes.append(FRESH_NOTE)
        job = self._job_for(request, mode, nproc, backend, fresh, timeout_s)
        raw = self._run_admitted(verdict, job, need, request.code, timeout_s, hw)
        if raw.memory_note:
            log.info("%s", raw.memory_note)
            if operator_notes is not None:
                operator_notes.append(raw.memory_note)
        return verdict

    def _new_verdict(
        self, mode: Mode, nproc: int, backend: str | None, hw: Hardware, notes: list[str]
    ) -> Verdict:
        """The verdict before the job runs: OK, with the backend's notes (and a test runner's warning)."""
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
        return verdict

    def _job_for(
        self, request: RunRequest, mode: Mode, nproc: int, backend: str | None, fresh: bool, timeout_s: float
    ) -> dict[str, Any]:
        """The job the sandbox's supervisor reads (runner/inside/supervisor.py): code, shape, env, limits."""
        return {
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

    def _run_admitted(
        self, verdict: Verdict, job: dict[str, Any], need: int, code: str, timeout_s: float, hw: Hardware
    ) -> JobRaw:
        """Run the job once it has its GPUs and a slot, and judge it inside the slot; its raw outcome."""
        nproc = int(job["nproc"])
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
                    self._judge(verdict, raw, code, snippet_path, timeout_s, hw, memory_rlimit, lease)
                finally:
                    with self._lock:
                        self._running -= 1
        finally:
            with self._lock:
                self._admitted -= 1
        return raw

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
        """Judge a finished job into ``verdict`` (runner/judge.py), with this runner's limits."""
        limits = JudgeLimits(
            flood_bytes=self.config.flood_bytes,
            memory_mb=self.config.memory_mb,
            output_cap_bytes=self.config.output_cap_bytes,
            files_per_process=self.launcher.files_per_process,
        )
        judge(verdict, raw, JobFacts(code, path, timeout_s, hw, memory_rlimit, lease), limits)


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
