"""What the runner executes on: GPUs, torch and CUDA versions, distributed backends."""

from __future__ import annotations

import logging
import math
import os
from functools import lru_cache
from pathlib import Path

from runner.verdict import Hardware

log = logging.getLogger(__name__)


@lru_cache(maxsize=1)
def probe() -> Hardware:
    """Probe once. Counting GPUs does not create a CUDA context, so the runner process stays light."""
    import torch

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    names = [torch.cuda.get_device_name(i) for i in range(gpus)]
    return Hardware(gpus=gpus, names=names, torch=torch.__version__, cuda=torch.version.cuda)


@lru_cache(maxsize=1)
def backends() -> list[str]:
    """Distributed backends this torch build offers."""
    import torch.distributed as dist

    found = []
    if dist.is_available():
        if dist.is_gloo_available():
            found.append("gloo")
        if dist.is_nccl_available():
            found.append("nccl")
    return found


def cpu_cores(cgroup_root: Path = Path("/sys/fs/cgroup")) -> int:
    """CPU cores this runner may use: its CPU affinity, capped by a cgroup v2 CPU quota if it has one.

    In a Kubernetes pod the affinity shows every core of the node while ``resources.limits.cpu`` is a
    CFS quota (``cpu.max``), so the quota is the figure a scheduler of jobs should see.
    """
    cores = len(os.sched_getaffinity(0)) or 1
    try:
        quota, period = (cgroup_root / "cpu.max").read_text().split()[:2]
    except (OSError, ValueError):
        return cores
    if quota == "max":
        return cores
    try:
        return max(1, min(cores, math.ceil(int(quota) / int(period))))
    except (ValueError, ZeroDivisionError):
        return cores
