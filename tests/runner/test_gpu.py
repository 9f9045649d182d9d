"""GPU paths, on a runner whose torch sees CUDA; every test here is skipped on a CPU-only runner.

The CPU-only counterparts (0 GPUs, DataParallel pass-through, "needs CUDA") are marked ``cpu_only``; the
allocator and the verdict texts are tested with made-up GPU counts in test_gpu_allocation.py.  Every test
here is marked ``gpu``: `make gpu-check` (benchmarks/gpu_check.sh) runs them on a GPU host.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
import torch

from runner import hardware
from runner.gpus import more_ranks_than_gpus
from runner.service import RunnerService, memory_rlimit_for
from runner.verdict import Status, Verdict
from tests.runner.conftest import RUNNER_GPUS, needs_cuda, run

pytestmark = [pytest.mark.slow, pytest.mark.gpu, needs_cuda]

NCCL_STEP = """
import os, torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
dist.init_process_group("nccl")
model = DDP(torch.nn.Linear(4, 1).cuda(), device_ids=[torch.cuda.current_device()])
model(torch.ones(2, 4).cuda()).sum().backward()
print(dist.get_backend(), dist.get_world_size())
dist.destroy_process_group()
"""


def test_hardware_reports_the_gpus(service: RunnerService) -> None:
    verdict = run(service, "print('hi')\n")
    assert verdict.hardware.gpus == torch.cuda.device_count() == RUNNER_GPUS
    assert verdict.hardware.names == [torch.cuda.get_device_name(i) for i in range(RUNNER_GPUS)]
    assert all(verdict.hardware.names)
    assert verdict.hardware.cuda == torch.version.cuda is not None
    assert service.health()["hardware"]["gpus"] == RUNNER_GPUS
    assert "nccl" in service.health()["backends"]


def test_snippet_calling_cuda_runs_on_the_gpu(service: RunnerService) -> None:
    code = """
    import torch
    x = torch.ones(4).cuda() * 2
    print(x.device.type, x.sum().item(), torch.cuda.device_count())
    """
    verdict = run(service, code, timeout_s=120)
    assert verdict.status == Status.OK, verdict.to_dict()
    assert verdict.ranks[0].stdout == f"cuda 8.0 {RUNNER_GPUS}\n"


def test_dataparallel_on_a_real_gpu(service: RunnerService) -> None:
    code = """
    import torch
    model = torch.nn.DataParallel(torch.nn.Linear(4, 2).cuda())
    out = model(torch.ones(6, 4).cuda())
    print(out.shape, out.device.type, model.device_ids == list(range(torch.cuda.device_count())))
    """
    verdict = run(service, code, mode="dp", timeout_s=120)
    assert verdict.status == Status.OK, verdict.to_dict()
    assert verdict.ranks[0].stdout == "torch.Size([6, 2]) cuda True\n"
    assert any(note.startswith(f"DataParallel saw {RUNNER_GPUS} GPUs") for note in verdict.notes)


def test_one_gpu_nccl_ddp_job(service: RunnerService) -> None:
    code = """
    import os, torch, torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    assert torch.cuda.current_device() == int(os.environ["LOCAL_RANK"])
    model = DDP(torch.nn.Linear(4, 1).cuda(), device_ids=[torch.cuda.current_device()])
    model(torch.ones(2, 4).cuda()).sum().backward()
    t = torch.ones(1).cuda()
    dist.all_reduce(t)
    print(dist.get_backend(), t.item())
    """
    verdict = run(service, code, mode="ddp", nproc=1, init_process_group=True, timeout_s=180)
    assert verdict.status == Status.OK, verdict.to_dict()
    assert verdict.backend == "nccl"
    assert verdict.ranks[0].stdout == "nccl 1.0\n"


def test_gpu_jobs_have_no_address_space_limit(service: RunnerService) -> None:
    # CUDA reserves far more virtual memory than any per-rank RLIMIT_AS would allow.
    code = "import resource\nprint(resource.getrlimit(resource.RLIMIT_AS)[0] == resource.RLIM_INFINITY)\n"
    verdict = run(service, code)
    assert verdict.ranks[0].stdout == "True\n", verdict.to_dict()
    assert memory_rlimit_for(RUNNER_GPUS, has_cgroup=True) is None
    assert memory_rlimit_for(RUNNER_GPUS, has_cgroup=False) == "data"


def _served_warm(service: RunnerService, code: str, **kwargs: Any) -> Verdict:
    """Run a job on a full pool and check that a warm sandbox served it."""
    assert service.pool.wait_full(180)
    before = service.pool.state()["served_warm"]
    verdict = run(service, code, **kwargs)
    assert service.pool.state()["served_warm"] == before + 1, "the job was not served by a warm sandbox"
    return verdict


def test_nccl_ddp_dataparallel_and_cuda_python_are_served_warm(service: RunnerService) -> None:
    # Section 1 of issue 23 (CUDA is not initialised before the fork) makes these work warm; here: that
    # the verdicts on a GPU come from the warm pool and are right.
    verdict = _served_warm(service, NCCL_STEP, mode="ddp", nproc=1, timeout_s=180)
    assert verdict.status == Status.OK, verdict.to_dict()
    assert verdict.backend == "nccl" and verdict.ranks[0].stdout == "nccl 1\n"
    dp = (
        "import torch\nm = torch.nn.DataParallel(torch.nn.Linear(4, 2).cuda())\n"
        "print(m(torch.ones(8, 4).cuda()).shape)\n"
    )
    verdict = _served_warm(service, dp, mode="dp", timeout_s=180)
    assert verdict.status == Status.OK and verdict.ranks[0].stdout == "torch.Size([8, 2])\n", (
        verdict.to_dict()
    )
    matmul = "import torch\nx = torch.ones(256, 256, device='cuda')\nprint((x @ x)[0, 0].item())\n"
    verdict = _served_warm(service, matmul, timeout_s=180)
    assert verdict.status == Status.OK and verdict.ranks[0].stdout == "256.0\n", verdict.to_dict()


@pytest.mark.skipif(RUNNER_GPUS >= 8, reason="one more rank than GPUs is over the runner's 8 ranks")
def test_more_ranks_than_gpus_is_unsupported_with_the_hosts_count(service: RunnerService) -> None:
    nproc = RUNNER_GPUS + 1
    # backend auto chooses gloo for more ranks than GPUs; the snippet binds each rank to its GPU, as
    # torchrun scripts do, and rank RUNNER_GPUS has none: the same failure as a bare torchrun here.
    code = """
    import os, torch
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    print(torch.ones(1).cuda().item())
    """
    verdict = run(service, code, mode="ddp", nproc=nproc, timeout_s=180)
    assert verdict.status == Status.UNSUPPORTED, verdict.to_dict()
    assert verdict.root_cause_rank == RUNNER_GPUS
    assert more_ranks_than_gpus(RUNNER_GPUS, nproc, "gloo") in verdict.notes
    # Asked for NCCL: refused before anything runs, with the same explanation.
    verdict = run(service, NCCL_STEP, mode="ddp", nproc=nproc, backend="nccl")
    assert verdict.status == Status.UNSUPPORTED and verdict.ranks == []
    assert verdict.notes[-1] == more_ranks_than_gpus(RUNNER_GPUS, nproc, "nccl")


def test_concurrent_gpu_jobs_never_share_a_device(service: RunnerService) -> None:
    # A holds every GPU (DataParallel sees them all) until its deadline; B, a CUDA job, waits for A.
    results: dict[str, Verdict] = {}
    hold = """
    import os, time, torch
    x = [torch.ones(1, device=f"cuda:{i}") for i in range(torch.cuda.device_count())]
    print(os.environ["CUDA_VISIBLE_DEVICES"], time.time(), flush=True)
    time.sleep(60)
    """
    a = threading.Thread(target=lambda: results.setdefault("a", run(service, hold, mode="dp", timeout_s=20)))
    a.start()
    for _ in range(3600):  # 180 s of polls: a hang guard, no speed bound
        if service.gpus.state()["free"] == 0:
            break
        time.sleep(0.05)
    assert service.gpus.state()["free"] == 0, "job A never took the GPUs"
    show = (
        "import os, time, torch\ntorch.ones(1).cuda()\n"
        "print(os.environ['CUDA_VISIBLE_DEVICES'], time.time())\n"
    )
    results["b"] = run(service, show, timeout_s=180)
    a.join()
    every = ",".join(str(i) for i in range(RUNNER_GPUS))
    a_devices, a_started = results["a"].ranks[0].stdout.split()
    b_devices, b_started = results["b"].ranks[0].stdout.split()
    assert results["a"].status == Status.TIMEOUT, results["a"].to_dict()
    assert results["b"].status == Status.OK, results["b"].to_dict()
    assert a_devices == b_devices == every
    # B ran after A, and only once A was gone: it waited in line for the devices A held.
    assert float(b_started) > float(a_started)
    assert any(n.startswith("the job waited") and "for GPUs" in n for n in results["b"].notes)
    assert service.gpus.state()["free"] == RUNNER_GPUS


def _compute_pids() -> set[str]:
    rows = hardware.nvidia_smi(["--query-compute-apps=pid"])
    return {row[0] for row in rows if row}


@pytest.mark.skipif(hardware.nvidia_smi(["--query-gpu=uuid"]) == [], reason="needs nvidia-smi")
def test_a_jobs_gpu_memory_is_released_when_it_ends(service: RunnerService) -> None:
    before = _compute_pids()
    free_before = hardware.gpu_memory()
    assert sorted(free_before) == list(range(RUNNER_GPUS)), "nvidia-smi's GPUs do not match torch's"
    grab = """
    import time, torch
    x = torch.empty(2 * 1024**3, dtype=torch.uint8, device="cuda")  # 2 GiB, held
    print("holding", flush=True)
    time.sleep(60)
    """
    # Killed at its deadline while holding 2 GiB: the sandbox's processes are gone, and so is their memory.
    verdict = run(service, grab, timeout_s=15)
    assert verdict.status == Status.TIMEOUT and verdict.ranks[0].stdout == "holding\n", verdict.to_dict()
    deadline = time.monotonic() + 30  # the driver frees a dead process's memory shortly after its exit
    while (_compute_pids() - before) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _compute_pids() - before == set(), "a process of the finished job still holds the GPU"
    free_after = hardware.gpu_memory()
    for index, (_, free) in free_before.items():
        assert free_after[index][1] > free - 2**30, (index, free, free_after[index])


def test_a_cuda_oom_is_status_oom_with_the_devices_memory(service: RunnerService) -> None:
    code = """
    import torch
    total = torch.cuda.get_device_properties(0).total_memory
    torch.empty(total * 2, dtype=torch.uint8, device="cuda")
    """
    verdict = run(service, code, timeout_s=180)
    assert verdict.status == Status.OOM, verdict.to_dict()
    assert verdict.ranks[0].exception is not None
    assert verdict.ranks[0].exception.type == "OutOfMemoryError"
    name = hardware.probe().names[0]
    total_gib = torch.cuda.get_device_properties(0).total_memory / 2**30
    note = next(n for n in verdict.notes if n.startswith(f"CUDA out of memory on GPU 0 ({name}): it has "))
    # torch's figure is cudaMemGetInfo's total, which may differ from the properties' in the last digit.
    said = float(note.split("it has ")[1].split(" GiB in total")[0])
    assert abs(said - total_gib) < 0.1, note
    assert "was free when the job asked for" in note, note
