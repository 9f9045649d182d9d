"""Issue 23, sections 2-3, on a machine without GPUs: the GPU allocator with made-up device counts, the
verdicts of more ranks than GPUs and of a CUDA out-of-memory, and the devices a real sandboxed job is given.

The same paths on real GPUs are in test_gpu.py (run by `make gpu-check` on a GPU host).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from runner import hardware
from runner.config import RunnerConfig
from runner.executor import JobRaw, RankRaw, StreamCapture
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
from runner.service import RunnerService, RunRequest
from runner.verdict import Hardware, Mode, SandboxInfo, Status, Verdict
from tests.runner.conftest import TEST_MEMORY_MB, cpu_only, run

# A real torch.OutOfMemoryError as a training script printed it (torch 2.x, a 16 GB T4).
REAL_CUDA_OOM = (
    "CUDA out of memory. Tried to allocate 1.95 GiB. GPU 0 has a total capacity of 14.57 GiB of which "
    "1.58 GiB is free. Process 2493055 has 12.02 GiB memory in use. Including non-PyTorch memory, this "
    "process has 966.00 MiB memory in use. Of the allocated memory 734.07 MiB is allocated by PyTorch, and "
    "33.93 MiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try "
    "setting PYTORCH_ALLOC_CONF=expandable_segments:True to avoid fragmentation."
)
H100 = "NVIDIA H100 80GB HBM3"


def _wait_for(condition: Callable[[], bool]) -> None:
    """Poll until ``condition`` holds; the generous cap only turns a hang into a failure."""
    for _ in range(6000):  # 60 s of polls: turns a hang into a failure, no speed bound
        if condition():
            return
        time.sleep(0.01)
    assert condition(), "condition never held"


def _in_thread(target: Callable[[], GpuLease]) -> tuple[threading.Thread, list[GpuLease]]:
    got: list[GpuLease] = []
    thread = threading.Thread(target=lambda: got.append(target()))
    thread.start()
    return thread, got


# --- the allocator -------------------------------------------------------------------------------------


def test_concurrent_jobs_get_disjoint_gpus() -> None:
    gpus = GpuAllocator(8)
    held: list[GpuLease] = []
    lock = threading.Lock()
    all_in = threading.Barrier(4)

    def job(n: int) -> None:
        lease = gpus.acquire(n)
        with lock:
            held.append(lease)
        all_in.wait()  # every job holds its devices at the same time

    threads = [threading.Thread(target=job, args=(n,)) for n in (1, 2, 2, 3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    taken = [i for lease in held for i in lease.indices]
    assert sorted(taken) == list(range(8))  # 8 devices for 1 + 2 + 2 + 3 asked: none given twice
    assert gpus.state()["free"] == 0
    for lease in held:
        gpus.release(lease)
    assert gpus.state() == {"count": 8, "free": 8, "waiting": 0, "shared": False}


def test_a_job_waits_in_line_until_enough_gpus_are_free() -> None:
    gpus = GpuAllocator(2)
    first = gpus.acquire(1)
    # B needs both: it waits although one is free.  C needs one, which is free, but is behind B in line.
    b_thread, b_got = _in_thread(lambda: gpus.acquire(2))
    _wait_for(lambda: gpus.state()["waiting"] == 1)
    c_thread, c_got = _in_thread(lambda: gpus.acquire(1))
    _wait_for(lambda: gpus.state()["waiting"] == 2)
    assert b_got == [] and c_got == []
    gpus.release(first)
    b_thread.join()
    assert b_got[0].indices == (0, 1)
    assert c_got == [] and gpus.state()["waiting"] == 1  # a big job is not starved by small ones
    gpus.release(b_got[0])
    c_thread.join()
    assert c_got[0].indices == (0,)
    assert c_got[0].waited_s > 0


def test_gpus_are_released_however_the_job_ends() -> None:
    gpus = GpuAllocator(2)
    with pytest.raises(TimeoutError), gpus.lease(2) as lease:
        assert lease.indices == (0, 1) and gpus.state()["free"] == 0
        raise TimeoutError("the job's deadline")
    assert gpus.state()["free"] == 2
    with pytest.raises(KeyboardInterrupt), gpus.lease(1):
        raise KeyboardInterrupt
    assert gpus.acquire(2).indices == (0, 1)


def test_sharing_gives_every_job_its_gpus_at_once() -> None:
    gpus = GpuAllocator(2, share=True)
    assert gpus.acquire(2).indices == gpus.acquire(2).indices == (0, 1)
    assert gpus.acquire(1).indices == (0,)
    assert gpus.state() == {"count": 2, "free": 2, "waiting": 0, "shared": True}


def test_impossible_requests_are_refused_not_queued() -> None:
    gpus = GpuAllocator(2)
    with pytest.raises(ValueError, match="0 to 2 GPUs on this runner, not 3"):
        gpus.acquire(3)
    with pytest.raises(ValueError, match="not -1"):
        gpus.acquire(-1)
    with pytest.raises(ValueError, match=">= 0"):
        GpuAllocator(-1)
    lease = gpus.acquire(1)
    gpus.release(lease)
    with pytest.raises(ValueError, match="released twice"):
        gpus.release(lease)
    assert GpuAllocator(0).acquire(0) == GpuLease((), 0.0)


@pytest.mark.parametrize(
    ("mode", "nproc", "backend", "code", "host", "expected"),
    [
        ("python", 1, None, "import torch\nprint(torch.ones(2).cuda())", 0, 0),
        ("python", 1, None, "import torch\nprint(torch.ones(2).cuda())", 4, 4),
        ("python", 1, None, "print(sum(range(10)))", 4, 0),
        ("dp", 1, None, "print('no device named')", 4, 4),
        ("ddp", 2, "nccl", "import torch.distributed as dist\ndist.barrier()", 4, 2),
        ("ddp", 2, "gloo", "model = Net().to(rank)", 4, 2),
        ("ddp", 4, "gloo", "torch.cuda.set_device(rank)", 2, 2),
        ("ddp", 2, "gloo", "dist.all_reduce(torch.ones(1))", 4, 0),
        ("python", 1, None, "print(torch.accelerator.device_count())", 2, 2),
    ],
)
def test_how_many_gpus_a_job_is_given(
    mode: str, nproc: int, backend: str | None, code: str, host: int, expected: int
) -> None:
    assert gpus_needed(mode, nproc, backend, code, host) == expected


def test_visible_devices_follow_the_runners_own_list() -> None:
    assert visible_devices((1, 3), None) == "1,3"
    assert visible_devices((), None) == ""
    # A runner started with CUDA_VISIBLE_DEVICES=4,5,6,7 calls those 0..3; its jobs start from an empty
    # environment, so index 1 must reach the job as device 5.
    assert visible_devices((1, 3), "4,5,6,7") == "5,7"
    assert visible_devices((0,), "GPU-8ed9a5e1-0f6c, GPU-1a2b3c4d-9e8f") == "GPU-8ed9a5e1-0f6c"


# --- verdict texts ---------------------------------------------------------------------------------------


def test_a_real_cuda_oom_text_is_recognised_with_the_devices_figures() -> None:
    text = f"OutOfMemoryError: {REAL_CUDA_OOM}"
    assert is_cuda_oom(text)
    assert not is_cuda_oom("RuntimeError: DefaultCPUAllocator: can't allocate memory: you tried to allocate")
    # The job's GPU 0 is the runner's GPU 3: the note names the runner's device.
    note = cuda_oom_note(text, (3,), ["A", "B", "C", H100])
    assert note == (
        f"CUDA out of memory on GPU 3 ({H100}): it has 14.57 GiB in total, 1.58 GiB was free when the job "
        "asked for 1.95 GiB more"
    )
    # torch 2.1's spelling, and a message without figures (the host's are read then, and only then).
    old = REAL_CUDA_OOM.replace("capacity", "capacty")
    assert "14.57 GiB in total" in cuda_oom_note(old, (0,), [H100], memory=lambda: pytest.fail("read"))
    figures = {1: (80 * 2**30, 2**29)}
    assert cuda_oom_note("CUDA error: out of memory", (1,), ["x", H100], lambda: figures) == (
        f"CUDA out of memory on GPU 1 ({H100}): it has 80.00 GiB in total, 0.50 GiB free after the job ended"
    )


def test_the_more_ranks_than_gpus_note_says_what_torchrun_would_do() -> None:
    assert asks_missing_device("torch.AcceleratorError: CUDA error: invalid device ordinal\nCUDA kernel")
    assert asks_missing_device("ncclInvalidUsage: ... Duplicate GPU detected : rank 1 and rank 0 both on")
    assert not asks_missing_device("RuntimeError: mat1 and mat2 shapes cannot be multiplied")
    note = more_ranks_than_gpus(1, 2, "gloo")
    assert note == (
        "this runner has 1 GPU and the job asked for 2 ranks, one GPU each: under a bare "
        "`torchrun --nproc_per_node=2` on this host, rank 1's torch.cuda.set_device(1) fails with "
        "'CUDA error: invalid device ordinal'; the snippet needs a host with 2 GPUs"
    )
    assert "Duplicate GPU detected" in more_ranks_than_gpus(2, 4, "nccl")


def _rank(rank: int, exception: dict[str, object] | None = None, exit_code: int = 0) -> RankRaw:
    raw = RankRaw(rank, StreamCapture(1024), StreamCapture(1024), StreamCapture(1024))
    raw.exited, raw.exit_code, raw.exit_order = True, exit_code, rank
    raw.exception = exception
    return raw


def _judged(hw: Hardware, nproc: int, ranks: list[RankRaw], lease: GpuLease | None) -> Verdict:
    """The service's judgement of made-up raw results on made-up hardware (no sandbox runs)."""
    svc = RunnerService(RunnerConfig(unsafe_no_sandbox=True), gpus=GpuAllocator(hw.gpus))
    verdict = Verdict(Status.OK, Mode.DDP, nproc, "gloo", 0.0, hw, SandboxInfo("none", False))
    raw = JobRaw(ranks=ranks, elapsed_s=1.0)
    svc._judge(verdict, raw, "import torch\n", "/tmp/main.py", 30, hw, None, lease)
    return verdict


