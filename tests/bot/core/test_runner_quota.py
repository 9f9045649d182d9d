"""Per-tenant fair use of the runner (issue 24): a tenant's disputes and previews share a quota of jobs per
hour and jobs at once, and one tenant at its limit never blocks another.
"""

from __future__ import annotations

import asyncio
import datetime as dt

import pytest

from bot.core.dispute_service import DisputeService
from bot.core.errors import RateLimitedError, RunnerUnavailableError
from bot.core.models import Actor, ChannelRef, PlayerRef
from bot.core.quota import RunnerQuota
from bot.core.verdicts import Hardware, RunnerHealth, RunSpec, RunVerdict
from tests.conftest import ADMIN, make_spec
from tests.fakes import FrozenClock

A = ChannelRef("discord", "111", "a")
B = ChannelRef("slack", "E1/T2", "C1")
SPEC = make_spec(
    "preview-me",
    "beginner",
    "DDP",
    kind="predict_output",
    code="print(1)",
    runner={"mode": "python", "nproc": 1, "gpus": 0, "init_process_group": False},
)


class GatedRunner:
    """A runner whose jobs wait at a gate; every job then fails as an unreachable runner would."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.started = 0

    async def health(self) -> RunnerHealth:
        return RunnerHealth(Hardware(0, (), "2.13.0+cpu", None), ("python",), ("gloo",), True, 4, 60.0)

    async def run(self, spec: RunSpec) -> RunVerdict:
        self.started += 1
        await self.gate.wait()
        raise RunnerUnavailableError("the runner is gone")


def admin(channel: ChannelRef) -> Actor:
    return Actor(PlayerRef(channel.platform, "boss", "Boss"), True, channel.tenant)


async def test_a_busy_tenant_is_refused_while_another_tenant_runs(clock: FrozenClock) -> None:
    runner = GatedRunner()
    quota = RunnerQuota(clock, per_hour=100, concurrent=2)
    disputes = DisputeService(lambda: None, clock, runner, quota=quota)  # type: ignore[arg-type, return-value]
    busy = [asyncio.create_task(disputes.preview_question(admin(A), SPEC)) for _ in range(2)]
    while runner.started < 2:
        await asyncio.sleep(0.01)
    with pytest.raises(RateLimitedError, match="already has 2 runner job"):
        await disputes.preview_question(admin(A), SPEC)
    assert runner.started == 2, "the refused job never reached the runner"
    other = asyncio.create_task(disputes.preview_question(admin(B), SPEC))
    while runner.started < 3:
        await asyncio.sleep(0.01)
    operator = asyncio.create_task(disputes.preview_question(ADMIN, SPEC))  # the operator: no tenant quota
    while runner.started < 4:
        await asyncio.sleep(0.01)
    runner.gate.set()
    for job in (*busy, other, operator):
        with pytest.raises(RunnerUnavailableError):
            await job
    assert quota.running(A.tenant) == 0 and quota.running(B.tenant) == 0, "slots are given back on failure"


async def test_jobs_per_hour_per_tenant(clock: FrozenClock) -> None:
    quota = RunnerQuota(clock, per_hour=3, concurrent=5)
    for _ in range(3):
        async with quota.job(A.tenant):
            pass
    with pytest.raises(RateLimitedError, match="used its 3 runner jobs for this hour"):
        async with quota.job(A.tenant):
            pass
    async with quota.job(B.tenant):  # another tenant's hour is its own
        pass
    clock.current += dt.timedelta(minutes=59)
    with pytest.raises(RateLimitedError, match="about 1 minute"):
        async with quota.job(A.tenant):
            pass
    clock.current += dt.timedelta(minutes=1)
    async with quota.job(A.tenant):
        pass


def test_a_quota_of_zero_is_refused(clock: FrozenClock) -> None:
    with pytest.raises(Exception, match="at least 1 job"):
        RunnerQuota(clock, per_hour=0)
