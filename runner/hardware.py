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


@lru_cache(maxsize=1)
def gpu_uuids() -> list[str | None]:
    """Each GPU's UUID as NVIDIA tools print it (``GPU-...``), in the runner's order; None where unknown.

    Used to match ``nvidia-smi``'s rows (numbered in PCI order) to torch's devices (numbered fastest
    first unless CUDA_DEVICE_ORDER says otherwise).
    """
    import torch

    if not torch.cuda.is_available():
        return []
    found: list[str | None] = []
    for i in range(torch.cuda.device_count()):
        uuid = getattr(torch.cuda.get_device_properties(i), "uuid", None)
        # torch prints the bare UUID; nvidia-smi (and CUDA_VISIBLE_DEVICES) prefix it with "GPU-".
        found.append(f"GPU-{str(uuid).removeprefix('GPU-')}" if uuid is not None else None)
    return found


def gpu_memory(timeout_s: float = 10.0) -> dict[int, tuple[int, int]]:
    """Total and free memory of each GPU, in bytes, by runner index; empty where it cannot be read.

    Read with ``nvidia-smi`` (NVML), never through torch: a CUDA context in the runner's own process
    would hold memory on the device for as long as the runner runs.
    """
    rows = nvidia_smi(["--query-gpu=uuid,memory.total,memory.free"], timeout_s)
    uuids = gpu_uuids()
    # By UUID; in nvidia-smi's order only when no UUID matches (unknown to this torch) and the counts agree.
    by_uuid = any(row and row[0] in uuids for row in rows)
    if not by_uuid and len(rows) != len(uuids):
        return {}
    memory: dict[int, tuple[int, int]] = {}
    for position, row in enumerate(rows):
        try:
            uuid, total, free = row[0], int(row[1]) * 2**20, int(row[2]) * 2**20
        except (IndexError, ValueError):
            continue
        if not by_uuid:
            memory[position] = (total, free)
        elif uuid in uuids:
            memory[uuids.index(uuid)] = (total, free)
    return memory


def nvidia_smi(query: list[str], timeout_s: float = 10.0) -> list[list[str]]:
    """Rows of an ``nvidia-smi --query-...`` in CSV (no header, no units); [] without nvidia-smi."""
    import shutil
    import subprocess

    binary = shutil.which("nvidia-smi")
    if binary is None:
        return []
    try:
        result = subprocess.run(
            [binary, *query, "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.warning("nvidia-smi failed: %s", exc)
        return []
    if result.returncode != 0:
        return []
    return [[cell.strip() for cell in line.split(",")] for line in result.stdout.splitlines() if line.strip()]