def test_two_ranks_on_one_gpu_are_unsupported_with_the_hosts_count() -> None:
    # What torchrun --nproc_per_node=2 does on a 1-GPU host: rank 1's set_device(1) has no device.
    hw = Hardware(gpus=1, names=[H100], torch="2.13.0", cuda="13.0")
    error = {"type": "AcceleratorError", "message": "CUDA error: invalid device ordinal", "line": 4}
    verdict = _judged(hw, 2, [_rank(0), _rank(1, error, exit_code=1)], GpuLease((0,), 0.0))
    assert verdict.status == Status.UNSUPPORTED, verdict.notes
    assert verdict.root_cause_rank == 1
    assert more_ranks_than_gpus(1, 2, "gloo") in verdict.notes
    # With a GPU per rank the same error is the snippet's own: an ordinary error.
    hw2 = Hardware(gpus=2, names=[H100] * 2, torch="2.13.0", cuda="13.0")
    assert _judged(hw2, 2, [_rank(0), _rank(1, error, 1)], GpuLease((0, 1), 0.0)).status == Status.ERROR


def test_a_cuda_oom_is_status_oom_with_the_devices_memory() -> None:
    hw = Hardware(gpus=4, names=["A", "B", "C", H100], torch="2.13.0", cuda="13.0")
    error = {"type": "OutOfMemoryError", "message": REAL_CUDA_OOM, "line": 3}
    verdict = _judged(hw, 1, [_rank(0, error, exit_code=1)], GpuLease((3,), 0.0))
    assert verdict.status == Status.OOM
    assert any(n.startswith(f"CUDA out of memory on GPU 3 ({H100}): it has 14.57 GiB") for n in verdict.notes)
    assert not any(n.startswith("memory limit:") for n in verdict.notes)  # not the host's memory


