"""What the scheduler says and does around posts that were not missed, on SQLite and PostgreSQL.

- A schedule created after today's slot has missed nothing: no "missed post" warning.
- A restart mid-window finds the day's post made: no "missed post … skipped" warning, no second post.
- A challenge that ``rankzero play`` opened before the post (no closing time) still gets the schedule's
  window at the slot: it is posted, reminded, closed and its results posted.
"""

from __future__ import annotations

import datetime as dt
import logging

import pytest

from bot.scheduling import RankZeroScheduler
from tests.bot import test_outage
from tests.bot.test_outage import Env, at
from tests.conftest import ADMIN, CHANNEL, actor

env = test_outage.env  # the same fixture: real database, fake platform, frozen clock


def _missed(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.WARNING and "missed post" in r.getMessage()
    ]


async def test_a_schedule_created_after_its_slot_warns_of_no_missed_post(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="bot")
    env.clock.current = at(15, 0)
    await env.schedules.set_schedule(ADMIN, CHANNEL, post_time="09:00", timezone="UTC")
    sched = RankZeroScheduler(env.schedules, env.clock, sync_interval_s=3600)
    await sched.start()
    try:
        assert env.platform.posts == []
        assert _missed(caplog) == [], "the 09:00 slot came before the schedule existed"
        assert any("before the schedule was set" in r.getMessage() for r in caplog.records)
    finally:
        await sched.shutdown()


@pytest.mark.parametrize(
    ("window", "restart"),
    [("10m", at(9, 9)), ("8h", at(11, 0))],
    ids=["window-nearly-over", "beyond-grace"],
)
async def test_a_restart_mid_window_does_not_call_the_made_post_missed(
    env: Env, caplog: pytest.LogCaptureFixture, window: str, restart: dt.datetime
) -> None:
    env.clock.current = at(8, 0)
    await env.schedules.set_schedule(ADMIN, CHANNEL, post_time="09:00", timezone="UTC", window=window)
    first = RankZeroScheduler(env.schedules, env.clock, sync_interval_s=3600)
    await first.start()
    await env.at(first, at(9, 0))
    await first.shutdown()
    assert len(env.platform.posts) == 1
    challenge_id = env.platform.posts[0][1].challenge_id

    caplog.clear()
    caplog.set_level(logging.INFO, logger="bot")
    env.clock.current = restart
    second = RankZeroScheduler(env.schedules, env.clock, sync_interval_s=3600)
    await second.start()
    try:
        assert len(env.platform.posts) == 1
        assert _missed(caplog) == [], "the post was made"
        assert second.next_run(f"close:{challenge_id}") is not None, "its window is still armed"
    finally:
        await second.shutdown()


async def test_a_challenge_play_opened_early_gets_the_schedule_window_and_is_posted(env: Env) -> None:
    env.clock.current = at(8, 0)
    await env.schedules.set_schedule(
        ADMIN, CHANNEL, post_time="09:00", timezone="UTC", window="60m", reminder="15m"
    )
    sched = RankZeroScheduler(env.schedules, env.clock, sync_interval_s=3600)
    await sched.start()
    try:
        # `rankzero play` before the post: the day's challenge exists, with no closing time.
        env.clock.current = at(8, 30)
        opened, created = await env.quiz.open_challenge(CHANNEL)
        assert created and opened.closes_at is None
        alice = actor("alice")
        first = opened.problems[0]
        await env.quiz.start_problem(alice, first.id)
        await env.quiz.answer(alice, first.id, "A")

        await env.at(sched, at(9, 0))
        challenge = await env.quiz.get_challenge(opened.id)
        assert challenge.closes_at == at(10, 0), "it got the schedule's window"
        assert [c.challenge_id for _, c in env.platform.posts] == [opened.id], "and was posted once"
        assert challenge.message_ref == f"msg-{opened.id}"
        assert sched.next_run(f"close:{opened.id}") == at(10, 0)

        await env.at(sched, at(9, 45))
        assert [r[1].challenge_id for r in env.platform.reminders] == [opened.id]
        await env.at(sched, at(10, 0))
        assert [r[1].challenge_id for r in env.platform.results] == [opened.id]
        assert len(env.platform.posts) == 1
    finally:
        await sched.shutdown()
