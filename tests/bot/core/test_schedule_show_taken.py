"""`schedule show` promises only the posts the scheduler will make (issue 25, section 5): after
`rankzero play` and `rankzero close`, today's slot finds today's challenge ("already posted") and posts
nothing, so the next post shown is tomorrow's, with today's slot named as taken.
"""

from __future__ import annotations

import datetime as dt

from bot.scheduling import RankZeroScheduler
from tests.bot import test_outage
from tests.bot.test_outage import Env, at
from tests.conftest import ADMIN, CHANNEL

env = test_outage.env  # real database (SQLite and PostgreSQL), fake platform, frozen clock
DAY = dt.timedelta(days=1)


async def test_a_day_whose_challenge_was_played_and_closed_is_not_promised_a_post(env: Env) -> None:
    env.clock.current = at(8, 0)
    opened, _ = await env.quiz.open_challenge(CHANNEL)  # rankzero play
    await env.quiz.close_open_challenge(CHANNEL)  # rankzero close
    await env.schedules.set_schedule(ADMIN, CHANNEL, post_time="09:00", timezone="UTC")
    view = await env.schedules.show_schedule(CHANNEL)
    assert view is not None
    assert view.next_posts == (at(9, 0) + DAY, at(9, 0) + 2 * DAY, at(9, 0) + 3 * DAY)
    assert [(t.day, t.challenge_id, t.status) for t in view.taken] == [(at(9, 0).date(), opened.id, "closed")]
    # What the scheduler does at today's slot: nothing posted, as shown.
    sched = RankZeroScheduler(env.schedules, env.clock, sync_interval_s=3600)
    await sched.start()
    try:
        await env.at(sched, at(9, 0))
        assert env.platform.posts == []
    finally:
        await sched.shutdown()


async def test_a_challenge_play_opened_and_left_open_is_still_posted_at_the_slot(env: Env) -> None:
    env.clock.current = at(8, 0)
    await env.quiz.open_challenge(CHANNEL)  # no closing time: the slot adopts and posts it
    await env.schedules.set_schedule(ADMIN, CHANNEL, post_time="09:00", timezone="UTC")
    view = await env.schedules.show_schedule(CHANNEL)
    assert view is not None and view.taken == () and view.next_posts[0] == at(9, 0)
