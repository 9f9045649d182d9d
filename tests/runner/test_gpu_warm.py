"""CUDA jobs on warm sandboxes, on a real GPU (skipped on CPU-only runners).

Before the warm-up kept its CUDA queries off the runtime (``bootstrap.cuda_runtime_untouched``), every
CUDA job that landed on a warm sandbox failed with "Cannot re-initialize CUDA in forked subprocess"; these
tests wait for the pool to be full before each job, so each one is served warm, and check the pool says so.
``test_cuda_fork_safety.py`` checks the rule itself on CPU.
"""

from __future__ import annotations

import pytest

from runner.verdict import Status
from tests.runner.conftest import needs_cuda, run

pytestmark = [pytest.mark.slow, needs_cuda]

WARM_JOBS = {
    "python": (
        "python",
        1,
        """
        import torch
        a = torch.ones(64, 64, device="cuda")
        print(torch.cuda._is_in_bad_fork(), (a @ a).sum().item())
        """,
        "False 262144.0\n",
    ),
    "dp": (
        "dp",
        1,
        """
        import torch
        model = torch.nn.DataParallel(torch.nn.Linear(4, 2).cuda())
        print(torch.cuda._is_in_bad_fork(), model(torch.ones(6, 4).cuda()).shape)
        """,
        "False torch.Size([6, 2])\n",
    ),
    "nccl-ddp": (
        "ddp",
        1,
        """
        import os, torch, torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP
        assert torch.cuda.current_device() == int(os.environ["LOCAL_RANK"])
        model = DDP(torch.nn.Linear(4, 1).cuda(), device_ids=[torch.cuda.current_device()])
        model(torch.ones(2, 4).cuda()).sum().backward()
        t = torch.ones(1, device="cuda")
        dist.all_reduce(t)
        print(torch.cuda._is_in_bad_fork(), dist.get_backend(), t.item())
        """,
        "False nccl 1.0\n",
    ),
}


@pytest.mark.parametrize("shape", sorted(WARM_JOBS))
def test_cuda_jobs_served_warm_pass(service, shape):
    mode, nproc, code, expected = WARM_JOBS[shape]
    for _ in range(2):  # the second lands on a sandbox warmed after the first job ran
        assert service.pool.wait_full(300), service.pool.state()
        warm_before = service.pool.state()["served_warm"]
        verdict = run(service, code, mode=mode, nproc=nproc, init_process_group=mode == "ddp", timeout_s=180)
        assert verdict.status == Status.OK, verdict.to_dict()
        assert verdict.ranks[0].stdout == expected
        assert service.pool.state()["served_warm"] == warm_before + 1
