"""The team report on the scheduler (issue 30 §1): posted by the weekly job with the summary in channels
that opted in, made up within grace after a restart, once however many processes run the job.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator

import pytest

from bot.core.models import ChannelRef
from tests.bootstrap import Env, open_env
from tests.conftest import ADMIN, CHANNEL, actor
from tests.fakes import FakePlatform, FrozenClock

UTC = dt.UTC
QUIET = ChannelRef("test", "ws1", "quiet", "quiet")


@pytest.fixture
async def env(db_url: str, clock: FrozenClock, platform: FakePlatform) -> AsyncIterator[Env]:
    async with open_env(db_url, clock, platform) as made:
        yield made


async def _week_47(env: Env) -> None:
    """Saturday of ISO week 47: Alice misses a problem of CHANNEL at first; both channels opt in or out."""
    env.clock.current = dt.datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
    challenge, _ = await env.quiz.open_challenge(CHANNEL, problems=1)
    [problem] = challenge.problems
    wrong = next(c.letter for c in problem.question.choices if not c.correct)
    await env.quiz.start_problem(actor("alice"), problem.id)
    await env.quiz.answer(actor("alice"), problem.id, wrong)
    await env.quiz.answer(actor("alice"), problem.id, problem.question.correct_letter or "A")
    await env.schedules.set_schedule(
        ADMIN, CHANNEL, post_time="23:45", timezone="UTC", weekly_summary="mon", team_report="on"
    )
    await env.schedules.set_schedule(ADMIN, QUIET, post_time="23:45", timezone="UTC", weekly_summary="mon")


async def test_the_weekly_job_posts_the_report_of_opted_in_channels_at_the_summary_slot(env: Env) -> None:
    await _week_47(env)
    env.clock.current = dt.datetime(2026, 11, 23, 8, 0, tzinfo=UTC)  # Monday
    sched = await env.scheduler()
    try:
        await env.at(sched, dt.datetime(2026, 11, 23, 23, 44, tzinfo=UTC))
        assert env.platform.team_reports == []
        await env.at(sched, dt.datetime(2026, 11, 23, 23, 45, tzinfo=UTC))
        assert len(env.platform.summaries) == 2
        [(channel, card)] = env.platform.team_reports
        assert channel == CHANNEL and card.title == "Team report · week of 2026-11-16"
        [missed] = card.missed
        assert (missed.first_attempts, missed.first_correct) == (1, 0)
        assert [(m.display_name, m.previous_rank) for m in card.movers] == [("Alice", None)]
        await env.at(sched, dt.datetime(2026, 11, 24, 1, 0, tzinfo=UTC))  # the outbox and sync jobs ran
        assert len(env.platform.team_reports) == 1
    finally:
        await sched.shutdown()


@pytest.mark.parametrize(("hour", "minute", "made_up"), [(0, 15, True), (1, 0, False)])
async def test_a_report_missed_while_down_is_made_up_within_grace_once(
    env: Env, hour: int, minute: int, made_up: bool
) -> None:
    await _week_47(env)
    # Down over Monday's 23:45 slot; back on Tuesday 00:15 (within the 1 h grace) or 01:00 (beyond it).
    env.clock.current = dt.datetime(2026, 11, 24, hour, minute, tzinfo=UTC)
    first = await env.scheduler()
    second = await env.scheduler()  # a second process (or a restart) posts nothing twice
    try:
        reports = [(c, card.week_start) for c, card in env.platform.team_reports]
        assert reports == ([(CHANNEL, dt.date(2026, 11, 16))] if made_up else [])
    finally:
        await first.shutdown()
        await second.shutdown()
