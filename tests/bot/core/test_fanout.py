"""The fan-out of scheduled posts (bot/core/fanout.py) through the real scheduler, services and outbox on
SQLite and PostgreSQL: many channels due in the same minute, a small concurrency bound and a database pool
smaller than the channel count. Every channel is posted exactly once, no platform ever has more posts in
flight than its bound, and the pool is never exhausted (the jobs wait at the gate, not on the pool).

The gate's parts are tested alone too, on a simulated clock: round-robin fairness between tenants, no slot
lost to a cancelled waiter, and the token bucket's pace. No wall-clock bound anywhere.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections import Counter
from dataclasses import dataclass, field

import pytest

from bot.core.cards import ChallengeCard
from bot.core.fanout import FairSlots, FanoutGate, PlatformBudget, TokenBucket, db_slots_for
from bot.core.models import ChannelRef
from bot.core.schedule_service import ScheduleService
from bot.core.service import QuizService
from bot.scheduling import RankZeroScheduler
from bot.storage.db import EngineTimeouts, make_engine
from bot.storage.uow import SqlUnitOfWork, session_factory
from tests.conftest import ADMIN, START, test_bank
from tests.fakes import FakePlatform, FrozenClock
from tests.pool_watch import PoolWatch

#: Channels across tenants: 3 Discord servers (one large) and 2 Slack workspaces.
LAYOUT = {
    ("discord", "g1"): 14,
    ("discord", "g2"): 3,
    ("discord", "g3"): 3,
    ("slack", "T1"): 6,
    ("slack", "T2"): 4,
}
BOUNDS = {"discord": 2, "slack": 3}


@dataclass
class InFlightPlatform(FakePlatform):
    """Records posts like FakePlatform and how many were in flight at once per platform; each post yields
    to the event loop a few times (a request's round trip) so that posts overlap when the gate lets them.
    """

    in_flight: Counter[str] = field(default_factory=Counter)
    peak: Counter[str] = field(default_factory=Counter)

    async def post_challenge(self, channel: ChannelRef, card: ChallengeCard) -> str | None:
        for key in (channel.platform, "all"):
            self.in_flight[key] += 1
            self.peak[key] = max(self.peak[key], self.in_flight[key])
        try:
            for _ in range(5):  # a round trip: other jobs run meanwhile
                await asyncio.sleep(0)
            return await super().post_challenge(channel, card)
        finally:
            for key in (channel.platform, "all"):
                self.in_flight[key] -= 1


def channels() -> list[ChannelRef]:
    return [
        ChannelRef(platform, workspace, f"{workspace}-c{i}", f"c{i}")
        for (platform, workspace), count in LAYOUT.items()
        for i in range(count)
    ]


async def test_every_channel_posted_once_within_the_bounds_and_the_pool(db_url: str) -> None:
    # A pool of 4 connections (no overflow) for 30 channels; the posts get 2 database slots, 2 in reserve
    # (the outbox job, due at the same tick, and the players' clicks use those).
    pool_size = 4
    engine = make_engine(db_url, pool_size=pool_size, max_overflow=0, timeouts=EngineTimeouts(pool_s=300))
    pool = PoolWatch(engine)

    factory = session_factory(engine)

    def uow() -> SqlUnitOfWork:
        return SqlUnitOfWork(factory)

    clock = FrozenClock(START)  # 09:00 UTC
    platform = InFlightPlatform()
    quiz = QuizService(uow, clock, platform, seed=1)
    await quiz.admin_import(ADMIN, test_bank())
    schedules = ScheduleService(uow, clock, quiz, platform)
    every = channels()
    for channel in every:
        await schedules.set_schedule(ADMIN, channel, post_time="09:30", timezone="UTC")
    # SQLite's pool is one connection whatever is asked (bot/storage/db.py): its slots are the pool's.
    capacity = 1 if db_url.startswith("sqlite") else pool_size
    gate = FanoutGate(
        db_slots_for(pool_size, reserve=2),
        {p: PlatformBudget(bound, rate_per_s=None) for p, bound in BOUNDS.items()},
    )
    sched = RankZeroScheduler(schedules, clock, sync_interval_s=3600, fanout=gate)
    try:
        await sched.start()
        assert platform.posts == [], "nothing is due before 09:30"
        clock.current = START + dt.timedelta(minutes=30)
        await sched.tick()
        posted = Counter(ch.channel_id for ch, _card in platform.posts)
        assert posted == Counter({ch.channel_id: 1 for ch in every}), "every channel exactly once"
        assert sched.failing == {}, sched.failing
        # The outbox row was the claim: every one is sent, none left pending for a second sender.
        assert await schedules.deliver_outbox() == 0
        for p, bound in BOUNDS.items():
            assert 1 <= platform.peak[p] <= bound, f"{p}: {platform.peak[p]} posts in flight"
        # A job holds its database slot for its whole body (one connection at a time), so the slots bound
        # the posts in flight of all platforms together too.
        assert 1 <= platform.peak["all"] <= gate.db.peak <= gate.db.capacity == 2
        if capacity > 1:
            assert pool.peak < capacity, "a connection was always free for the players"
        assert pool.peak <= capacity
        # A second run of the same minute (a retry, a restart) posts nothing again.
        first = (await schedules.schedules())[0].channel_pk
        await sched._own_task(sched._post(first))
        assert len(platform.posts) == len(every)
    finally:
        await sched.shutdown()
        await engine.dispose()


async def test_fair_slots_serve_tenants_round_robin() -> None:
    slots = FairSlots(1)
    await slots.acquire("big")  # holds the only slot
    order: list[str] = []

    async def job(tenant: str, n: int) -> None:
        await slots.acquire(tenant)
        order.append(f"{tenant}{n}")
        await asyncio.sleep(0)
        slots.release()

    # The big tenant queues five posts before the small ones queue theirs.
    tasks = [asyncio.create_task(job("big", i)) for i in range(5)]
    tasks += [asyncio.create_task(job(t, 0)) for t in ("small", "tiny")]
    await asyncio.sleep(0)
    slots.release()
    await asyncio.gather(*tasks)
    assert order[:4] == ["big0", "small0", "tiny0", "big1"], order
    assert slots.in_use == 0 and slots.waiting == 0 and slots.peak == 1


async def test_a_cancelled_waiter_loses_no_slot() -> None:
    slots = FairSlots(1)
    await slots.acquire("a")
    waiting = asyncio.create_task(slots.acquire("b"))
    await asyncio.sleep(0)
    slots.release()  # handed to the waiter...
    waiting.cancel()  # ...which is cancelled before it runs: the slot goes back
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert slots.in_use == 0
    await slots.acquire("c")
    queued = asyncio.create_task(slots.acquire("d"))
    await asyncio.sleep(0)
    queued.cancel()
    with pytest.raises(asyncio.CancelledError):
        await queued
    assert slots.waiting == 0 and slots.in_use == 1


async def test_token_bucket_paces_requests_on_a_simulated_clock() -> None:
    now = 0.0
    started: list[float] = []

    async def sleep(seconds: float) -> None:
        nonlocal now
        now += seconds

    bucket = TokenBucket(rate_per_s=50.0, burst=5, now=lambda: now, sleep=sleep)
    for _ in range(105):
        await bucket.take()
        started.append(now)
    # 5 at once, then one every 1/50 s: 100 more take 2 s; never more than 50 + 5 in any second.
    assert started[4] == 0.0
    assert started[-1] == pytest.approx(2.0)
    for t in started:
        assert sum(1 for u in started if t <= u < t + 1.0) <= 55


def test_db_slots_leave_the_reserve() -> None:
    assert db_slots_for(20, 4) == 16
    assert db_slots_for(3, 4) == 1
