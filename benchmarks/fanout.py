"""How long the daily post takes to reach many channels due at the same minute (issue 25: 1,500 within 60 s).

Usage: python benchmarks/fanout.py [--channels 1500] [--tenants 50] [--db-url URL] [--pool 10]

The real path: schedules set through ScheduleService for every channel (half Discord servers, half Slack
workspaces), the real RankZeroScheduler with the fan-out gate built from the settings' defaults
(bot/bootstrap.py: fanout_gate), the outbox as the claim, on SQLite (a new file) or the database
``--db-url`` names (it must be empty: migrated here, never cleaned). The platform is a fake whose every
post takes a round trip of 50-150 ms (uniform, seeded): the figure is the bot's own scheduling and
database work plus the gate's pacing, not Discord's or Slack's.
The clock is frozen at the post time and the scheduler's tick runs every due job; the wall time from the
tick to the last post is the figure, with each post's lateness (p50, p95, max), the peak posts in flight
per platform, the pool's peak checkouts, and the jobs that failed.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import random
import statistics
import sys
import tempfile
import time
from collections import Counter

from bot.bootstrap import fanout_gate
from bot.config import Settings
from bot.core.cards import ChallengeCard
from bot.core.models import ChannelRef
from bot.core.schedule_service import ScheduleService
from bot.core.service import QuizService
from bot.scheduling import RankZeroScheduler
from bot.storage.db import make_engine, upgrade
from bot.storage.uow import SqlUnitOfWork, session_factory
from tests.conftest import ADMIN, START, test_bank
from tests.fakes import FakePlatform, FrozenClock
from tests.pool_watch import PoolWatch


class SlowPlatform(FakePlatform):
    """A post takes a seeded 50-150 ms round trip; records when each landed and how many were in flight."""

    def __init__(self, seed: int = 1) -> None:
        super().__init__()
        self.rng = random.Random(seed)
        self.landed: list[float] = []
        self.in_flight: Counter[str] = Counter()
        self.peak: Counter[str] = Counter()

    async def post_challenge(self, channel: ChannelRef, card: ChallengeCard) -> str | None:
        self.in_flight[channel.platform] += 1
        self.peak[channel.platform] = max(self.peak[channel.platform], self.in_flight[channel.platform])
        try:
            await asyncio.sleep(self.rng.uniform(0.05, 0.15))
            ref = await super().post_challenge(channel, card)
            self.landed.append(time.perf_counter())
            return ref
        finally:
            self.in_flight[channel.platform] -= 1


def layout(channels: int, tenants: int) -> list[ChannelRef]:
    """``channels`` channels over ``tenants`` tenants (even ones Discord servers, odd ones Slack)."""
    refs = []
    for i in range(channels):
        t = i % tenants
        platform, workspace = ("discord", f"g{t}") if t % 2 == 0 else ("slack", f"T{t}")
        refs.append(ChannelRef(platform, workspace, f"{workspace}-c{i}", f"c{i}"))
    return refs


async def measure(args: argparse.Namespace, url: str) -> None:
    settings = Settings(database_url=url, db_pool_size=args.pool, db_pool_overflow=args.pool)
    engine = make_engine(url, pool_size=args.pool, max_overflow=args.pool)
    pool = PoolWatch(engine)
    factory = session_factory(engine)
    clock = FrozenClock(START)
    platform = SlowPlatform()
    quiz = QuizService(lambda: SqlUnitOfWork(factory), clock, platform, seed=1)
    await quiz.admin_import(ADMIN, test_bank())
    schedules = ScheduleService(lambda: SqlUnitOfWork(factory), clock, quiz, platform)
    every = layout(args.channels, args.tenants)
    began = time.perf_counter()
    for channel in every:
        await schedules.set_schedule(ADMIN, channel, post_time="09:30", timezone="UTC")
    print(f"set-up: {len(every)} schedules in {time.perf_counter() - began:.1f} s", flush=True)
    gate = fanout_gate(settings)
    sched = RankZeroScheduler(schedules, clock, sync_interval_s=3600, fanout=gate)
    try:
        await sched.start()
        clock.current = START + dt.timedelta(minutes=30)
        began = time.perf_counter()
        await sched.tick()
        took = time.perf_counter() - began
        lateness = sorted(t - began for t in platform.landed)
        posted = Counter(ch.channel_id for ch, _card in platform.posts)
        print(f"database: {url.split('://')[0]}, pool {args.pool} + {args.pool} overflow")
        print(
            f"{len(posted)} of {len(every)} channels posted ({sum(posted.values())} posts) in {took:.1f} s "
            f"(target: 1,500 within 60 s); failed jobs: {len(sched.failing)}"
        )
        if lateness:
            p95 = lateness[min(len(lateness) - 1, int(0.95 * len(lateness)))]
            print(
                f"lateness after the tick: p50 {statistics.median(lateness):.1f} s, p95 {p95:.1f} s, "
                f"max {lateness[-1]:.1f} s"
            )
        print(
            f"peak posts in flight: discord {platform.peak['discord']}, slack {platform.peak['slack']}; "
            f"peak pool checkouts {pool.peak}; gate's database slots {gate.db.capacity} (peak {gate.db.peak})"
        )
    finally:
        await sched.shutdown()
        await engine.dispose()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--channels", type=int, default=1500)
    parser.add_argument("--tenants", type=int, default=50)
    parser.add_argument("--db-url", default=None, help="an empty database (default: a new SQLite file)")
    parser.add_argument("--pool", type=int, default=10)
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()}")
    url = args.db_url or f"sqlite+aiosqlite:///{tempfile.mkdtemp(prefix='rz-fanout-')}/bench.db"
    upgrade(url, "head")
    asyncio.run(measure(args, url))
    print(f"load average at end: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
