"""Jobs running at the same time stay apart: own loopback, own limits."""

from __future__ import annotations

import asyncio
import textwrap

import pytest

from runner.service import RunRequest
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


async def test_two_ddp_jobs_at_once_both_on_port_29500(service):
    first = RunRequest(code=DDP_ON_29500.format(offset=1), mode=Mode.DDP, nproc=2, timeout_s=90)
    second = RunRequest(code=DDP_ON_29500.format(offset=100), mode=Mode.DDP, nproc=2, timeout_s=90)
    a, b = await asyncio.gather(service.run_async(first), service.run_async(second))
    assert a.status == Status.OK, a.to_dict()
    assert b.status == Status.OK, b.to_dict()
    # Each job reduced only its own ranks: no cross-talk through a shared port.
    assert [r.stdout for r in a.ranks] == ["3.0\n", "3.0\n"]
    assert [r.stdout for r in b.ranks] == ["201.0\n", "201.0\n"]


async def test_job_near_its_memory_limit_does_not_starve_another(service):
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


async def test_processes_together_over_the_sandbox_budget_are_oom(service):
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
