"""The runner's GPUs: which devices each job gets, and what a GPU failure means for its verdict.

Everything here is plain logic over a GPU count and error texts, so it is tested on machines without GPUs
(tests/runner/test_gpu_allocation.py); the host process probes the hardware (runner/hardware.py) and
hands the count in.  Nothing here touches CUDA.
"""

from __future__ import annotations

import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

# Words of a snippet that may use a GPU.  A job whose code has none of them gets no device (an empty
# CUDA_VISIBLE_DEVICES), so the many CPU-only snippets of a GPU runner never wait behind GPU jobs.  A plain
# search, like the runner's other hints: `model.to(rank)` moves to cuda:rank without saying "cuda".
USES_GPU = re.compile(
    r"cuda|nccl|gpu|device_ids|accelerator|DataParallel|\.to\(\s*(?:local_)?rank\b",
    re.IGNORECASE,
)

# How a rank fails when it asks for a device index the job does not have (set_device(rank) with more ranks
# than GPUs), and how NCCL refuses two ranks on one device.
_NO_SUCH_DEVICE = ("invalid device ordinal", "Duplicate GPU detected", "device >= 0 && device < num_gpus")

# torch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp) says, since torch 2.1:
#   "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which
#    1.06 GiB is free. ..."
_CUDA_OOM = re.compile(r"CUDA out of memory|CUDA error: out of memory|CUBLAS_STATUS_ALLOC_FAILED")
_OOM_FIGURES = re.compile(
    # torch 2.1 spelled it "capacty".
    r"Tried to allocate (?P<asked>[\d.]+ (?:bytes|[KMGT]iB))\. GPU (?P<gpu>\d{1,4}) has a total "
    r"capac(?:i)?ty of (?P<total>[\d.]+ (?:bytes|[KMGT]iB)) "
    r"of which (?P<free>[\d.]+ (?:bytes|[KMGT]iB)) is free"
)


def gpus_needed(mode: str, nproc: int, backend: str | None, code: str, host_gpus: int) -> int:
    """How many of the host's GPUs a job is given (0: none, its CUDA_VISIBLE_DEVICES is empty).

    ``dp`` sees every GPU (the contract: DataParallel over all of them); ``python`` too when its code may
    use a GPU, so that ``torch.cuda.device_count()`` answers what a bare ``python`` on this host would.
    ``ddp`` gets one GPU per rank when it uses NCCL or its code may use a GPU, and every GPU when it has
    more ranks than the host has GPUs: the job then fails as a bare torchrun would (set_device(rank) on a
    device that does not exist), which the verdict explains (:func:`more_ranks_than_gpus`).
    """
    if host_gpus <= 0:
        return 0
    if mode == "dp":
        return host_gpus
    uses_gpu = backend == "nccl" or USES_GPU.search(code) is not None
    if not uses_gpu:
        return 0
    if mode == "ddp":
        return min(nproc, host_gpus)
    return host_gpus


def visible_devices(indices: Sequence[int], host_visible: str | None) -> str:
    """The CUDA_VISIBLE_DEVICES value for a job given ``indices`` of the runner's own GPUs.

    The runner numbers the GPUs it sees; a runner started with CUDA_VISIBLE_DEVICES (an operator giving it
    part of the host) sees only those, in that order, while a job's environment starts empty and would see
    all of them.  So index i is translated to the i-th entry of the runner's own list (an index, a UUID or
    a MIG name).
    """
    if host_visible is None or not host_visible.strip():
        return ",".join(str(i) for i in indices)
    entries = [e.strip() for e in host_visible.split(",") if e.strip()]
    return ",".join(entries[i] for i in indices)


@dataclass(frozen=True)
class GpuLease:
    """The devices one job holds (runner indices) and how long it waited for them."""

    indices: tuple[int, ...]
    waited_s: float


