"""The stats chart's data (issue 30): points per local day over the last 30 days (zero days included),
the days played over the calendar's 5 weeks and today, in the channel's tenant only. SQLite and PostgreSQL.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator

import pytest

from bot.core.models import Actor, ChannelRef, PlayerRef
from tests.bootstrap import Env, open_env
from tests.conftest import START, make_spec
from tests.fakes import FakePlatform, FrozenClock

A = ChannelRef("discord", "111", "a-general", "general")
B = ChannelRef("discord", "222", "b-general", "general")
TODAY = START.date()


def ann(channel: ChannelRef) -> Actor:
    return Actor(PlayerRef(channel.platform, "ann", "Ann"), tenant=channel.tenant)


@pytest.fixture
async def env(db_url: str, clock: FrozenClock, platform: FakePlatform) -> AsyncIterator[Env]:
    bank = [make_spec("q-chart", "advanced", "DDP", kind="predict_output", correct=0)]
    async with open_env(db_url, clock, platform, bank=bank, problems_per_challenge=1) as made:
        yield made


async def _solve_on(env: Env, channel: ChannelRef, days_ago: int) -> None:
    """Ann solves the day's one-problem challenge in ``channel``, ``days_ago`` days before START."""
    env.clock.current = START - dt.timedelta(days=days_ago)
    card, _ = await env.quiz.open_challenge(channel)
    problem = card.problems[0].id
    await env.quiz.start_problem(ann(channel), problem)
    env.clock.current += dt.timedelta(seconds=10)
    await env.quiz.answer(ann(channel), problem, "A")


def _ago(n: int) -> dt.date:
    return TODAY - dt.timedelta(days=n)


async def test_daily_points_and_played_days_count_only_the_channels_tenant(env: Env) -> None:
    for days_ago in (40, 10, 2, 0):
        await _solve_on(env, A, days_ago)
    for days_ago in (33, 1, 0):
        await _solve_on(env, B, days_ago)
    env.clock.current = START + dt.timedelta(hours=1)

    in_a = await env.quiz.stats(ann(A).player, A)
    assert in_a.today == TODAY
    assert [d.day for d in in_a.daily_points] == [_ago(n) for n in range(29, -1, -1)], "30 days, oldest first"
    earned = {d.day: d.points for d in in_a.daily_points if d.points}
    assert sorted(earned) == [_ago(10), _ago(2), _ago(0)], "B's day 1 is B's; day 40 is out of the window"
    assert all(p > 0 for p in earned.values())
    # The 30 days hold all of A's points but those of day 40 (each solve earns the same here).
    assert sum(earned.values()) == in_a.points * 3 // 4
    assert in_a.played_days == (_ago(10), _ago(2), _ago(0))

    in_b = await env.quiz.stats(ann(B).player, B)
    assert [d.day for d in in_b.daily_points if d.points] == [_ago(1), _ago(0)]
    # Day 33 is inside the calendar's 35 days, outside the 30 days of points.
    assert in_b.played_days == (_ago(33), _ago(1), _ago(0))
    assert sum(d.points for d in in_b.daily_points) == in_b.points * 2 // 3


async def test_a_new_player_gets_thirty_zero_days_and_no_played_days(env: Env) -> None:
    card = await env.quiz.stats(ann(A).player, A)
    assert len(card.daily_points) == 30 and all(d.points == 0 for d in card.daily_points)
    assert card.daily_points[-1].day == TODAY and card.played_days == () and card.today == TODAY


async def test_the_local_day_is_the_channels(env: Env) -> None:
    """At 11:00 UTC on the 21st it is already the 22nd in Kiritimati (UTC+14): the window ends there."""
    env.clock.current = START + dt.timedelta(hours=2)
    far = ChannelRef("discord", "111", "a-kiri", "kiri", timezone="Pacific/Kiritimati")
    card = await env.quiz.stats(ann(far).player, far)
    assert card.today == TODAY + dt.timedelta(days=1) and card.daily_points[-1].day == card.today
