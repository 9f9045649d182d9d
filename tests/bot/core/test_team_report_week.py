"""The week a weekly post reports: the last complete ISO week before the summary slot's local day, for
every summary day, claimed once per week reported (also across the change from the old rule); and the
web page's "last week", counted in the schedule's timezone.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator

import pytest

from bot.core.standings import PeriodKey
from bot.core.team_report import last_complete_week
from tests.bootstrap import Env, open_env
from tests.conftest import ADMIN, CHANNEL, actor
from tests.fakes import FakePlatform, FrozenClock

UTC = dt.UTC


@pytest.fixture
async def env(db_url: str, clock: FrozenClock, platform: FakePlatform) -> AsyncIterator[Env]:
    async with open_env(db_url, clock, platform) as made:
        yield made


@pytest.mark.parametrize(
    ("day", "monday"),
    [
        (dt.date(2026, 11, 30), dt.date(2026, 11, 23)),  # Monday: the week just ended
        (dt.date(2026, 12, 2), dt.date(2026, 11, 23)),  # Wednesday: still the whole week before
        (dt.date(2026, 12, 6), dt.date(2026, 11, 23)),  # Sunday: the week running is not complete
    ],
)
def test_last_complete_week_is_the_week_before_the_days_week(day: dt.date, monday: dt.date) -> None:
    assert last_complete_week(day) == monday


async def _miss_on(env: Env, when: dt.datetime) -> None:
    """Alice misses one problem of CHANNEL at first at ``when`` (a report lists it)."""
    env.clock.current = when
    challenge, _ = await env.quiz.open_challenge(CHANNEL, problems=1)
    [problem] = challenge.problems
    wrong = next(c.letter for c in problem.question.choices if not c.correct)
    await env.quiz.start_problem(actor("alice"), problem.id)
    await env.quiz.answer(actor("alice"), problem.id, wrong)
    await env.quiz.close_challenge(challenge.id)


async def _wednesday_schedule(env: Env) -> int:
    await env.schedules.set_schedule(
        ADMIN, CHANNEL, post_time="23:45", timezone="UTC", weekly_summary="wed", team_report="on"
    )
    return (await env.schedules.schedules())[0].channel_pk


async def test_a_wednesday_team_report_covers_every_played_day(env: Env) -> None:
    """Week 48 is played on Monday and on Friday; a Wednesday summary reports all of it, once."""
    await _miss_on(env, dt.datetime(2026, 11, 23, 10, 0, tzinfo=UTC))  # Monday
    await _miss_on(env, dt.datetime(2026, 11, 27, 10, 0, tzinfo=UTC))  # Friday
    pk = await _wednesday_schedule(env)
    env.clock.current = dt.datetime(2026, 11, 25, 23, 45, tzinfo=UTC)  # Wednesday of week 48 itself
    await env.schedules.weekly_summary(pk)
    assert [card.week_start for _, card in env.platform.team_reports] == [dt.date(2026, 11, 16)]
    env.clock.current = dt.datetime(2026, 12, 2, 23, 45, tzinfo=UTC)  # the next Wednesday
    await env.schedules.weekly_summary(pk)
    assert len(env.platform.team_reports) == 2
    card = env.platform.team_reports[1][1]
    assert card.title == "Team report · week of 2026-11-23" and card.week_start == dt.date(2026, 11, 23)
    assert sorted(m.first_attempts for m in card.missed) == [1, 1], "Monday's and Friday's problems"
    assert env.platform.summaries[-1][1].title.endswith("2026-W48")
    assert await env.schedules.weekly_summary(pk) is None  # claimed: once per week
    assert len(env.platform.team_reports) == 2


async def _legacy_claims(env: Env, pk: int, week_day: dt.date, at: dt.datetime) -> None:
    """The claims the old rule made at ``at`` for the week of ``week_day`` (same keys as today's)."""
    key = f"{pk}:{PeriodKey.week(week_day).key}"
    async with env.quiz._uow() as uow:
        assert await uow.schedules.claim("summary", key, at)
        assert await uow.schedules.claim("team_report", key, at)


async def test_a_week_partly_reported_by_the_old_rule_is_reported_whole_once(env: Env) -> None:
    """The old rule's Wednesday Nov 25 post claimed week 48 while it ran (Monday and Tuesday only): the
    first post by the new rule still reports week 48 whole, once, not skipped by that claim."""
    await _miss_on(env, dt.datetime(2026, 11, 27, 10, 0, tzinfo=UTC))  # Friday: not in the old post
    pk = await _wednesday_schedule(env)
    await _legacy_claims(env, pk, dt.date(2026, 11, 25), dt.datetime(2026, 11, 25, 23, 45, tzinfo=UTC))
    env.clock.current = dt.datetime(2026, 12, 2, 23, 45, tzinfo=UTC)
    assert await env.schedules.weekly_summary(pk) is not None
    [(_, card)] = env.platform.team_reports
    assert card.week_start == dt.date(2026, 11, 23) and len(card.missed) == 1
    assert await env.schedules.weekly_summary(pk) is None
    assert len(env.platform.team_reports) == 1 and len(env.platform.summaries) == 1


async def test_a_monday_week_reported_by_the_old_rule_is_not_reported_again(env: Env) -> None:
    """The old rule's Monday post already reported the complete week (same week, same key): a restart
    within grace after the change posts nothing twice."""
    await env.schedules.set_schedule(
        ADMIN, CHANNEL, post_time="09:00", timezone="UTC", weekly_summary="mon", team_report="on"
    )
    pk = (await env.schedules.schedules())[0].channel_pk
    slot = dt.datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
    await _legacy_claims(env, pk, dt.date(2026, 11, 29), slot)  # old rule: the day before the slot
    env.clock.current = slot + dt.timedelta(minutes=10)
    assert await env.schedules.weekly_summary(pk) is None
    assert env.platform.team_reports == [] and env.platform.summaries == []


async def test_web_page_week_is_the_schedules_week(env: Env) -> None:
    """Kiritimati (UTC+14): Sunday 12:00 UTC is Monday 02:00 there; the chat's report covers the week of
    Nov 23, and so does the page's 'last complete week', though the page names the channel in UTC."""
    await env.schedules.set_schedule(
        ADMIN,
        CHANNEL,
        post_time="01:00",
        timezone="Pacific/Kiritimati",
        weekly_summary="mon",
        team_report="on",
    )
    env.clock.current = dt.datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
    assert CHANNEL.timezone == "UTC"
    card = await env.quiz.last_week_report(CHANNEL)
    assert card.week_start == dt.date(2026, 11, 23)
    assert await env.quiz.schedule_timezone(CHANNEL) == "Pacific/Kiritimati"


async def test_web_page_week_without_a_schedule_is_the_channels(env: Env) -> None:
    env.clock.current = dt.datetime(2026, 11, 29, 12, 0, tzinfo=UTC)  # Sunday in UTC
    card = await env.quiz.last_week_report(CHANNEL)
    assert card.week_start == dt.date(2026, 11, 16)
