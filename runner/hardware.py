"""What the runner executes on: GPUs, torch and CUDA versions, distributed backends."""

from __future__ import annotations

import logging
from functools import lru_cache

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
