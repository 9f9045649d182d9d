"""A hostile job next to others (issue 23, section 4, "Slowing other jobs"): while several sandboxes
compete for the CPU, each holds at most its fair share of the cores, the pool's warm-up included, so
a job with dozens of busy threads cannot starve the warm-up a benign request waits for.

These check the runner's own accounting and the quotas it writes into the real cgroups; how much faster
a benign verdict comes back next to a hostile job is measured by benchmarks/neighbour_slowdown.py.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from runner.cgroups import CPU_PERIOD_US, CpuShares, JobCgroup
from runner.config import RunnerConfig
from runner.sandbox_process import Sandbox
from runner.service import RunnerService

pytestmark = pytest.mark.slow

CORES = os.cpu_count() or 1


def test_the_fair_share_is_the_cores_divided_among_those_competing_but_never_under_one_core() -> None:
    shares = CpuShares(8)
    assert shares.quota_for(8.0, 1) == 8.0  # alone: its whole quota
    assert shares.quota_for(8.0, 2) == 4.0
    assert shares.quota_for(2.0, 2) == 2.0  # below its share already
    assert shares.quota_for(8.0, 3) == pytest.approx(8 / 3)
    assert shares.quota_for(8.0, 16) == 1.0  # one thread at full speed, the weights share out the rest
    assert shares.quota_for(0.5, 16) == 0.5


def _quota_cores(cgroup: JobCgroup) -> float:
    """The quota the kernel holds for ``cgroup``, in cores, read from its cgroup files."""
    for folder in cgroup.dirs:
        for name in ("cpu.max", "cpu.cfs_quota_us"):
            if (folder / name).exists():
                return int((folder / name).read_text().split()[0]) / CPU_PERIOD_US
    raise AssertionError(f"no CPU quota file in {cgroup.dirs}")


@pytest.fixture
def bare() -> Iterator[RunnerService]:
    """A service without a pool: the only sandboxes competing are the ones a test starts."""
    svc = RunnerService(RunnerConfig(memory_mb=2048, pool={}, max_concurrent_jobs=4))
    svc.start()
    if svc.launcher.cgroups is None or not svc.launcher.cgroups.cpu:
        svc.close()
        pytest.skip("no CPU cgroups on this host")
    yield svc
    svc.close()


def _started(svc: RunnerService, capacity: int) -> Sandbox:
    sandbox = svc.launcher.spawn(capacity, preload=False)
    assert sandbox.wait_ready(60), sandbox.diagnostics()
    assert sandbox.cgroup is not None
    return sandbox


@pytest.mark.skipif(CORES < 2, reason="one core: every quota is already one core or less")
def test_a_hostile_job_next_to_a_benign_one_and_a_warm_up_gets_no_more_cpu_than_either(
    bare: RunnerService,
) -> None:
    launcher = bare.launcher
    assert launcher.cgroups is not None
    own = float(min(bare.config.max_nproc, CORES))
    # A one-process job that forks (the fork storm) is entitled to the CPU of the most ranks a job has.
    hostile = _started(bare, 1)
    opened = [hostile]
    try:
        launcher.fit(hostile, 1, cpu_ranks=bare.config.max_nproc)
        assert hostile.cgroup is not None
        assert hostile.cgroup.cpus == own
        assert _quota_cores(hostile.cgroup) == own  # alone, it has every core it is entitled to

        benign = _started(bare, 2)
        opened.append(benign)
        launcher.fit(benign, 2)
        assert benign.cgroup is not None
        fair = max(CORES / 2, 1.0)
        assert launcher.cgroups.shares.competing == 2
        assert _quota_cores(hostile.cgroup) == min(own, fair)
        assert _quota_cores(benign.cgroup) == min(2.0, fair)
        if own >= 2:
            # A job of many threads is held to what a two-rank job gets next to it, no more.
            assert _quota_cores(hostile.cgroup) == _quota_cores(benign.cgroup)

        # The pool's warm-up competes as one more job: it gets the same share as a job does.
        warming = _started(bare, bare.config.max_nproc)
        opened.append(warming)
        assert warming.cgroup is not None
        fair3 = max(CORES / 3, 1.0)
        assert launcher.cgroups.shares.competing == 3
        assert _quota_cores(warming.cgroup) == min(own, fair3)
        assert _quota_cores(hostile.cgroup) == min(own, fair3)
        # Once warm it waits idle in the pool and no longer counts.
        launcher.rest(warming)
        assert launcher.cgroups.shares.competing == 2
        assert _quota_cores(hostile.cgroup) == min(own, fair)

        # The others gone, the hostile job has its whole quota again.
        for sandbox in (benign, warming):
            sandbox.close()
            launcher.uids.release(sandbox.uid)
            opened.remove(sandbox)
        assert launcher.cgroups.shares.competing == 1
        assert _quota_cores(hostile.cgroup) == own
    finally:
        for sandbox in opened:
            sandbox.close()
            launcher.uids.release(sandbox.uid)
    assert launcher.cgroups.shares.competing == 0


def test_the_refill_competes_while_it_warms_and_rests_once_its_sandbox_waits_in_the_pool() -> None:
    svc = RunnerService(RunnerConfig(memory_mb=2048, pool={1: 1}, max_concurrent_jobs=4))
    svc.start()
    try:
        if svc.launcher.cgroups is None or not svc.launcher.cgroups.cpu:
            pytest.skip("no CPU cgroups on this host")
        shares = svc.launcher.cgroups.shares
        assert svc.pool.wait_full(120)
        assert shares.competing == 0  # a warm sandbox waiting for a job takes no share
        job = svc.pool.acquire(1)
        try:
            svc.launcher.fit(job, 1)
            assert job.cgroup is not None
            # The job, and the refill's warm-up of the next sandbox, until that one is ready.
            assert shares.competing in (1, 2)
            assert svc.pool.wait_full(120)
            assert shares.competing == 1
        finally:
            svc.pool.release(job)
        assert shares.competing == 0
    finally:
        svc.close()


def test_throttling_while_cut_to_a_fair_share_counts_as_waiting_behind_others() -> None:
    # The deadline's fairness (executor.CpuWait) subtracts only the throttling a job's own quota caused:
    # time stopped while its quota was cut for its neighbours is time it waited behind them.
    cgroup = JobCgroup([], version=1, cpus=2.0, quota_cpus=2.0)  # no folders: the quota writes are no-ops
    throttled = [1.0]
    cgroup.throttled_s = lambda: throttled[0]  # type: ignore[method-assign]
    assert cgroup.own_throttled_s() == 1.0  # before any cut: all its own
    assert cgroup.set_quota(1.0)  # a neighbour arrives
    throttled[0] = 3.0
    assert cgroup.own_throttled_s() == 1.0
    assert cgroup.set_quota(2.0)  # the neighbour left
    throttled[0] = 4.5
    assert cgroup.own_throttled_s() == 2.5
    assert cgroup.capped_throttled == 2.0
