"""Fail-fast, the deadline and the warm pool, around real jobs.

The tests assert what the runner decided and its own accounting (which rank it killed and why, which
clock it judged the deadline on); how long that took on the wall clock is measured by
benchmarks/runner_bounds.py, not bounded here (a bound fails on a loaded machine).
"""

from __future__ import annotations

import re
import threading
from typing import Any

import pytest

from runner.config import RunnerConfig
from runner.sandbox_process import Sandbox
from runner.service import RunnerService
from runner.verdict import Status
from tests.runner.conftest import TEST_MEMORY_MB, run
from tests.waiting import wait_until

pytestmark = pytest.mark.slow

POOL_WAIT_S = 180
# Field 22 of /proc/1/stat: when the sandbox's PID 1 (its supervisor) started, in clock ticks since boot.
SUPERVISOR_START = "open('/proc/1/stat').read().split()[21]"


def test_fail_fast_stops_the_other_rank_when_one_fails(service: RunnerService) -> None:
    assert service.pool.wait_full(POOL_WAIT_S)
    code = """
    import os, time
    if os.environ["RANK"] == "1":
        time.sleep(0.5)
        raise ValueError("rank one is broken")
    time.sleep(120)
    """
    verdict = run(service, code, mode="ddp", nproc=2, timeout_s=100)
    assert verdict.status == Status.ERROR, verdict.to_dict()
    assert verdict.root_cause_rank == 1
    # Rank 0 was killed by the runner because rank 1 failed: not by the deadline, not by its own end.
    assert verdict.ranks[0].signal == 9
    assert "rank 0 stopped by the runner after rank 1 failed" in verdict.notes, verdict.notes
    assert not any(n.startswith("deadline of") for n in verdict.notes), verdict.notes


def test_deadline_verdict_names_its_clock_and_where_each_rank_was(service: RunnerService) -> None:
    assert service.pool.wait_full(POOL_WAIT_S)
    code = """
    import time, torch, torch.distributed as dist
    dist.init_process_group("gloo")
    if dist.get_rank() == 1:
        time.sleep(300)
    dist.all_reduce(torch.ones(1))
    """
    verdict = run(service, code, mode="ddp", nproc=2, timeout_s=4)
    assert verdict.status == Status.TIMEOUT, verdict.to_dict()
    assert [r.stuck_at.call if r.stuck_at else None for r in verdict.ranks] == ["all_reduce", "sleep"]
    # The runner's own accounting: the deadline it applied and the clock it judged it on (time the job
    # waited for a CPU behind other work is not counted, and the note says how much that was).
    note = next(n for n in verdict.notes if n.startswith("deadline of 4 s reached on the "))
    assert re.search(r"on the (wall clock|job's own clock: [0-9.]+ s of wall time less the [0-9.]+ s)", note)
    assert note.endswith("every rank's stack was dumped, then killed"), note


def _pool(service: RunnerService) -> dict[str, Any]:
    pool: dict[str, Any] = service.health()["pool"]
    return pool


def test_torch_jobs_are_served_warm_by_fresh_sandboxes_and_the_pool_refills(service: RunnerService) -> None:
    assert service.pool.wait_full(POOL_WAIT_S)
    targets = _pool(service)["targets"]
    assert _pool(service)["ready"] == targets
    before = _pool(service)
    first = run(
        service, f"import torch\nopen('/tmp/left-by-job-1', 'w').write('x')\nprint({SUPERVISOR_START})\n"
    )
    assert first.status == Status.OK, first.to_dict()
    after_first = _pool(service)
    assert after_first["served_warm"] == before["served_warm"] + 1
    assert after_first["served_cold"] == before["served_cold"]

    assert service.pool.wait_full(POOL_WAIT_S)
    assert _pool(service)["ready"] == targets
    second = run(
        service, f"import os, torch\nprint(os.path.exists('/tmp/left-by-job-1'), {SUPERVISOR_START})\n"
    )
    assert second.status == Status.OK, second.to_dict()
    assert _pool(service)["served_warm"] == before["served_warm"] + 2
    assert _pool(service)["served_cold"] == before["served_cold"]
    left, supervisor_started = second.ranks[0].stdout.split()
    assert left == "False"
    assert supervisor_started != first.ranks[0].stdout.strip()


# What of the warm-up a job finds imported (names built so the snippet itself mentions neither).
WARM_UP_PROBE = (
    "import sys, torch\n"
    "print(sorted(m for m in ('torch._dyn' + 'amo', 'torch.distributed.fs' + 'dp') if m in sys.modules))\n"
)


def test_a_job_without_a_ddp_model_cuts_short_the_warm_up_of_the_sandbox_it_takes() -> None:
    # A job that finds the pool empty takes the sandbox being warmed; one that needs no compiler stack
    # (no DDP model, FSDP, torch.compile) does not wait for it to be imported, one that does waits.
    svc = RunnerService(RunnerConfig(memory_mb=TEST_MEMORY_MB, pool={1: 1}, max_concurrent_jobs=4))
    svc.start()
    try:
        assert svc.pool.wait_full(POOL_WAIT_S)
        full = run(svc, WARM_UP_PROBE)
        assert full.ranks[0].stdout == "['torch._dynamo', 'torch.distributed.fsdp']\n", full.to_dict()
        for code, expected in (
            (WARM_UP_PROBE, "[]\n"),
            (WARM_UP_PROBE + "# DistributedDataParallel\n", "['torch._dynamo', 'torch.distributed.fsdp']\n"),
        ):
            # The refill has started the next sandbox.
            wait_until(
                lambda: _pool(svc)["warming"]["1"] > 0, "the refill did not start", polls=3000, every_s=0.01
            )
            verdict = run(svc, code)
            assert verdict.status == Status.OK, verdict.to_dict()
            assert verdict.ranks[0].stdout == expected
        assert _pool(svc)["served_warm"] == 3 and _pool(svc)["served_cold"] == 0
    finally:
        svc.close()


