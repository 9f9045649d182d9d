"""Jobs running at the same time stay apart: own loopback, own limits."""

from __future__ import annotations

import asyncio
import textwrap
from collections.abc import Iterator

import pytest

from runner.config import RunnerConfig
from runner.service import RunnerService, RunRequest
from runner.verdict import Mode, Status
from tests.runner.conftest import TEST_MEMORY_MB

pytestmark = pytest.mark.slow

DDP_ON_29500 = """
import os, torch, torch.distributed as dist
os.environ["MASTER_PORT"] = "29500"
dist.init_process_group("gloo", init_method="tcp://127.0.0.1:29500",
                        rank=int(os.environ["RANK"]), world_size=int(os.environ["WORLD_SIZE"]))
t = torch.tensor([float(dist.get_rank() + {offset})])
dist.all_reduce(t)
print(t.item())
dist.destroy_process_group()
"""


async def test_two_ddp_jobs_at_once_both_on_port_29500(service: RunnerService) -> None:
    first = RunRequest(code=DDP_ON_29500.format(offset=1), mode=Mode.DDP, nproc=2, timeout_s=90)
    second = RunRequest(code=DDP_ON_29500.format(offset=100), mode=Mode.DDP, nproc=2, timeout_s=90)
    a, b = await asyncio.gather(service.run_async(first), service.run_async(second))
    assert a.status == Status.OK, a.to_dict()
    assert b.status == Status.OK, b.to_dict()
    # Each job reduced only its own ranks: no cross-talk through a shared port.
    assert [r.stdout for r in a.ranks] == ["3.0\n", "3.0\n"]
    assert [r.stdout for r in b.ranks] == ["201.0\n", "201.0\n"]


async def test_job_near_its_memory_limit_does_not_starve_another(service: RunnerService) -> None:
    hog = textwrap.dedent(
        f"""
        import time
        # Touch most of the allowed address space, then hold it.
        block = bytearray({TEST_MEMORY_MB - 700} * 1024 * 1024)
        for i in range(0, len(block), 4096):
            block[i] = 1
        print("holding", flush=True)
        time.sleep(8)
        """
    )
    bomb = "chunks = []\nwhile True:\n    chunks.append(bytearray(64 << 20))\n"
    normal = "import torch\nprint(torch.arange(10).sum().item())\n"
    hog_task = asyncio.ensure_future(service.run_async(RunRequest(code=hog, timeout_s=60)))
    bomb_task = asyncio.ensure_future(service.run_async(RunRequest(code=bomb, timeout_s=60)))
    verdict = await service.run_async(RunRequest(code=normal, timeout_s=60))
    assert verdict.status == Status.OK, verdict.to_dict()
    assert verdict.ranks[0].stdout == "45\n"
    hogged, bombed = await asyncio.gather(hog_task, bomb_task)
    assert hogged.status == Status.OK, hogged.to_dict()
    assert bombed.status == Status.OOM, bombed.to_dict()


async def test_processes_together_over_the_sandbox_budget_are_oom(service: RunnerService) -> None:
    """Each process stays under its rlimit; together they pass the sandbox's memory cgroup."""
    if service.launcher.cgroups is None or not service.launcher.cgroups.available:
        pytest.skip("this host does not let the runner create memory cgroups (rlimits still apply)")
    hog = textwrap.dedent(
        f"""
        import os, time
        for _ in range(4):
            if os.fork() == 0:
                block = bytearray({TEST_MEMORY_MB - 600} * 1024 * 1024)
                for i in range(0, len(block), 4096):
                    block[i] = 1
                time.sleep(3)
                os._exit(0)
        for _ in range(4):
            os.wait()
        """
    )
    verdict = await service.run_async(RunRequest(code=hog, timeout_s=60))
    assert verdict.status == Status.OOM, verdict.to_dict()


# --- warm for every shape (issue 18, section 5) ---

# The shape of the bank's and the tutorials' DDP snippets: a model wrapped in DistributedDataParallel
# (whose constructor imports the compiler stack on first use) and one training step.
DDP_TRAINING_STEP = """
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = DDP(nn.Linear(10, 5))
optimizer = torch.optim.SGD(model.parameters(), lr=0.001)
loss = nn.MSELoss()(model(torch.randn(20, 10)), torch.randn(20, 5))
loss.backward()
optimizer.step()
print(f"rank {rank}: {dist.get_world_size()} ranks, step done")
dist.destroy_process_group()
"""


@pytest.fixture(scope="module")
def zygote_service() -> Iterator[RunnerService]:
    svc = RunnerService(RunnerConfig(memory_mb=TEST_MEMORY_MB, pool={8: 1}, max_concurrent_jobs=2))
    svc.start()
    yield svc
    svc.close()


def test_every_rank_count_up_to_the_limit_is_served_warm(zygote_service: RunnerService) -> None:
    pool = zygote_service.pool
    for nproc in (1, 3, 5, 8):
        assert pool.wait_full(120)
        before = pool.served_warm, pool.served_cold
        verdict = zygote_service.run(
            RunRequest(code=DDP_TRAINING_STEP, mode=Mode.DDP, nproc=nproc, timeout_s=120)
        )
        assert verdict.status == Status.OK, verdict.to_dict()
        assert [r.stdout for r in verdict.ranks] == [
            f"rank {r}: {nproc} ranks, step done\n" for r in range(nproc)
        ]
        assert (pool.served_warm, pool.served_cold) == (before[0] + 1, before[1]), nproc


def test_warm_sandboxes_have_imported_what_ddp_snippets_use(zygote_service: RunnerService) -> None:
    # In a warm sandbox the DDP constructor, FSDP, DTensor and DataParallel import nothing new.
    code = """
    import sys
    before = dict.fromkeys(sys.modules)  # no set: a snippet that builds one gets fresh ranks
    import torch, torch.nn as nn
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP, DataParallel
    from torch.distributed.fsdp import FullyShardedDataParallel
    from torch.distributed.tensor import DTensor
    dist.init_process_group("gloo")
    DDP(nn.Linear(4, 4))
    new = sorted(m for m in list(sys.modules) if m not in before and m.startswith("torch"))
    print(len(new), new[:5])
    """
    assert zygote_service.pool.wait_full(120)
    verdict = zygote_service.run(RunRequest(code=textwrap.dedent(code), mode=Mode.DDP, nproc=2, timeout_s=60))
    assert verdict.status == Status.OK, verdict.to_dict()
    assert [r.stdout for r in verdict.ranks] == ["0 []\n", "0 []\n"]


def test_back_to_back_jobs_take_the_sandbox_being_warmed_instead_of_a_cold_one(
    zygote_service: RunnerService,
) -> None:
    pool = zygote_service.pool
    assert pool.wait_full(120)
    cold = pool.served_cold
    for _ in range(3):  # no wait for the refill in between
        verdict = zygote_service.run(
            RunRequest(code=DDP_TRAINING_STEP, mode=Mode.DDP, nproc=2, timeout_s=120)
        )
        assert verdict.status == Status.OK, verdict.to_dict()
    assert pool.served_cold == cold
