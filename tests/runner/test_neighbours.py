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

from runner.cgroups import CPU_PERIOD_US, V1_SHARES, V2_WEIGHT, CpuShares, JobCgroup
from runner.config import RunnerConfig
from runner.sandbox_process import Sandbox
from runner.service import RunnerService
from tests.waiting import wait_until

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


def _fake(cpus: float) -> JobCgroup:
    """A cgroup without folders (its quota writes are no-ops): CpuShares' arithmetic alone."""
    return JobCgroup([], version=1, cpus=cpus, quota_cpus=cpus)


def test_the_warm_up_a_request_waits_for_is_favoured_with_a_reserved_share_and_the_refill_is_not() -> None:
    shares = CpuShares(2)
    hostile, refill, claimed = _fake(2.0), _fake(2.0), _fake(2.0)
    shares.compete(hostile)
    assert shares.reserved() is None and hostile.quota_cpus == 2.0  # alone: its whole quota
    # The refill's warm-ups, no request waiting for them: sandboxes like the others (fair share, weight).
    shares.compete(refill, warming=True)
    shares.compete(claimed, warming=True)
    assert shares.reserved() is None
    assert (refill.weight, hostile.weight, claimed.weight) == (1, 1, 1)
    assert (refill.quota_cpus, hostile.quota_cpus, claimed.quota_cpus) == (1.0, 1.0, 1.0)
    # A request waits for the newer one now (it claimed it): it weighs as much as the two others together,
    # and its core is reserved: they share the other one.
    shares.await_warm_up(claimed)
    assert shares.reserved() is claimed
    assert (claimed.weight, hostile.weight, refill.weight) == (2, 1, 1)
    assert (claimed.quota_cpus, hostile.quota_cpus, refill.quota_cpus) == (1.0, 0.5, 0.5)
    # Its job starts: a job like the others; nothing is favoured any more.
    shares.compete(claimed)
    assert shares.reserved() is None
    assert (refill.weight, hostile.weight, claimed.weight) == (1, 1, 1)
    assert (refill.quota_cpus, hostile.quota_cpus, claimed.quota_cpus) == (1.0, 1.0, 1.0)
    shares.rest(refill)  # warm, idle in the pool
    assert (hostile.quota_cpus, claimed.quota_cpus) == (1.0, 1.0)
    # However many compete, the warm-up a request waits for keeps its core; a job is never cut below a
    # quarter; of two awaited warm-ups the older one is favoured.
    crowd = [_fake(2.0) for _ in range(8)]
    for cgroup in crowd:
        shares.compete(cgroup)
    later = _fake(2.0)
    shares.compete(refill, warming=True)
    shares.compete(later, warming=True)
    shares.await_warm_up(later)
    assert shares.reserved() is later
    shares.await_warm_up(refill)  # started before the other: the older one is favoured
    assert shares.reserved() is refill
    assert (refill.quota_cpus, refill.weight, later.weight) == (1.0, 11, 1)
    assert hostile.quota_cpus == 0.25
    shares.rest(refill)  # it warmed up; the next one waited for is favoured
    assert shares.reserved() is later and refill.weight == 1
    assert (later.quota_cpus, later.weight) == (1.0, 10)
    # On a host with cores to spare the reservation changes no quota: every share is the fair one.
    big = CpuShares(16)
    job, warm = _fake(8.0), _fake(8.0)
    big.compete(job)
    big.compete(warm, warming=True)
    big.await_warm_up(warm)
    assert (job.quota_cpus, warm.quota_cpus) == (8.0, 8.0)


