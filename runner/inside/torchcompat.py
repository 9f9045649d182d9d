"""What makes a rank look like one of torchrun's workers: its environment, process-group guards."""

from __future__ import annotations

import contextlib
import functools
import sys
from typing import Any

TORCHRUN_SIGNALS = "SIGTERM,SIGINT,SIGHUP,SIGQUIT"


def torchrun_env(rank: int, nproc: int, master_port: int, run_id: str) -> dict[str, str]:
    """The variables ``torchrun --nproc_per_node=N`` sets for one worker, variable for variable.

    Checked against a real torchrun by tests/runner/test_modes.py.  Like torchrun, the ranks use the
    launcher's store (``TORCHELASTIC_USE_AGENT_STORE``): the supervisor hosts it on ``MASTER_PORT``, so a
    script that starts a store of its own on another port hangs, as it does under torchrun, instead of
    failing with EADDRINUSE.
    """
    env = {
        "RANK": str(rank),
        "LOCAL_RANK": str(rank),
        "WORLD_SIZE": str(nproc),
        "LOCAL_WORLD_SIZE": str(nproc),
        "GROUP_RANK": "0",
        "GROUP_WORLD_SIZE": "1",
        "ROLE_NAME": "default",
        "ROLE_RANK": str(rank),
        "ROLE_WORLD_SIZE": str(nproc),
        "MASTER_ADDR": "localhost",
        "MASTER_PORT": str(master_port),
        "TORCHELASTIC_RUN_ID": run_id,
        "TORCHELASTIC_USE_AGENT_STORE": "True",
        "TORCHELASTIC_RESTART_COUNT": "0",
        "TORCHELASTIC_MAX_RESTARTS": "0",
        "TORCHELASTIC_ERROR_FILE": error_file(run_id, rank),
        "TORCHELASTIC_SIGNALS_TO_HANDLE": TORCHRUN_SIGNALS,
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
    }
    if nproc > 1:
        env["OMP_NUM_THREADS"] = "1"  # torchrun sets it only for more than one worker per node
    return env


def error_file(run_id: str, rank: int) -> str:
    """Where ``@record`` writes a worker's error, laid out as torchrun's (attempt_0/<rank>/error.json)."""
    return f"/tmp/torchelastic/{run_id}/attempt_0/{rank}/error.json"  # noqa: S108 - sandbox-private tmpfs


DESTROYED_GROUPS_KEPT = 16


def keep_destroyed_groups_referenced() -> None:
    """Keep a destroyed process group referenced while something holds it, so a DDP model never frees it.

    A ``DistributedDataParallel`` model keeps its process group alive through its C++ reducer.  When the
    snippet calls ``destroy_process_group()`` while the model still lives (the DDP tutorials' ``main()``
    ends that way, the model being a local), the model's death later drops the group's last reference
    *holding the GIL*: the gloo group's destructor joins gloo's work thread, which may still wait for the GIL
    to free its last work's tensors, and both wait forever (pytorch/pytorch#56297, see runner/README.md,
    "Warm pool").  Ranks forked from a warm supervisor lose that race most of the time (3 of 4 runs of the
    uneven-inputs ``Join`` example; a bare torchrun, 0 of 4), so a snippet that finishes under torchrun
    timed out here.  With a reference kept, the group outlives the model and dies with the rank (which
    leaves through ``os._exit``), or, past the last ``DESTROYED_GROUPS_KEPT`` destroyed, when this list
    drops it (the group's own binding releases the GIL in its destructor, the part of #56297 torch fixed;
    not measured here).  The bound keeps a snippet that creates and destroys groups in a loop from
    piling up gloo threads against the sandbox's process limit.  A group nothing else holds at its destroy
    is not kept (it dies then, as under torchrun), and the kept ones are let go when the snippet makes a
    new default group: a kept group holds its store and gloo context, and keeping every one made a second
    ``init_process_group`` on the same store hang (1 warm run in 2).
    """
    dist = sys.modules.get("torch.distributed")
    if dist is None or not dist.is_available():
        return
    c10d = sys.modules.get("torch.distributed.distributed_c10d")
    original = dist.destroy_process_group
    original_init = dist.init_process_group
    kept: list[Any] = []

    @functools.wraps(original)
    def destroy_process_group(group: Any = None) -> None:
        target = None
        with contextlib.suppress(Exception):  # best effort: the call itself decides what is valid
            target = dist.group.WORLD if group is None else group
        original(group)
        if target is None or target is dist.GroupMember.NON_GROUP_MEMBER:
            return
        # Keep it only when something else still holds it (a DDP model keeps its group in an attribute
        # as well as in its reducer): with nothing else, it dies here, exactly as in a bare run.
        own = 2 + (group is target)  # ``target``, getrefcount's argument, and ``group`` when the same
        if sys.getrefcount(target) > own:
            kept.append(target)
            del kept[:-DESTROYED_GROUPS_KEPT]

    @functools.wraps(original_init)
    def init_process_group(*args: Any, **kwargs: Any) -> Any:
        # A new default group: let the kept ones go first, as a bare run would have at their destroy.  A
        # kept group holds its store and gloo context, and a second init on the same store then hung
        # (measured: a ddp snippet that inits, destroys and inits again timed out 1 run in 2 warm).
        # Dropping the last Python reference is safe (the group's own binding releases the GIL); a
        # group a live model still holds stays alive through the model, as under torchrun.
        kept.clear()
        return original_init(*args, **kwargs)

    modules: tuple[Any, ...] = (dist, c10d)  # torch's modules: attributes mypy cannot see on ModuleType
    for module in modules:
        if module is None:
            continue
        if getattr(module, "destroy_process_group", None) is original:
            module.destroy_process_group = destroy_process_group
        if getattr(module, "init_process_group", None) is original_init:
            module.init_process_group = init_process_group


def destroy_group() -> None:
    """Destroy the default process group the runner set up for the snippet, if it is still there."""
    import torch.distributed as dist

    try:
        if dist.is_initialized():
            dist.destroy_process_group()
    except Exception:  # noqa: S110 - cleanup only
        pass