def test_nccl_with_more_ranks_than_gpus_is_refused_before_running(monkeypatch: pytest.MonkeyPatch) -> None:
    # The host's probe says 1 GPU; nothing is started (the service is not even started).
    one_gpu = Hardware(gpus=1, names=[H100], torch="2.13.0", cuda="13.0")
    monkeypatch.setattr(hardware, "probe", lambda: one_gpu)
    monkeypatch.setattr(hardware, "backends", lambda: ["gloo", "nccl"])
    svc = RunnerService(RunnerConfig(unsafe_no_sandbox=True), gpus=GpuAllocator(1))
    verdict = svc.run(RunRequest(code="print(1)\n", mode=Mode.DDP, nproc=2, backend="nccl"))
    assert verdict.status == Status.UNSUPPORTED and verdict.ranks == []
    assert verdict.notes == [more_ranks_than_gpus(1, 2, "nccl")]
    assert "this runner has 1 GPU and the job asked for 2 ranks" in verdict.notes[0]
    assert svc.gpus.state()["free"] == 1


def test_the_operator_can_let_jobs_share_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    from runner.cli import build_parser

    assert build_parser().parse_args(["serve", "--share-gpus"]).share_gpus is True
    assert build_parser().parse_args(["serve"]).share_gpus is False
    two_gpus = Hardware(gpus=2, names=[H100] * 2, torch="2.13.0", cuda="13.0")
    monkeypatch.setattr(hardware, "probe", lambda: two_gpus)
    shared = RunnerService(RunnerConfig(unsafe_no_sandbox=True, share_gpus=True))
    assert shared.gpus.count == 2 and shared.gpus.share
    assert not RunnerService(RunnerConfig(unsafe_no_sandbox=True)).gpus.share
    # What a job is told: its devices, and that other jobs may be on them.
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    job: dict[str, object] = {"env": {}}
    verdict = Verdict(Status.OK, Mode.DDP, 1, "nccl", 0.0, two_gpus, SandboxInfo("none", False))
    shared._give_gpus(job, shared.gpus.acquire(1), verdict)
    assert job["env"] == {"CUDA_VISIBLE_DEVICES": "0"}
    assert verdict.notes == [
        "ran on GPU 0 of this runner's 2 (CUDA_VISIBLE_DEVICES=0), shared with other jobs (--share-gpus)"
    ]