def _service_that_lists_its_sandboxes() -> tuple[RunnerService, list[Sandbox], list[list[bool]]]:
    """A started service with one warm 1-rank sandbox, the sandboxes it spawns (in order), and for each
    spawn which of the earlier ones were ready at that moment."""
    svc = RunnerService(RunnerConfig(memory_mb=TEST_MEMORY_MB, pool={1: 1}, max_concurrent_jobs=4))
    spawned: list[Sandbox] = []
    ready_when_spawned: list[list[bool]] = []
    real_spawn = svc.launcher.spawn

    def spawn(nproc: int, preload: bool | str = True) -> Sandbox:
        ready_when_spawned.append([s.ready for s in spawned])
        sandbox = real_spawn(nproc, preload=preload)
        spawned.append(sandbox)
        return sandbox

    # mypy forbids assigning to a method; wrapping this one launcher instance is the point here.
    svc.launcher.spawn = spawn  # type: ignore[method-assign]
    svc.start()
    return svc, spawned, ready_when_spawned


def _take_the_ready_one_and_wait_for_the_next(svc: RunnerService, taken: list[Sandbox]) -> None:
    """Take the pool's ready sandbox (into ``taken``) and wait until the refill lists the next as warming,
    where a job can claim it."""
    assert svc.pool.wait_full(POOL_WAIT_S)
    taken.append(svc.pool.acquire(1))
    wait_until(lambda: _pool(svc)["warming"]["1"] > 0, "the refill did not start", polls=3000, every_s=0.01)


def test_a_sandbox_a_job_claims_is_handed_over_and_the_refill_starts_the_next_at_once() -> None:
    # Requests back to back: the first takes the ready sandbox, the second the one being warmed. The
    # refill must not wait for that one as well: it starts the next while the second job still waits, so
    # the third request finds a sandbox that has been warming about as long (before, each request after
    # the pool ran dry waited for a whole warm-up of its own).
    svc, spawned, ready_when_spawned = _service_that_lists_its_sandboxes()
    taken: list[Sandbox] = []
    try:
        _take_the_ready_one_and_wait_for_the_next(svc, taken)
        claimed = spawned[1]
        assert not claimed.ready  # a warm-up takes seconds
        second: dict[str, Sandbox] = {}
        waiter = threading.Thread(target=lambda: second.setdefault("sandbox", svc.pool.acquire(1)))
        waiter.start()
        # The refill moves on while the claimed sandbox still warms.
        wait_until(lambda: len(spawned) >= 3, "the refill did not move on", polls=3000, every_s=0.01)
        assert ready_when_spawned[2][1] is False, ready_when_spawned
        waiter.join(POOL_WAIT_S)
        assert second["sandbox"] is claimed and claimed.ready
        taken.append(claimed)
        # The third request takes the sandbox the refill started meanwhile, and a job runs in it.
        verdict = run(svc, "import torch\nprint(torch.ones(3).sum().item())\n")
        assert verdict.status == Status.OK and verdict.ranks[0].stdout == "3.0\n", verdict.to_dict()
        assert _pool(svc)["served_warm"] == 3 and _pool(svc)["served_cold"] == 0
        assert len(spawned) >= 3 and spawned[2].ready
    finally:
        for sandbox in taken:
            svc.pool.release(sandbox)
        svc.close()


def test_a_claimed_sandbox_that_fails_counts_as_a_refill_failure() -> None:
    # The job that claimed a warming sandbox waits for it itself; if it dies, the job falls back to a cold
    # sandbox, and the failure is the pool's too: shown in /v1/health and backed off like one of its own.
    svc, spawned, _ = _service_that_lists_its_sandboxes()
    taken: list[Sandbox] = []
    try:
        _take_the_ready_one_and_wait_for_the_next(svc, taken)
        assert _pool(svc)["refill"]["last_error"] is None
        claimed = spawned[1]
        got: dict[str, Sandbox] = {}
        waiter = threading.Thread(target=lambda: got.setdefault("sandbox", svc.pool.acquire(1)))
        waiter.start()
        # Handed over: the refill has moved on to the next sandbox.
        wait_until(lambda: len(spawned) >= 3, "the refill did not move on", polls=3000, every_s=0.01)
        assert not claimed.ready
        claimed.kill()  # it dies while the job waits for it
        waiter.join(POOL_WAIT_S)
        taken.append(got["sandbox"])
        assert got["sandbox"] is not claimed and got["sandbox"].ready
        refill = _pool(svc)["refill"]
        assert refill["last_error"].startswith("a warm sandbox did not start"), refill
        assert _pool(svc)["served_cold"] == 1
    finally:
        for sandbox in taken:
            svc.pool.release(sandbox)
        svc.close()
