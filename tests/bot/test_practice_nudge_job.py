"""The daily nudge (and the daily parameter fit) as ``serve`` runs them: the scheduler's nudge job at
start and every hour, on a real database, sending through a FakePlatform; each opted-in player is nudged
once per UTC day.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from bot.scheduling import RankZeroScheduler
from tests.bootstrap import build_test_app
from tests.conftest import actor, test_bank
from tests.fakes import FakePlatform, FrozenClock

ALICE = actor("alice")
CARD: dict[str, Any] = {
    "id": "card-1",
    "kind": "flashcard",
    "topic": "DDP",
    "difficulty": "beginner",
    "front": "Front?",
    "back": "Back.",
}


async def test_the_scheduler_nudges_at_start_then_once_a_day(db_url: str, clock: FrozenClock) -> None:
    platform = FakePlatform()
    app = await build_test_app(db_url, clock=clock, platform=platform, bank=[*test_bank(), CARD])
    practice, schedules = app.practice, app.schedules
    await practice.set_new_per_day(ALICE.player, 1)  # one card due a day
    await practice.start_review(ALICE.player)
    await practice.set_nudge(ALICE.player, True)
    fits: list[dt.datetime] = []

    async def optimize() -> None:
        fits.append(clock.now())

    started = clock.now()
    sched = RankZeroScheduler(
        schedules,
        clock,
        sync_interval_s=600,
        nudge=lambda: practice.send_nudges(platform, platforms=None),
        optimize=optimize,
    )
    await sched.start()
    try:
        assert [(p.user_id, c.due) for p, c in platform.nudges] == [("alice", 1)]
        assert sched.next_run("nudge") == clock.now() + dt.timedelta(hours=1)
        today = clock.now().date()
        # The rest of the player's day (no timezone: UTC, from 4 am to 4 am), hourly: no second nudge.
        day_end = dt.datetime.combine(today + dt.timedelta(days=1), dt.time(4), dt.UTC)
        while clock.now() + dt.timedelta(hours=1) < day_end:
            clock.advance(3600)
            await sched.tick()
        assert len(platform.nudges) == 1 and not sched.failing
        clock.advance(3600)  # 4 am UTC: the player's new day
        await sched.tick()
        assert [c.day for _, c in platform.nudges] == [today, today + dt.timedelta(days=1)]
        # The parameter fit runs daily, not at start (it would slow every start for nothing).
        assert fits == [] and sched.next_run("optimize") == started + dt.timedelta(days=1)
        clock.current = started + dt.timedelta(days=1)
        await sched.tick()
        assert fits == [started + dt.timedelta(days=1)]
    finally:
        await sched.shutdown()
        await app.close()