# --- real sandboxed jobs with a made-up GPU count ---------------------------------------------------------


@pytest.fixture(scope="module")
def two_gpu_service() -> Iterator[RunnerService]:
    """A real sandboxed service whose allocator believes the host has 2 GPUs (jobs run on the CPU)."""
    svc = RunnerService(
        RunnerConfig(memory_mb=TEST_MEMORY_MB, pool={1: 2}, max_concurrent_jobs=4), gpus=GpuAllocator(2)
    )
    svc.start()
    yield svc
    svc.close()


SHOW_DEVICES = "import os  # a cuda job\nprint(repr(os.environ.get('CUDA_VISIBLE_DEVICES')))\n"


@cpu_only
@pytest.mark.slow
def test_sandboxed_jobs_get_disjoint_devices_queue_and_release_them(two_gpu_service: RunnerService) -> None:
    svc = two_gpu_service
    assert svc.gpus.count == 2 and hardware.probe().gpus == 0
    # A job that names no GPU gets none.
    plain = run(svc, "import os\nprint({k: v for k, v in os.environ.items() if k.endswith('_DEVICES')})\n")
    assert plain.ranks[0].stdout == "{'CUDA_VISIBLE_DEVICES': ''}\n", plain.to_dict()
    assert "the job ran without one of this runner's 2 GPUs (CUDA_VISIBLE_DEVICES='')" in plain.notes[-1]
    # A: one rank, holds device 0 until its deadline.
    results: dict[str, Verdict] = {}
    holder = "import os, time\nprint(os.environ['CUDA_VISIBLE_DEVICES'], flush=True)\ntime.sleep(60)\n"
    a = threading.Thread(
        target=lambda: results.setdefault("a", run(svc, holder, mode="ddp", nproc=1, timeout_s=6))
    )
    a.start()
    _wait_for(lambda: svc.gpus.state()["free"] == 1)
    # B, while A runs: the other device.  C wants both: it waits for A.
    results["b"] = run(svc, SHOW_DEVICES, mode="ddp", nproc=1)
    c = threading.Thread(target=lambda: results.setdefault("c", run(svc, SHOW_DEVICES, timeout_s=30)))
    c.start()
    _wait_for(lambda: svc.gpus.state()["waiting"] == 1)
    assert "c" not in results
    a.join()
    c.join()
    assert results["a"].status == Status.TIMEOUT, results["a"].to_dict()
    assert results["a"].ranks[0].stdout == "0\n"
    assert results["b"].ranks[0].stdout == "'1'\n", results["b"].to_dict()
    assert "ran on GPU 1 of this runner's 2 (CUDA_VISIBLE_DEVICES=1)" in results["b"].notes
    assert results["c"].status == Status.OK and results["c"].ranks[0].stdout == "'0,1'\n"
    assert any(n.startswith("the job waited") and "for GPUs" in n for n in results["c"].notes)
    assert svc.gpus.state() == {"count": 2, "free": 2, "waiting": 0, "shared": False}


def test_device_memory_is_matched_to_torchs_numbering_by_uuid(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # nvidia-smi lists GPUs in PCI order; torch (fastest first) may number them otherwise.
    smi = tmp_path / "nvidia-smi"
    smi.write_text(
        "#!/bin/sh\n"
        'case "$1" in --query-gpu=uuid,memory.total,memory.free)\n'
        "  echo 'GPU-aaaa, 81559, 1024'\n  echo 'GPU-bbbb, 40960, 40000' ;;\nesac\n"
    )
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.setattr(hardware, "gpu_uuids", lambda: ["GPU-bbbb", "GPU-aaaa"])
    assert hardware.gpu_memory() == {0: (40960 * 2**20, 40000 * 2**20), 1: (81559 * 2**20, 1024 * 2**20)}
    # A torch that gives no UUIDs: nvidia-smi's order, if the counts agree; nothing if they do not.
    monkeypatch.setattr(hardware, "gpu_uuids", lambda: [None, None])
    assert hardware.gpu_memory()[0] == (81559 * 2**20, 1024 * 2**20)
    monkeypatch.setattr(hardware, "gpu_uuids", lambda: [None])
    assert hardware.gpu_memory() == {}
