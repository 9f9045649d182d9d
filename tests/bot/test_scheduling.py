"""The scheduler on real databases (SQLite and PostgreSQL), driven by a controllable clock.

The clock is the only fake: APScheduler's real cron/date triggers compute the runs, the scheduler's job
table starts what is due by the clock, and the service writes to the real database.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import AsyncIterator
from zoneinfo import ZoneInfo

import pytest

from bot.core.errors import ConfigurationError, NotAdminError
from bot.core.models import ChannelRef
from bot.core.schedule import ScheduleConfig, next_slot, parse_days, parse_minutes, parse_time
from bot.core.schedule_service import ScheduleService
from tests.bootstrap import Env, open_env
from tests.conftest import ADMIN, CHANNEL, actor
from tests.fakes import FakePlatform, FrozenClock

UTC = dt.UTC
BERLIN = ZoneInfo("Europe/Berlin")


@pytest.fixture
async def env(db_url: str, clock: FrozenClock, platform: FakePlatform) -> AsyncIterator[Env]:
    """The app (tests/bootstrap.py) on a real database with the test bank."""
    async with open_env(db_url, clock, platform) as made:
        yield made


async def test_posts_at_nine_berlin_on_both_sides_of_dst(env: Env) -> None:
    # Friday 27 March 2026, 08:00 in Berlin (CET, UTC+1); clocks go forward on Sunday the 29th.
    env.clock.current = dt.datetime(2026, 3, 27, 7, 0, tzinfo=UTC)
    await env.schedules.set_schedule(ADMIN, CHANNEL, post_time="09:00", timezone="Europe/Berlin")
    sched = await env.scheduler()
    try:
        assert env.platform.posts == [], "yesterday's slot is beyond the grace period"
        job = f"post:{(await env.schedules.schedules())[0].channel_pk}"
        expected = [
            dt.datetime(2026, 3, 27, 8, 0, tzinfo=UTC),  # CET: 09:00 local = 08:00 UTC
            dt.datetime(2026, 3, 28, 8, 0, tzinfo=UTC),
            dt.datetime(2026, 3, 29, 7, 0, tzinfo=UTC),  # CEST: 09:00 local = 07:00 UTC
            dt.datetime(2026, 3, 30, 7, 0, tzinfo=UTC),
        ]
        for i, when in enumerate(expected):
            assert sched.next_run(job) == when
            await env.at(sched, when - dt.timedelta(seconds=1))
            assert len(env.platform.posts) == i, "nothing is posted a second early"
            await env.at(sched, when)
            assert len(env.platform.posts) == i + 1
            challenge = await env.quiz.get_challenge(env.platform.posts[-1][1].challenge_id)
            local = challenge.opened_at.astimezone(BERLIN)
            assert (local.hour, local.minute) == (9, 0) and challenge.day == local.date()
            # Default window: until the next post (09:00 local the next day, DST or not).
            assert challenge.closes_at is not None
            assert challenge.closes_at.astimezone(BERLIN).time() == dt.time(9, 0)
            assert len(env.platform.results) == i, "each post closes the previous day's window"
    finally:
        await sched.shutdown()
    # Autumn too: 09:00 Berlin is 07:00 UTC before 25 October 2026 and 08:00 UTC after.
    cfg = ScheduleConfig(9, 0, "Europe/Berlin")
    assert next_slot(cfg, dt.datetime(2026, 10, 24, 0, 0, tzinfo=UTC)) == dt.datetime(
        2026, 10, 24, 7, 0, tzinfo=UTC
    )
    assert next_slot(cfg, dt.datetime(2026, 10, 25, 0, 0, tzinfo=UTC)) == dt.datetime(
        2026, 10, 25, 8, 0, tzinfo=UTC
    )


async def test_posts_at_nine_berlin_across_the_autumn_change(env: Env) -> None:
    # Friday 23 October 2026, 08:00 in Berlin (CEST, UTC+2); clocks go back (03:00 -> 02:00) on Sunday
    # the 25th. A second channel posts at 02:30, a local time that happens twice that night: once only.
    night = ChannelRef("test", "ws1", "night", "night")
    env.clock.current = dt.datetime(2026, 10, 23, 6, 0, tzinfo=UTC)
    await env.schedules.set_schedule(ADMIN, CHANNEL, post_time="09:00", timezone="Europe/Berlin")
    await env.schedules.set_schedule(ADMIN, night, post_time="02:30", timezone="Europe/Berlin")
    sched = await env.scheduler()

    def posted(channel_id: str) -> list[int]:
        return [c.challenge_id for ch, c in env.platform.posts if ch.channel_id == channel_id]

    try:
        assert env.platform.posts == []
        pks = {s.channel.channel_id: s.channel_pk for s in await env.schedules.schedules()}
        nine = [
            dt.datetime(2026, 10, 23, 7, 0, tzinfo=UTC),  # CEST: 09:00 local = 07:00 UTC
            dt.datetime(2026, 10, 24, 7, 0, tzinfo=UTC),
            dt.datetime(2026, 10, 25, 8, 0, tzinfo=UTC),  # CET: 09:00 local = 08:00 UTC
            dt.datetime(2026, 10, 26, 8, 0, tzinfo=UTC),
        ]
        half_past_two = [
            dt.datetime(2026, 10, 24, 0, 30, tzinfo=UTC),
            dt.datetime(2026, 10, 25, 0, 30, tzinfo=UTC),  # the first 02:30 (CEST) of the 25th
            dt.datetime(2026, 10, 26, 1, 30, tzinfo=UTC),  # CET
        ]
        events = sorted([(t, CHANNEL.channel_id) for t in nine] + [(t, "night") for t in half_past_two])
        for when, channel_id in events:
            assert sched.next_run(f"post:{pks[channel_id]}") == when
            before = len(posted(channel_id))
            await env.at(sched, when - dt.timedelta(seconds=1))
            assert len(posted(channel_id)) == before, "nothing is posted a second early"
            await env.at(sched, when)
            assert len(posted(channel_id)) == before + 1
            challenge = await env.quiz.get_challenge(posted(channel_id)[-1])
            assert challenge.opened_at == when
            local = when.astimezone(BERLIN)
            assert challenge.day == local.date()
            if channel_id == CHANNEL.channel_id:
                assert (local.hour, local.minute) == (9, 0)
                # Default window: until the next post, 09:00 local the next day.
                assert challenge.closes_at is not None
                assert challenge.closes_at.astimezone(BERLIN).time() == dt.time(9, 0)
                if challenge.day == dt.date(2026, 10, 24):
                    assert challenge.closes_at - challenge.opened_at == dt.timedelta(hours=25)
            if when == dt.datetime(2026, 10, 25, 0, 30, tzinfo=UTC):
                # The second 02:30 (01:30 UTC) is the same local date: the day's challenge exists already.
                await env.at(sched, dt.datetime(2026, 10, 25, 1, 30, tzinfo=UTC))
                assert len(posted("night")) == before + 1
        assert len(posted(CHANNEL.channel_id)) == 4 and len(posted("night")) == 3
    finally:
        await sched.shutdown()


async def test_window_reminder_close_and_results_once_with_schedule_overrides(env: Env) -> None:
    env.clock.current = dt.datetime(2026, 11, 21, 11, 0, tzinfo=UTC)
    await env.schedules.set_schedule(
        ADMIN,
        CHANNEL,
        post_time="12:00",
        timezone="UTC",
        problems=3,
        time_limit_s=30,
        attempts=1,
        window="60m",
        reminder="15m",
    )
    sched = await env.scheduler()
    try:
        await env.at(sched, dt.datetime(2026, 11, 21, 12, 0, tzinfo=UTC))
        assert len(env.platform.posts) == 1
        card = env.platform.posts[0][1]
        challenge = await env.quiz.get_challenge(card.challenge_id)
        assert len(challenge.problems) == 3
        assert {(p.question.time_limit_s, p.question.attempts) for p in challenge.problems} == {(30, 1)}
        assert challenge.closes_at == dt.datetime(2026, 11, 21, 13, 0, tzinfo=UTC)
        assert sched.next_run(f"remind:{challenge.id}") == dt.datetime(2026, 11, 21, 12, 45, tzinfo=UTC)
        assert sched.next_run(f"close:{challenge.id}") == challenge.closes_at

        # A player plays under the schedule's limits: a 30 s deadline and a single attempt.
        alice, first = actor("alice"), challenge.problems[0]
        started = await env.quiz.start_problem(alice, first.id)
        assert started.deadline - started.started_at == dt.timedelta(seconds=30)
        assert started.attempts_total == 1
        wrong = next(c.letter for c in first.question.choices if not c.correct)
        feedback = await env.quiz.answer(alice, first.id, wrong)
        assert feedback.over and feedback.outcome == "wrong"

        await env.at(sched, dt.datetime(2026, 11, 21, 12, 44, 59, tzinfo=UTC))
        assert env.platform.reminders == []
        await env.at(sched, dt.datetime(2026, 11, 21, 12, 45, tzinfo=UTC))
        assert [r[1].challenge_id for r in env.platform.reminders] == [challenge.id]
        assert await env.schedules.remind(challenge.id) is False, "the reminder is claimed once"

        assert env.platform.results == []
        await env.at(sched, dt.datetime(2026, 11, 21, 13, 0, tzinfo=UTC))
        assert len(env.platform.results) == 1
        results = env.platform.results[0][1]
        assert results.challenge_id == challenge.id and results.players == 1
        assert env.platform.results[0][2] == f"msg-{challenge.id}", "results edit the original post"
        assert await env.schedules.close_window(challenge.id) is None
        await env.at(sched, dt.datetime(2026, 11, 21, 14, 0, tzinfo=UTC))
        assert len(env.platform.results) == 1
        assert (await env.quiz.get_challenge(challenge.id)).status == "closed"
    finally:
        await sched.shutdown()


async def test_missed_post_within_grace_is_made_beyond_grace_is_skipped(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    late = ChannelRef("test", "ws1", "late", "late")
    # Set the day before (a slot before its schedule was set is not missed); no process ran since.
    env.clock.current = dt.datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
    await env.schedules.set_schedule(ADMIN, CHANNEL, post_time="09:00", timezone="UTC")  # 30 min ago
    await env.schedules.set_schedule(ADMIN, late, post_time="08:15", timezone="UTC")  # 75 min ago
    env.clock.current = dt.datetime(2026, 11, 21, 9, 30, tzinfo=UTC)
    with caplog.at_level(logging.WARNING, logger="bot.core.schedule_service"):
        sched = await env.scheduler()
    try:
        assert [c.channel_id for c, _ in env.platform.posts] == [CHANNEL.channel_id]
        assert env.platform.posts[0][1].day == dt.date(2026, 11, 21)
        assert any("missed post of channel late" in r.getMessage() for r in caplog.records)
        late_pk = next(
            s.channel_pk for s in await env.schedules.schedules() if s.channel.channel_id == "late"
        )
        assert sched.next_run(f"post:{late_pk}") == dt.datetime(2026, 11, 22, 8, 15, tzinfo=UTC)
        # A second start (another instance, or a restart) within grace posts nothing more.
        again = await env.scheduler()
        await again.shutdown()
        assert len(env.platform.posts) == 1
    finally:
        await sched.shutdown()


async def test_late_post_whose_window_is_over_is_skipped_not_opened_closed(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    # 09:00 with a 10 min window; the process starts at 09:30: within the 1 h grace, but the window
    # (09:00-09:10) is over, so posting would open and close the challenge at once.
    env.clock.current = dt.datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
    await env.schedules.set_schedule(ADMIN, CHANNEL, post_time="09:00", timezone="UTC", window="10m")
    env.clock.current = dt.datetime(2026, 11, 21, 9, 30, tzinfo=UTC)
    with caplog.at_level(logging.WARNING, logger="bot.core.schedule_service"):
        sched = await env.scheduler()
    try:
        assert env.platform.posts == [] and env.platform.results == []
        assert any("its window ends at 2026-11-21T09:10:00+00:00" in r.getMessage() for r in caplog.records)
        pk = (await env.schedules.schedules())[0].channel_pk
        assert await env.schedules.open_windows() == []
        outcome = await env.schedules.post_scheduled(pk)
        assert outcome.status == "skipped" and "window ends at" in outcome.reason
        # The next day posts on time as usual.
        await env.at(sched, dt.datetime(2026, 11, 22, 9, 0, tzinfo=UTC))
        assert [c.day for _, c in env.platform.posts] == [dt.date(2026, 11, 22)]
    finally:
        await sched.shutdown()


@pytest.mark.parametrize(
    ("late_min", "time_limit", "posted"),
    [(5, None, True), (9, None, False), (9, "30", True)],
)
async def test_late_post_needs_one_problem_time_limit_left(
    env: Env, late_min: int, time_limit: str | None, posted: bool
) -> None:
    """5 min late in a 10 min window leaves 5 min: posted, closing at 09:10 (not 5 min after the start).
    9 min late leaves 60 s: less than the default 120 s time limit (skipped), enough for a 30 s one."""
    env.clock.current = dt.datetime(2026, 11, 21, 9, late_min, tzinfo=UTC)
    await env.schedules.set_schedule(
        ADMIN,
        CHANNEL,
        post_time="09:00",
        timezone="UTC",
        window="10m",
        **({"time_limit_s": int(time_limit)} if time_limit else {}),  # type: ignore[arg-type]
    )
    sched = await env.scheduler()
    try:
        assert len(env.platform.posts) == int(posted)
        if posted:
            card = env.platform.posts[0][1]
            assert card.closes_at == dt.datetime(2026, 11, 21, 9, 10, tzinfo=UTC)
            await env.at(sched, dt.datetime(2026, 11, 21, 9, 10, tzinfo=UTC))
            assert [r[1].challenge_id for r in env.platform.results] == [card.challenge_id]
    finally:
        await sched.shutdown()


async def test_a_window_as_short_as_one_problem_posts_on_time(env: Env) -> None:
    # A 2 min window with the default 120 s time limit: on time, the window is what the admin chose (it was
    # skipped every day as "missed" because the job fired a few milliseconds after the slot).
    env.clock.current = dt.datetime(2026, 11, 21, 8, 0, tzinfo=UTC)
    await env.schedules.set_schedule(ADMIN, CHANNEL, post_time="09:00", timezone="UTC", window="2m")
    sched = await env.scheduler()
    try:
        await env.at(sched, dt.datetime(2026, 11, 21, 9, 0, 0, 62000, tzinfo=UTC))
        assert len(env.platform.posts) == 1
        assert env.platform.posts[0][1].closes_at == dt.datetime(2026, 11, 21, 9, 2, tzinfo=UTC)
    finally:
        await sched.shutdown()


async def test_zero_grace_still_posts_a_job_that_fires_a_moment_late(env: Env) -> None:
    env.schedules.grace = dt.timedelta(0)  # RANKZERO_GRACE_MINUTES=0: never post missed slots
    env.clock.current = dt.datetime(2026, 11, 21, 8, 0, tzinfo=UTC)
    await env.schedules.set_schedule(ADMIN, CHANNEL, post_time="09:00", timezone="UTC")
    sched = await env.scheduler()
    try:
        # The event loop woke half a second after the slot: still the on-time post.
        await env.at(sched, dt.datetime(2026, 11, 21, 9, 0, 0, 500000, tzinfo=UTC))
        assert len(env.platform.posts) == 1
    finally:
        await sched.shutdown()


async def test_overdue_window_closes_at_start_once(env: Env) -> None:
    env.clock.current = dt.datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
    await env.schedules.set_schedule(ADMIN, CHANNEL, post_time="12:00", timezone="UTC", window="30m")
    first = await env.scheduler()
    assert len(env.platform.posts) == 1
    await first.shutdown()  # down from 12:00 to 15:00: the window ended meanwhile
    env.clock.current = dt.datetime(2026, 11, 21, 15, 0, tzinfo=UTC)
    second = await env.scheduler()
    third = await env.scheduler()
    try:
        assert len(env.platform.results) == 1
        assert len(env.platform.posts) == 1, "12:00 is 3 h ago: beyond grace, and already posted anyway"
    finally:
        await second.shutdown()
        await third.shutdown()


async def test_weekly_summary_posts_last_weeks_leaderboard_once(env: Env) -> None:
    # Saturday of ISO week 47: Alice solves a problem.
    env.clock.current = dt.datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
    challenge, _ = await env.quiz.open_challenge(CHANNEL)
    problem = challenge.problems[0]
    await env.quiz.start_problem(actor("alice"), problem.id)
    await env.quiz.answer(actor("alice"), problem.id, problem.question.correct_letter or "A")
    await env.schedules.set_schedule(ADMIN, CHANNEL, post_time="09:00", timezone="UTC", weekly_summary="mon")
    env.clock.current = dt.datetime(2026, 11, 23, 8, 0, tzinfo=UTC)  # Monday
    sched = await env.scheduler()
    try:
        await env.at(sched, dt.datetime(2026, 11, 23, 9, 0, tzinfo=UTC))
        assert len(env.platform.summaries) == 1
        board = env.platform.summaries[0][1]
        assert board.title.endswith("2026-W47") and [r.display_name for r in board.rows] == ["Alice"]
        pk = (await env.schedules.schedules())[0].channel_pk
        assert await env.schedules.weekly_summary(pk) is None, "claimed: one summary per week"
    finally:
        await sched.shutdown()


@pytest.mark.parametrize(("start", "made_up"), [((24, 0, 15), True), ((24, 1, 0), False)])
async def test_weekly_summary_missed_while_down_is_made_up_within_grace(
    env: Env, start: tuple[int, int, int], made_up: bool
) -> None:
    # Saturday of ISO week 47: Alice solves a problem. The summary is due Monday the 23rd at 23:45.
    env.clock.current = dt.datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
    challenge, _ = await env.quiz.open_challenge(CHANNEL)
    problem = challenge.problems[0]
    await env.quiz.start_problem(actor("alice"), problem.id)
    await env.quiz.answer(actor("alice"), problem.id, problem.question.correct_letter or "A")
    await env.schedules.set_schedule(ADMIN, CHANNEL, post_time="23:45", timezone="UTC", weekly_summary="mon")
    # Down over the slot; back on Tuesday 00:15 (30 min late: within the 1 h grace) or 01:00 (75 min).
    day, hour, minute = start
    env.clock.current = dt.datetime(2026, 11, day, hour, minute, tzinfo=UTC)
    first = await env.scheduler()
    second = await env.scheduler()  # a second instance (or restart) makes nothing twice
    try:
        if made_up:
            assert len(env.platform.summaries) == 1
            board = env.platform.summaries[0][1]
            # The week before the summary's Monday, though it is Tuesday now.
            assert board.title.endswith("2026-W47") and [r.display_name for r in board.rows] == ["Alice"]
        else:
            assert env.platform.summaries == []
        pk = (await env.schedules.schedules())[0].channel_pk
        assert first.next_run(f"summary:{pk}") == dt.datetime(2026, 11, 30, 23, 45, tzinfo=UTC)
    finally:
        await first.shutdown()
        await second.shutdown()


async def test_schedule_changes_rebuild_jobs_and_pause_stops_posts(env: Env) -> None:
    env.clock.current = dt.datetime(2026, 11, 21, 6, 0, tzinfo=UTC)
    await env.schedules.set_schedule(ADMIN, CHANNEL, post_time="09:00", timezone="UTC")
    sched = await env.scheduler()
    try:
        pk = (await env.schedules.schedules())[0].channel_pk
        assert sched.next_run(f"post:{pk}") == dt.datetime(2026, 11, 21, 9, 0, tzinfo=UTC)
        # Changed elsewhere (the CLI, another instance): the sync job notices and rebuilds.
        elsewhere = ScheduleService(env.schedules._uow, env.clock, env.quiz)
        await elsewhere.set_schedule(ADMIN, CHANNEL, post_time="10:30", timezone="America/New_York")
        assert sched.next_run(f"post:{pk}") == dt.datetime(2026, 11, 21, 9, 0, tzinfo=UTC)
        await env.at(sched, dt.datetime(2026, 11, 21, 6, 1, 1, tzinfo=UTC))  # the sync job runs
        assert sched.next_run(f"post:{pk}") == dt.datetime(2026, 11, 21, 15, 30, tzinfo=UTC)
        # Changed through this process's service (an adapter's admin command): rebuilt at once.
        await env.schedules.pause_schedule(ADMIN, CHANNEL)
        assert sched.next_run(f"post:{pk}") is None
        await env.at(sched, dt.datetime(2026, 11, 21, 15, 30, tzinfo=UTC))
        assert env.platform.posts == []
        view = await env.schedules.show_schedule(CHANNEL)
        assert view is not None and view.schedule.config.paused and view.next_posts == ()
    finally:
        await sched.shutdown()


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"timezone": "Europe/Atlantis"}, "unknown timezone 'Europe/Atlantis'"),
        ({"post_time": "25:00"}, "'25:00' is not a time of day"),
        ({"post_time": "9am"}, "not HH:MM"),
        ({"problems": 0}, "problems per challenge is 0"),
        ({"days": ""}, "days is empty"),
        ({"days": "funday"}, "'funday' is not a day"),
        ({"window": "30m", "reminder": "45m"}, "does not fit in a 30 min window"),
        ({"attempts": 9}, "attempts 9"),
    ],
)
async def test_bad_configuration_is_refused_and_changes_nothing(
    env: Env, changes: dict[str, object], message: str
) -> None:
    before = await env.schedules.set_schedule(
        ADMIN, CHANNEL, post_time="09:00", timezone="Europe/Berlin", days="mon-fri"
    )
    env.clock.advance(60)
    with pytest.raises(ConfigurationError, match=message.replace("(", r"\(")):
        await env.schedules.set_schedule(ADMIN, CHANNEL, **changes)  # type: ignore[arg-type]
    after = await env.schedules.show_schedule(CHANNEL)
    assert after is not None and after.schedule == before


async def test_bad_first_schedule_creates_nothing_and_admin_is_required(env: Env) -> None:
    other = ChannelRef("test", "ws1", "fresh", "fresh")
    with pytest.raises(ConfigurationError, match="unknown timezone"):
        await env.schedules.set_schedule(ADMIN, other, post_time="09:00", timezone="Nowhere/Land")
    assert await env.schedules.schedules() == []
    with pytest.raises(NotAdminError):
        await env.schedules.set_schedule(actor("mallory"), other, post_time="09:00")
    with pytest.raises(NotAdminError):
        await env.schedules.pause_schedule(actor("mallory"), other)
    assert await env.schedules.schedules() == []


def test_parsers() -> None:
    assert parse_time("09:05") == (9, 5)
    assert parse_days("mon-fri") == (1, 2, 3, 4, 5)
    assert parse_days("fri-mon") == (1, 5, 6, 7)
    assert parse_days("Mon, wed,FRI") == (1, 3, 5)
    assert parse_days("weekends") == (6, 7)
    assert parse_minutes("1h30m", "window") == 90
    assert parse_minutes("45", "window") == 45
    assert parse_minutes("off", "reminder") is None
    with pytest.raises(ConfigurationError, match="use minutes"):
        parse_minutes("soon", "reminder")


def test_schedule_cli_targets_the_console_channel_of_play() -> None:
    from bot import cli
    from bot.cli import serve as serve_cli

    # serve.py imports the name for its own use (not re-exported), so it is read from the module dict.
    assert vars(serve_cli)["CONSOLE_CHANNEL"] == cli.CONSOLE_CHANNEL


async def test_post_now_before_the_slot_gets_the_days_whole_window(env: Env) -> None:
    # 08:55 for a daily 09:00 post, window "until the next post": closes tomorrow at 09:00, not at 09:00
    # today (which would close it after five minutes and leave the day without a challenge).
    env.clock.current = dt.datetime(2026, 11, 23, 8, 55, tzinfo=UTC)
    await env.schedules.set_schedule(ADMIN, CHANNEL, post_time="09:00", timezone="UTC")
    card = await env.schedules.post_now(ADMIN, CHANNEL)
    challenge = await env.quiz.get_challenge(card.challenge_id)
    assert challenge.closes_at == dt.datetime(2026, 11, 24, 9, 0, tzinfo=UTC)
    sched = await env.scheduler()
    try:
        await env.at(sched, dt.datetime(2026, 11, 23, 9, 0, tzinfo=UTC))
        assert len(env.platform.posts) == 1, "the scheduled post finds the day's challenge"
        assert env.platform.results == []
        assert (await env.quiz.get_challenge(challenge.id)).status == "open"
    finally:
        await sched.shutdown()


async def test_post_now_after_the_slot_counts_the_window_from_now(env: Env) -> None:
    env.clock.current = dt.datetime(2026, 11, 23, 10, 0, tzinfo=UTC)
    await env.schedules.set_schedule(ADMIN, CHANNEL, post_time="09:00", timezone="UTC", window="60m")
    card = await env.schedules.post_now(ADMIN, CHANNEL)
    challenge = await env.quiz.get_challenge(card.challenge_id)
    assert challenge.closes_at == dt.datetime(2026, 11, 23, 11, 0, tzinfo=UTC)


async def test_find_challenge_uses_the_schedules_day(env: Env) -> None:
    # 12:00 UTC on the 23rd is already the 24th on Kiritimati (UTC+14); the channel's own zone is UTC.
    env.clock.current = dt.datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
    assert await env.quiz.find_challenge(CHANNEL) is None, "nothing posted, nothing created"
    await env.schedules.set_schedule(ADMIN, CHANNEL, post_time="09:00", timezone="Pacific/Kiritimati")
    card = await env.schedules.post_now(ADMIN, CHANNEL)
    assert card.day == dt.date(2026, 11, 24)
    found = await env.quiz.find_challenge(CHANNEL)
    assert found is not None and found.challenge_id == card.challenge_id


async def test_job_table_coalesces_skips_a_running_instance_and_stops() -> None:
    """The job table's own semantics: a job that fell behind runs once, one instance per job, stop ends."""
    import asyncio

    from apscheduler.triggers.interval import IntervalTrigger

    from bot.scheduling import JobTable, ScheduledJob

    start = dt.datetime(2026, 11, 21, 9, 0, tzinfo=UTC)
    clock = FrozenClock(start)
    table = JobTable(clock)
    runs: list[dt.datetime] = []
    release = asyncio.Event()

    async def job() -> None:
        runs.append(clock.now())
        await release.wait()

    trigger = IntervalTrigger(seconds=60, start_date=start, timezone=UTC)
    table.add(ScheduledJob("every-minute", job, (), trigger, start + dt.timedelta(seconds=60)))
    table.start()
    try:
        clock.current = start + dt.timedelta(minutes=10, seconds=30)  # ten runs missed
        table.run_due()
        await asyncio.sleep(0)
        assert runs == [clock.current], "coalesced: one run for the ten missed"
        following = table.get("every-minute")
        assert following is not None and following.next_run_time == start + dt.timedelta(minutes=11)
        clock.current = start + dt.timedelta(minutes=11)
        table.run_due()  # the first run is still going: skipped, and the job moves on
        await asyncio.sleep(0)
        assert len(runs) == 1
        assert following.next_run_time == start + dt.timedelta(minutes=12)
        release.set()
        await asyncio.sleep(0)
        clock.current = start + dt.timedelta(minutes=12)
        table.run_due()
        await asyncio.sleep(0)
        assert len(runs) == 2
    finally:
        # A wake-up set at the moment of stopping must not keep the task alive (asyncio.wait_for in 3.11
        # could swallow that cancellation).
        table.add(ScheduledJob("late", job, (), trigger, start + dt.timedelta(days=1)))
        await asyncio.wait_for(table.stop(), 5)
    assert not table.running