def _weight(cgroup: JobCgroup) -> float:
    """The CPU weight the kernel holds for ``cgroup``, in jobs' weights, read from its cgroup files."""
    for folder in cgroup.dirs:
        if (folder / "cpu.shares").exists():
            return int((folder / "cpu.shares").read_text()) / V1_SHARES
        if (folder / "cpu.weight").exists():
            return int((folder / "cpu.weight").read_text()) / V2_WEIGHT
    raise AssertionError(f"no CPU weight file in {cgroup.dirs}")


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
def test_a_hostile_job_next_to_a_benign_one_leaves_the_reserved_share_of_a_warm_up_free(
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

        # The pool's warm-up, no request waiting for it, competes as one more sandbox: its fair share.
        warming = _started(bare, bare.config.max_nproc)
        opened.append(warming)
        assert warming.cgroup is not None
        shares = launcher.cgroups.shares
        fair3 = max(CORES / 3, 1.0)
        assert shares.competing == 3
        assert shares.reserved() is None
        assert (_weight(warming.cgroup), _weight(hostile.cgroup), _weight(benign.cgroup)) == (1, 1, 1)
        assert _quota_cores(warming.cgroup) == pytest.approx(min(own, fair3), abs=1e-5)
        assert _quota_cores(hostile.cgroup) == pytest.approx(min(own, fair3), abs=1e-5)

        # The warm-up a request waits for (a cold start, or a pool sandbox it claimed) is favoured, over the
        # refill's too: it weighs as much as the others together, and their quotas leave its cores free.
        cold = _started(bare, 2)
        opened.append(cold)
        assert cold.cgroup is not None
        assert shares.reserved() is None
        launcher.awaited(cold)
        assert shares.reserved() is cold.cgroup
        assert (_weight(cold.cgroup), _weight(warming.cgroup), _weight(hostile.cgroup)) == (3, 1, 1)
        fair4 = max(CORES / 4, 1.0)
        reserve4 = min(2.0, fair4, CORES / 2)
        rest4 = max((CORES - reserve4) / 3, 0.25)
        assert _quota_cores(cold.cgroup) == pytest.approx(reserve4, abs=1e-5)
        for other in (warming, hostile):
            assert other.cgroup is not None
            assert _quota_cores(other.cgroup) == pytest.approx(min(own, rest4, fair4), abs=1e-5)
        assert _quota_cores(benign.cgroup) == pytest.approx(min(2.0, rest4, fair4), abs=1e-5)
        if CORES <= 4:
            # More sandboxes than cores: the others' quotas leave the reserved cores free.
            others = sum(_quota_cores(s.cgroup) for s in (warming, hostile, benign) if s.cgroup is not None)
            assert others <= CORES - reserve4 + 1e-4
        # Its job starts: a job like the others; nothing is favoured, every quota is the fair one.
        launcher.fit(cold, 2)
        assert shares.reserved() is None
        assert (_weight(cold.cgroup), _weight(warming.cgroup)) == (1, 1)
        assert _quota_cores(warming.cgroup) == pytest.approx(min(own, fair4), abs=1e-5)
        assert _quota_cores(hostile.cgroup) == pytest.approx(min(own, fair4), abs=1e-5)
        cold.close()
        launcher.uids.release(cold.uid)
        opened.remove(cold)

        # Once warm the refill's sandbox waits idle in the pool and no longer counts.
        launcher.rest(warming)
        assert shares.competing == 2
        assert shares.reserved() is None
        assert _weight(warming.cgroup) == 1
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


def test_a_request_that_finds_the_pool_empty_takes_the_warm_up_and_its_reserved_share() -> None:
    # A job holds the pool's one sandbox (a neighbour); the next request finds the pool empty and takes
    # the refill's warm-up: from then on that warm-up is the request's own and holds the reservation,
    # ahead of the refill's next one; the pool counts the request as claimed, and its wait.
    svc = RunnerService(RunnerConfig(memory_mb=2048, pool={2: 1}, max_concurrent_jobs=4))
    svc.start()
    opened: list[Sandbox] = []
    try:
        cgroups = svc.launcher.cgroups
        if cgroups is None or not cgroups.cpu:
            pytest.skip("no CPU cgroups on this host")
        assert svc.pool.wait_full(120)
        neighbour = svc.pool.acquire(2)
        opened.append(neighbour)
        svc.launcher.fit(neighbour, 2)
        seen: list[tuple[JobCgroup | None, float]] = []
        awaited = svc.launcher.awaited

        def spy(sandbox: Sandbox) -> None:
            awaited(sandbox)
            assert sandbox.cgroup is not None
            seen.append((cgroups.shares.reserved(), _quota_cores(sandbox.cgroup)))

        svc.launcher.awaited = spy  # type: ignore[method-assign]
        wait_until(lambda: svc.pool.state()["warming"] == {"2": 1}, "the refill never started a warm-up")
        before = svc.pool.state()
        # The refill's warm-up (torch and the distributed stack) takes seconds; the request comes at once.
        assert before["ready"] == {"2": 0}, before
        job = svc.pool.acquire(2)
        opened.append(job)
        after = svc.pool.state()
        assert after["served_claimed"] == before["served_claimed"] + 1, after
        assert after["served_warm"] == before["served_warm"] + 1
        assert after["served_cold"] == before["served_cold"]
        assert after["waited_s"] > before["waited_s"]
        assert len(seen) == 1
        holder, quota = seen[0]
        assert holder is job.cgroup  # the claimed warm-up, the one the request waits for
        assert job.cgroup is not None
        assert quota == pytest.approx(cgroups.shares.reserved_cores(job.cgroup.cpus, 2), abs=1e-5)
        # Until its job starts, it keeps the reservation over the refill's next warm-up, now started.
        assert cgroups.shares.reserved() is job.cgroup
    finally:
        for sandbox in opened:
            svc.pool.release(sandbox)
        svc.close()
