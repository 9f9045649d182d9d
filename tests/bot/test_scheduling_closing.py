"""Every open challenge is closed at its end by the scheduler, whatever posted it, once, across restarts.

The scheduler here is built as ``serve`` builds it: it serves some platforms (``platforms=``), which is the
mode where it used to look at schedules, not channels, to decide what it serves. Real database (SQLite
and PostgreSQL), APScheduler's real triggers, a controllable clock.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator

import pytest

from bot.core.errors import NotAdminError
from bot.core.models import ChannelRef
from bot.core.schedule import Schedule
from bot.core.schedule_service import NO_SCHEDULE_WINDOW
from tests.bootstrap import Env as AppEnv
from tests.bootstrap import open_env
from tests.conftest import ADMIN, CHANNEL, actor
from tests.fakes import FakePlatform, FrozenClock

UTC = dt.UTC
#: A channel of the same platform with no schedule at all.
UNSCHEDULED = ChannelRef("test", "ws1", "random", "random")


class Env(AppEnv):
    # As serve builds it: this process serves the "test" platform's channels.
    platforms = frozenset({"test"})

    def results_of(self, challenge_id: int) -> int:
        return sum(1 for _, card, _ in self.platform.results if card.challenge_id == challenge_id)


@pytest.fixture
async def env(db_url: str, clock: FrozenClock, platform: FakePlatform) -> AsyncIterator[Env]:
    async with open_env(db_url, clock, platform, kind=Env) as made:
        yield made


async def test_post_now_without_a_schedule_is_closed_at_its_end_once(env: Env) -> None:
    env.clock.current = dt.datetime(2026, 11, 23, 10, 0, tzinfo=UTC)
    # Another channel has a schedule: the unscheduled one must not depend on it either way.
    await env.schedules.set_schedule(ADMIN, CHANNEL, post_time="09:00", timezone="UTC")
    sched = await env.scheduler()
    try:
        card = await env.schedules.post_now(ADMIN, UNSCHEDULED)
        ends = env.clock.current + NO_SCHEDULE_WINDOW
        assert card.closes_at == ends, "a post-now without a schedule gets the default window"
        assert sched.next_run(f"close:{card.challenge_id}") == ends, "its close job is armed at once"
        await env.at(sched, ends - dt.timedelta(seconds=1))
        assert env.results_of(card.challenge_id) == 0
        await env.at(sched, ends)
        assert env.results_of(card.challenge_id) == 1, "closed at its end, results posted"
        assert (await env.quiz.get_challenge(card.challenge_id)).status == "closed"
    finally:
        await sched.shutdown()
    # A restart after the close: nothing is closed or posted again.
    again = await env.scheduler()
    try:
        await env.at(again, ends + dt.timedelta(hours=1))
        assert env.results_of(card.challenge_id) == 1
    finally:
        await again.shutdown()


async def test_post_now_without_a_schedule_closes_after_a_restart_past_its_end(env: Env) -> None:
    env.clock.current = dt.datetime(2026, 11, 23, 10, 0, tzinfo=UTC)
    card = await env.schedules.post_now(ADMIN, UNSCHEDULED)
    assert card.closes_at is not None
    # Nothing ran while the window ended; the next start closes it, once, even with two processes.
    env.clock.current = card.closes_at + dt.timedelta(hours=3)
    first, second = await env.scheduler(), await env.scheduler()
    try:
        await first.tick()
        await second.tick()
        assert env.results_of(card.challenge_id) == 1
        assert (await env.quiz.get_challenge(card.challenge_id)).status == "closed"
    finally:
        await first.shutdown()
        await second.shutdown()


async def test_a_windowless_challenge_left_by_an_older_version_is_closed(env: Env) -> None:
    # What post-now without a schedule made before: an open challenge with no closing time.
    env.clock.current = dt.datetime(2026, 11, 23, 10, 0, tzinfo=UTC)
    old = await env.quiz.post_daily(UNSCHEDULED)
    assert old.closes_at is None
    sched = await env.scheduler()
    try:
        await env.at(sched, dt.datetime(2026, 11, 23, 20, 0, tzinfo=UTC))
        assert env.results_of(old.challenge_id) == 0, "still within its day's window"
        end = dt.datetime(2026, 11, 23, 10, 0, tzinfo=UTC) + NO_SCHEDULE_WINDOW
        # The sync job finds it once its window (counted from when it opened) and the grace period ended.
        await env.at(sched, end + env.schedules.grace + dt.timedelta(minutes=2))
        assert env.results_of(old.challenge_id) == 1
        closed = await env.quiz.get_challenge(old.challenge_id)
        assert closed.status == "closed" and closed.closes_at == end
    finally:
        await sched.shutdown()
    again = await env.scheduler()
    try:
        await again.tick()
        assert env.results_of(old.challenge_id) == 1, "closed once"
    finally:
        await again.shutdown()


async def test_a_scheduled_window_whose_schedule_was_removed_still_closes(env: Env) -> None:
    # The challenge of a channel served by this process is closed whether its channel still has an
    # active schedule or not: pausing right after a post leaves that post's window to close on time.
    env.clock.current = dt.datetime(2026, 11, 23, 9, 0, tzinfo=UTC)
    await env.schedules.set_schedule(ADMIN, CHANNEL, post_time="09:00", timezone="UTC", window="60m")
    sched = await env.scheduler()
    try:
        assert len(env.platform.posts) == 1
        posted = env.platform.posts[0][1]
        await env.schedules.pause_schedule(ADMIN, CHANNEL)
        await env.at(sched, dt.datetime(2026, 11, 23, 10, 0, tzinfo=UTC))
        assert env.results_of(posted.challenge_id) == 1
    finally:
        await sched.shutdown()


async def test_another_platforms_challenges_are_left_to_its_process(env: Env) -> None:
    elsewhere = ChannelRef("other", "ws9", "c9", "c9")
    env.clock.current = dt.datetime(2026, 11, 23, 10, 0, tzinfo=UTC)
    card = await env.schedules.post_now(ADMIN, elsewhere)
    sched = await env.scheduler()
    try:
        assert card.closes_at is not None
        assert sched.next_run(f"close:{card.challenge_id}") is None
        await env.at(sched, card.closes_at + dt.timedelta(minutes=1))
        assert env.results_of(card.challenge_id) == 0, "served by the other platform's process"
    finally:
        await sched.shutdown()


# ---------------------------------------------------------------------- a workspace removed and back
async def test_a_workspace_removed_and_back_resumes_only_what_its_removal_paused(env: Env) -> None:
    remover = ADMIN
    channels = [ChannelRef("test", "ws1", c, c) for c in ("a", "b", "c")]
    other = ChannelRef("test", "ws2", "d", "d")
    for ch in (*channels, other):
        await env.schedules.set_schedule(ADMIN, ch, post_time="09:00", timezone="UTC")
    await env.schedules.pause_schedule(ADMIN, channels[1])  # an admin's own pause

    def states(schedules: list[Schedule]) -> dict[str, bool]:
        return {s.channel.channel_id: s.config.paused for s in schedules}

    paused = await env.schedules.suspend_workspace(remover, "test", "ws1")
    assert sorted(s.channel.channel_id for s in paused) == ["a", "c"]
    assert await env.schedules.suspend_workspace(remover, "test", "ws1") == [], "a second event: nothing"
    assert states(await env.schedules.schedules()) == {"a": True, "b": True, "c": True, "d": False}
    # An admin decides about "c" in between (after a manual resume, say): their pause is what counts.
    await env.schedules.pause_schedule(ADMIN, channels[2], paused=False)
    await env.schedules.pause_schedule(ADMIN, channels[2], paused=True)

    resumed = await env.schedules.resume_workspace(remover, "test", "ws1")
    assert [s.channel.channel_id for s in resumed] == ["a"]
    assert states(await env.schedules.schedules()) == {"a": False, "b": True, "c": True, "d": False}
    assert await env.schedules.resume_workspace(remover, "test", "ws1") == [], "resumed once"
    with pytest.raises(NotAdminError):
        await env.schedules.suspend_workspace(actor("someone"), "test", "ws1")
