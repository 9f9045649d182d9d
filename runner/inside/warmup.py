"""The supervisor's warm-up: import torch (and what snippets reach for next) without starting CUDA."""

from __future__ import annotations

import contextlib
import gc
import getpass
import os
import shutil
import sys
import tempfile
import weakref
from collections.abc import Callable, Iterator

FRESH_TORCH: dict[str, int] = {}

# torch.cuda.is_available() asks the CUDA runtime for the device count (cudaGetDeviceCount), which starts
# the driver in the calling process and arms torch's fork poisoning: every rank or worker forked from that
# process afterwards fails its first CUDA call with "Cannot re-initialize CUDA in forked subprocess".  With
# this variable set, is_available() and device_count() ask NVML instead, which is fork-safe.
NVML_CHECK = "PYTORCH_NVML_BASED_CUDA_CHECK"


@contextlib.contextmanager
def cuda_runtime_untouched(gpus: int) -> Iterator[None]:
    """While the supervisor warms up, answer torch's CUDA queries without the CUDA runtime.

    The supervisor forks every rank (and, through them, every warm worker), so it must never start the
    CUDA runtime (runner/README.md, "GPUs").  Importing torch's compiler stack calls
    ``torch.cuda.is_available()`` (``torch._dynamo.reset``): here that goes to NVML, and should NVML be
    missing (torch then falls back to ``cudaGetDeviceCount``), the runtime's count is answered with
    ``gpus``, the count the host probed for this sandbox (hardware probing stays in the host process).
    Both are restored afterwards, before any snippet runs: a rank's snippet sees torch and its environment
    exactly as under ``torchrun``.  On a CPU-only torch build none of this is reached (``is_available``
    returns False before asking anything).
    """
    torch = sys.modules.get("torch")
    c_module = getattr(torch, "_C", None)
    runtime_count = getattr(c_module, "_cuda_getDeviceCount", None)
    saved = os.environ.get(NVML_CHECK)
    os.environ[NVML_CHECK] = "1"
    if runtime_count is not None:
        c_module._cuda_getDeviceCount = lambda: gpus  # type: ignore[union-attr]
    try:
        yield
    finally:
        if runtime_count is not None:
            c_module._cuda_getDeviceCount = runtime_count  # type: ignore[union-attr]
        if saved is None:
            os.environ.pop(NVML_CHECK, None)
        else:
            os.environ[NVML_CHECK] = saved


def warm_up(level: str = "full", enough: Callable[[], bool] | None = None) -> bool:
    """Import what snippets use, so that a job only pays for its own work.

    ``full`` (the warm pool) also imports what real snippets reach for next: the DistributedDataParallel
    constructor imports the compiler stack (dynamo) on first use, which alone costs more than a second,
    plus FSDP, DTensor, the DDP communication hooks, optimizers and data loaders.  ``torch`` (a sandbox
    started for a job that is already waiting) imports torch only: the snippet then pays for the rest
    exactly as it would under a bare ``torchrun``.  None of this may start the CUDA runtime (a forked child
    could not use CUDA afterwards): the caller holds ``cuda_runtime_untouched``.  ``enough`` is asked
    before each costly step of ``full``: True (the host's hint that the job already waiting for this
    sandbox needs no compiler stack) skips the rest.  True when the whole ``full`` warm-up was imported.
    """
    import torch
    import torch.distributed
    import torch.multiprocessing
    import torch.nn
    import torch.nn.parallel

    # The thread count a fresh interpreter's torch starts with (without OMP_NUM_THREADS), before any job
    # changes it: a process the spawn zygote serves (see SpawnZygote) is put back to it.
    FRESH_TORCH.update(threads=torch.get_num_threads())
    if level != "full" or (enough is not None and enough()):
        return False
    import torch.compiler
    import torch.distributed.algorithms.ddp_comm_hooks
    import torch.distributed.elastic.multiprocessing.errors
    import torch.distributed.fsdp
    import torch.distributed.tensor
    import torch.optim
    import torch.utils.data

    if enough is not None and enough():
        return False
    # The public way to import the compiler stack (torch.compiler.reset imports it); the caches it resets
    # are empty here.  DistributedDataParallel's constructor would import it on first use otherwise.
    # Resetting makes inductor's cache folder in the temporary directory: a job must find /tmp as empty
    # as without the warm-up, so a folder made here is removed again.
    try:
        cache = os.path.join(tempfile.gettempdir(), f"torchinductor_{getpass.getuser()}")
    except (KeyError, OSError):  # no passwd entry for the job's uid
        cache = os.path.join(tempfile.gettempdir(), f"torchinductor_uid_{os.getuid()}")
    existed = os.path.lexists(cache)
    torch.compiler.reset()
    if not existed and os.path.isdir(cache) and not os.path.islink(cache):
        shutil.rmtree(cache, ignore_errors=True)
    return True


def keep_warm_up_finalizers_at_exit() -> None:
    """Let the ranks and spawned workers leave without running the warm-up's exit finalizers.

    Importing the warm-up registers about 170 ``weakref.finalize`` objects that run at exit (torch.library
    registrations of the compiler stack, FSDP, DTensor...).  Every forked process inherits them, and a rank
    or worker runs the exit hooks as it leaves (``run_exit_hooks``): undoing those registrations cost
    80-100 ms per process, in a process about to end, for modules a fresh interpreter running the same
    snippet might never have imported.  They belong to the supervisor, so their ``atexit`` flag (public,
    writable) is cleared here, before any fork; finalizers the snippet registers itself still run.
    ``gc.get_objects`` is the public way to find them (about 0.1 s, once per sandbox, before its job).
    """
    for obj in gc.get_objects():
        if issubclass(type(obj), weakref.finalize):  # type(): no __class__ lookup on lazy objects
            obj.atexit = False
