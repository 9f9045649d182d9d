"""GPU paths, on a runner whose torch sees CUDA; every test here is skipped on a CPU-only runner.

The CPU-only counterparts (0 GPUs, DataParallel pass-through, "needs CUDA") are marked ``cpu_only``.
"""

from __future__ import annotations

import pytest
import torch

from runner.service import memory_rlimit_for
from runner.verdict import Status
from tests.runner.conftest import RUNNER_GPUS, needs_cuda, run

pytestmark = [pytest.mark.slow, needs_cuda]


def test_hardware_reports_the_gpus(service):
    verdict = run(service, "print('hi')\n")
    assert verdict.hardware.gpus == torch.cuda.device_count() == RUNNER_GPUS
    assert verdict.hardware.names == [torch.cuda.get_device_name(i) for i in range(RUNNER_GPUS)]
    assert all(verdict.hardware.names)
    assert verdict.hardware.cuda == torch.version.cuda is not None
    assert service.health()["hardware"]["gpus"] == RUNNER_GPUS
    assert "nccl" in service.health()["backends"]


def test_snippet_calling_cuda_runs_on_the_gpu(service):
    code = """
    import torch
    x = torch.ones(4).cuda() * 2
    print(x.device.type, x.sum().item(), torch.cuda.device_count())
    """
    verdict = run(service, code, timeout_s=120)
    assert verdict.status == Status.OK, verdict.to_dict()
    assert verdict.ranks[0].stdout == f"cuda 8.0 {RUNNER_GPUS}\n"


def test_dataparallel_on_a_real_gpu(service):
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


def test_one_gpu_nccl_ddp_job(service):
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


def test_gpu_jobs_have_no_address_space_limit(service):
    # CUDA reserves far more virtual memory than any per-rank RLIMIT_AS would allow.
    code = "import resource\nprint(resource.getrlimit(resource.RLIMIT_AS)[0] == resource.RLIM_INFINITY)\n"
    verdict = run(service, code)
    assert verdict.ranks[0].stdout == "True\n", verdict.to_dict()
    assert memory_rlimit_for(RUNNER_GPUS, has_cgroup=True) is None
    assert memory_rlimit_for(RUNNER_GPUS, has_cgroup=False) == "data"