class GpuAllocator:
    """Hands each job a disjoint set of the host's GPUs, first come first served; thread-safe.

    A job that asks for more GPUs than are free waits in line; the line is strict (first in, first
    served), so a job that needs every GPU is not starved by a stream of one-GPU jobs.  With ``share`` every
    job gets its GPUs at once, counted from 0, whatever other jobs hold (the operator's choice: more jobs
    at a time, and the memory of a device shared between them).
    """

    def __init__(self, count: int, share: bool = False) -> None:
        if count < 0:
            raise ValueError(f"GPU count must be >= 0, not {count}")
        self.count = count
        self.share = share
        self._free = set(range(count))
        self._line: deque[object] = deque()
        self._cond = threading.Condition()

    def acquire(self, n: int) -> GpuLease:
        """Block until ``n`` GPUs are free, take the lowest-numbered ones and return them."""
        if not 0 <= n <= self.count:
            raise ValueError(f"a job may have 0 to {self.count} GPUs on this runner, not {n}")
        start = time.monotonic()
        if n == 0:
            return GpuLease((), 0.0)
        if self.share:
            return GpuLease(tuple(range(n)), 0.0)
        ticket = object()
        with self._cond:
            self._line.append(ticket)
            try:
                while self._line[0] is not ticket or len(self._free) < n:
                    self._cond.wait()
                taken = tuple(sorted(self._free)[:n])
                self._free.difference_update(taken)
            finally:
                self._line.remove(ticket)
                # The next in line may fit in what is left.
                self._cond.notify_all()
        return GpuLease(taken, time.monotonic() - start)

    def release(self, lease: GpuLease) -> None:
        """Give the lease's GPUs back (a shared or empty lease holds nothing)."""
        if self.share or not lease.indices:
            return
        with self._cond:
            held = set(lease.indices)
            if held & self._free:
                raise ValueError(f"GPUs {sorted(held & self._free)} were released twice")
            self._free |= held
            self._cond.notify_all()

    @contextmanager
    def lease(self, n: int) -> Iterator[GpuLease]:
        """``acquire`` for the duration of a ``with`` block; released however the block ends."""
        lease = self.acquire(n)
        try:
            yield lease
        finally:
            self.release(lease)

    def state(self) -> dict[str, int | bool]:
        """Figures for /v1/health: GPUs free now and jobs waiting for some."""
        with self._cond:
            return {
                "count": self.count,
                "free": self.count if self.share else len(self._free),
                "waiting": len(self._line),
                "shared": self.share,
            }


def asks_missing_device(text: str) -> bool:
    """True when a rank's error says it used a GPU index the job does not have (or NCCL found two ranks
    on one GPU): what ``torch.cuda.set_device(rank)`` does with more ranks than GPUs.
    """
    return any(p in text for p in _NO_SUCH_DEVICE)


def more_ranks_than_gpus(host_gpus: int, nproc: int, backend: str | None) -> str:
    """The note of a ddp job with more ranks than the host has GPUs: the count, and what torchrun does."""
    gpus = f"{host_gpus} GPU{'s' if host_gpus != 1 else ''}"
    first_missing = host_gpus  # ranks 0..host_gpus-1 find their device; this one is the first that does not
    nccl = "; NCCL also refuses two ranks on one GPU ('Duplicate GPU detected')" if backend == "nccl" else ""
    return (
        f"this runner has {gpus} and the job asked for {nproc} ranks, one GPU each: under a bare "
        f"`torchrun --nproc_per_node={nproc}` on this host, rank {first_missing}'s "
        f"torch.cuda.set_device({first_missing}) fails with 'CUDA error: invalid device ordinal'{nccl}; "
        f"the snippet needs a host with {nproc} GPUs"
    )


def is_cuda_oom(text: str) -> bool:
    """True when an exception text is a CUDA allocation failure (torch.OutOfMemoryError and kin)."""
    return _CUDA_OOM.search(text) is not None


def cuda_oom_note(
    text: str,
    lease: Sequence[int],
    names: Sequence[str],
    memory: Callable[[], dict[int, tuple[int, int]]] | None = None,
) -> str:
    """The note of a CUDA out-of-memory verdict: which device, its total and free memory.

    ``text`` is the rank's exception; torch's own message gives the device (as the job numbers it) and its
    figures at the moment of the failure.  ``lease`` maps the job's device numbers to the runner's;
    ``memory`` (asked only when the text has no figures) reads the host's: runner index -> (total, free)
    bytes, e.g. :func:`runner.hardware.gpu_memory`.
    """
    found = _OOM_FIGURES.search(text)
    if found is not None:
        job_gpu = int(found["gpu"])
        host_gpu = lease[job_gpu] if job_gpu < len(lease) else job_gpu
        name = f" ({names[host_gpu]})" if host_gpu < len(names) else ""
        return (
            f"CUDA out of memory on GPU {host_gpu}{name}: it has {found['total']} in total, "
            f"{found['free']} was free when the job asked for {found['asked']} more"
        )
    figures = memory() if memory is not None else {}
    for host_gpu in lease:
        if host_gpu in figures:
            total, free = figures[host_gpu]
            name = f" ({names[host_gpu]})" if host_gpu < len(names) else ""
            return (
                f"CUDA out of memory on GPU {host_gpu}{name}: it has {total / 2**30:.2f} GiB in total, "
                f"{free / 2**30:.2f} GiB free after the job ended"
            )
    return "CUDA out of memory (the error gave no device figures)"
