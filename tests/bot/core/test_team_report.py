"""The weekly team report (issue 30 §1): opt-in per channel, built from the channel's week only (its
tenant's, its channel's), queued with the weekly summary as an outbox row of its own kind, posted once,
and retried and told to the admins when the platform refuses it.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from fractions import Fraction
from typing import Any

import pytest

from bot.core.cards import HeatCell, TeamReportCard
from bot.core.errors import ConfigurationError, NotAdminError
from bot.core.models import Actor, ChannelRef, PlayerRef, Problem
from bot.core.outbox import OutboxTiming
from bot.core.repositories.reports import ProblemFirstTries
from bot.core.schedule_service import ScheduleService
from bot.core.schedule_text import describe_schedule
from bot.core.service import QuizService
from bot.core.standings import PeriodKey, ScopeKey
from bot.core.team_report import MAX_EXPLANATION, heat_cells, most_missed, team_report_title
from tests.conftest import ADMIN, CHANNEL, actor
from tests.fakes import FakePlatform, FrozenClock

UTC = dt.UTC
TIMING = OutboxTiming(lease_s=60, retry_base_s=30, retry_max_s=600, give_up_s=3 * 3600)
#: Another channel of CHANNEL's tenant, and a channel of another tenant.
SIBLING = ChannelRef("test", "ws1", "random", "random")
OTHER = ChannelRef("test", "ws2", "general", "general")
OTHER_ADMIN = Actor(PlayerRef("test", "boss2", "Boss2"), is_admin=True, tenant=OTHER.tenant)
#: Saturday of ISO week 47, Wednesday of week 48, and the Monday after week 48 at the summary's slot.
WEEK_47 = dt.datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
WEEK_48 = dt.datetime(2026, 11, 25, 10, 0, tzinfo=UTC)
MONDAY = dt.datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


class Refusing(FakePlatform):
    """Refuses team reports while ``refuse`` is set, as a platform outage would."""

    def __init__(self) -> None:
        super().__init__()
        self.refuse = False

    async def post_team_report(self, *args: Any) -> None:
        if self.refuse:
            raise ConnectionResetError("the platform dropped the team report")
        await super().post_team_report(*args)


@pytest.fixture
def platform() -> FakePlatform:
    return Refusing()


@pytest.fixture
def schedules(service: QuizService, clock: FrozenClock, platform: Refusing) -> ScheduleService:
    service.outbox.timing = TIMING
    return ScheduleService(service._uow, clock, service, platform)


#: What the test did, per channel: (topic, difficulty, first attempt right) of every first attempt.
Played = list[tuple[str, str, bool]]


async def _try(
    quiz: QuizService, channel: ChannelRef, name: str, problem: Problem, right: bool, then: bool | None = None
) -> tuple[str, str, bool]:
    """``name`` answers ``problem``: right or wrong at first, then (``then``) a second attempt."""
    who = actor(name, channel)
    good = problem.question.correct_letter or "A"
    bad = next(c.letter for c in problem.question.choices if c.letter != good)
    await quiz.start_problem(who, problem.id)
    await quiz.answer(who, problem.id, good if right else bad)
    if then is not None:
        await quiz.answer(who, problem.id, good if then else bad)
    return problem.question.topic, problem.question.difficulty, right


async def _two_weeks(quiz: QuizService, clock: FrozenClock) -> tuple[list[Problem], Played, Played]:
    """Week 47 and week 48 in CHANNEL, and week 48 in SIBLING and OTHER; week 48's problems of CHANNEL
    and the first attempts of week 48 in CHANNEL and in OTHER.
    """
    clock.current = WEEK_47
    last, _ = await quiz.open_challenge(CHANNEL, problems=5)
    for p in last.problems:
        await _try(quiz, CHANNEL, "alice", p, True)
    await _try(quiz, CHANNEL, "bob", last.problems[0], True)
    await _try(quiz, CHANNEL, "dave", last.problems[1], True)
    clock.current = WEEK_48
    this, _ = await quiz.open_challenge(CHANNEL, problems=5)
    p1, p2, p3, p4, p5 = this.problems
    mine = [
        await _try(quiz, CHANNEL, "alice", p1, False),
        await _try(quiz, CHANNEL, "bob", p1, False),
        await _try(quiz, CHANNEL, "carol", p1, False),  # p1: 0 of 3
        await _try(quiz, CHANNEL, "bob", p2, True),
        await _try(quiz, CHANNEL, "dave", p2, False, then=True),
        await _try(quiz, CHANNEL, "carol", p2, False),  # p2: 1 of 3
        await _try(quiz, CHANNEL, "dave", p3, False, then=True),
        await _try(quiz, CHANNEL, "alice", p3, False),  # p3: 0 of 2 (ties p1's 0, fewer tried)
        await _try(quiz, CHANNEL, "bob", p4, True),
        await _try(quiz, CHANNEL, "dave", p4, True),
        await _try(quiz, CHANNEL, "carol", p4, False),  # p4: 2 of 3
        await _try(quiz, CHANNEL, "bob", p5, True),
        await _try(quiz, CHANNEL, "dave", p5, True),
        await _try(quiz, CHANNEL, "carol", p5, True),  # p5: nobody missed it
    ]
    # The same tenant's other channel and another tenant's channel, the same week: none of it is CHANNEL's.
    sibling, _ = await quiz.open_challenge(SIBLING, problems=2)
    for p in sibling.problems:
        await _try(quiz, SIBLING, "erin", p, False)
    other, _ = await quiz.open_challenge(OTHER, problems=3)
    theirs = [await _try(quiz, OTHER, "zed", p, i == 0) for i, p in enumerate(other.problems)]
    theirs.append(await _try(quiz, OTHER, "yan", other.problems[0], False))
    return list(this.problems), mine, theirs


def _cells(played: Played) -> set[HeatCell]:
    tried = Counter((t, d) for t, d, _ in played)
    right = Counter((t, d) for t, d, ok in played if ok)
    return {HeatCell(t, d, n, right[(t, d)]) for (t, d), n in tried.items()}


async def _movers_by_leaderboard(quiz: QuizService, channel_pk: int) -> list[tuple[str, int, int | None]]:
    """The movers as the channel's weekly leaderboards of weeks 48 and 47 rank them (another read)."""
    async with quiz._uow() as uow:
        now, _, _ = await uow.standings.leaderboard(
            ScopeKey.channel(channel_pk), PeriodKey.week(WEEK_48.date()), 100, None
        )
        before, _, _ = await uow.standings.leaderboard(
            ScopeKey.channel(channel_pk), PeriodKey.week(WEEK_47.date()), 100, None
        )
    was = {r.player_pk: r.rank for r in before}
    risers = [(r.display_name, r.rank, was[r.player_pk]) for r in now if was.get(r.player_pk, 0) > r.rank]
    risers.sort(key=lambda m: (m[1] - (m[2] or 0), m[1]))
    newcomers = [(r.display_name, r.rank, None) for r in now if r.player_pk not in was]
    return [*risers[:3], *newcomers[:3]]


async def _opt_in(schedules: ScheduleService, channel: ChannelRef, admin: Actor = ADMIN) -> int:
    saved = await schedules.set_schedule(
        admin, channel, post_time="09:00", timezone="UTC", weekly_summary="mon", team_report="on"
    )
    return saved.channel_pk


async def test_the_card_holds_the_channels_week_and_nothing_of_another_channel_or_tenant(
    service: QuizService, schedules: ScheduleService, platform: Refusing, clock: FrozenClock
) -> None:
    problems, mine, theirs = await _two_weeks(service, clock)
    pk = await _opt_in(schedules, CHANNEL)
    other_pk = await _opt_in(schedules, OTHER, OTHER_ADMIN)
    clock.current = MONDAY
    await schedules.weekly_summary(pk)
    await schedules.weekly_summary(other_pk)
    reports = {channel: card for channel, card in platform.team_reports}
    assert set(reports) == {CHANNEL, OTHER} and len(platform.team_reports) == 2
    card: TeamReportCard = reports[CHANNEL]
    assert card.title == "Team report · week of 2026-11-23" and card.week_start == dt.date(2026, 11, 23)
    assert set(card.cells) == _cells(mine) and len(card.cells) == len(_cells(mine))
    p1, p2, p3, _, _ = problems
    assert [(m.problem_id, m.first_attempts, m.first_correct) for m in card.missed] == [
        (p1.id, 3, 0),
        (p3.id, 2, 0),
        (p2.id, 3, 1),
    ]
    assert [m.question_id for m in card.missed] == [p.question.id for p in (p1, p3, p2)]
    assert [m.explanation for m in card.missed] == [f"because {p.question.id}" for p in (p1, p3, p2)]
    movers = [(m.display_name, m.rank, m.previous_rank) for m in card.movers]
    assert movers == await _movers_by_leaderboard(service, pk)
    assert any(name == "Carol" and was is None for name, _, was in movers)  # new this week
    assert any(was is not None for _, _, was in movers)  # and someone climbed
    assert not {"Zed", "Yan", "Erin"} & {m.display_name for m in card.movers}
    assert all(m.points > 0 for m in card.movers)
    theirs_card = reports[OTHER]
    assert set(theirs_card.cells) == _cells(theirs)
    assert {m.display_name for m in theirs_card.movers} == {"Zed"}  # Yan scored nothing: not on the board
    assert all(m.previous_rank is None for m in theirs_card.movers)
    mine_ids = {p.id for p in problems}
    assert not mine_ids & {m.problem_id for m in theirs_card.missed}


async def test_opted_out_channels_get_none_and_opted_in_get_one_however_often_the_job_runs(
    service: QuizService, schedules: ScheduleService, platform: Refusing, clock: FrozenClock
) -> None:
    await _two_weeks(service, clock)
    pk = await _opt_in(schedules, CHANNEL)
    out = await schedules.set_schedule(
        ADMIN, SIBLING, post_time="09:00", timezone="UTC", weekly_summary="mon", team_report="off"
    )
    clock.current = MONDAY
    another_process = ScheduleService(service._uow, clock, service, platform)
    for svc in (schedules, another_process, schedules):
        await svc.weekly_summary(pk)
        await svc.weekly_summary(out.channel_pk)
    await service.outbox.drain()
    assert [c for c, _ in platform.team_reports] == [CHANNEL]
    assert sorted(c.channel_id for c, _ in platform.summaries) == ["general", "random"]
    clock.current = MONDAY + dt.timedelta(days=7)  # the next week: its own report, once
    await schedules.weekly_summary(pk)
    await schedules.weekly_summary(pk)
    assert [card.week_start for _, card in platform.team_reports] == [
        dt.date(2026, 11, 23),
        dt.date(2026, 11, 30),
    ]


async def test_a_report_turned_on_after_the_summary_went_out_is_posted_once_within_grace(
    service: QuizService, schedules: ScheduleService, platform: Refusing, clock: FrozenClock
) -> None:
    await _two_weeks(service, clock)
    saved = await schedules.set_schedule(
        ADMIN, CHANNEL, post_time="09:00", timezone="UTC", weekly_summary="mon"
    )
    clock.current = MONDAY
    assert await schedules.weekly_summary(saved.channel_pk) is not None
    assert platform.team_reports == []
    await schedules.set_schedule(ADMIN, CHANNEL, team_report="on")
    clock.advance(600)  # a restart 10 minutes later runs the weekly job again (within grace)
    assert await schedules.weekly_summary(saved.channel_pk) is None  # the summary was posted already
    assert len(platform.team_reports) == 1 and len(platform.summaries) == 1


async def test_a_refused_team_report_is_retried_and_told_once_per_cause(
    service: QuizService, schedules: ScheduleService, platform: Refusing, clock: FrozenClock
) -> None:
    await _two_weeks(service, clock)
    pk = await _opt_in(schedules, CHANNEL)
    clock.current = MONDAY
    platform.refuse = True
    await schedules.weekly_summary(pk)
    assert platform.team_reports == [] and len(platform.summaries) == 1  # the summary is its own post
    [(channel, told)] = platform.delivery_notices
    assert channel == CHANNEL and told.kind == "team_report" and told.challenge_id is None
    assert told.retry_at is not None
    assert "the weekly team report (Team report · week of 2026-11-23)" in told.text()
    await schedules.weekly_summary(pk)  # the job again: claimed, nothing queued twice
    clock.advance(TIMING.retry_base_s)
    await service.outbox.drain()
    assert platform.team_reports == [] and len(platform.delivery_notices) == 1  # same cause: told once
    platform.refuse = False
    clock.advance(TIMING.retry_max_s)
    await service.outbox.drain()
    [(_, card)] = platform.team_reports
    assert card.week_start == dt.date(2026, 11, 23) and len(card.missed) == 3
    clock.advance(TIMING.retry_max_s)
    await service.outbox.drain()
    assert len(platform.team_reports) == 1


async def test_a_report_refused_until_its_give_up_time_is_given_up_with_a_last_notice(
    service: QuizService, schedules: ScheduleService, platform: Refusing, clock: FrozenClock
) -> None:
    pk = await _opt_in(schedules, CHANNEL)
    clock.current = MONDAY
    platform.refuse = True
    await schedules.weekly_summary(pk)
    for _ in range(int(TIMING.give_up_s // TIMING.retry_max_s) + 2):
        clock.advance(TIMING.retry_max_s)
        await service.outbox.drain()
    assert platform.team_reports == []
    last = platform.delivery_notices[-1][1]
    assert last.kind == "team_report" and last.retry_at is None  # given up: nobody tries again
    assert len(platform.delivery_notices) == 2
    platform.refuse = False
    clock.advance(TIMING.retry_max_s)
    await service.outbox.drain()
    assert platform.team_reports == []


async def test_the_setting_is_admin_only_needs_the_summary_day_and_shows_in_the_schedule(
    schedules: ScheduleService,
) -> None:
    with pytest.raises(NotAdminError):
        await schedules.set_schedule(
            actor("mallory"), CHANNEL, post_time="09:00", weekly_summary="mon", team_report="on"
        )
    with pytest.raises(ConfigurationError, match="posted with the weekly summary"):
        await schedules.set_schedule(ADMIN, CHANNEL, post_time="09:00", team_report="on")
    saved = await schedules.set_schedule(ADMIN, CHANNEL, post_time="09:00", weekly_summary="mon")
    assert not saved.config.team_report
    assert "team report" not in describe_schedule(saved)
    saved = await schedules.set_schedule(ADMIN, CHANNEL, team_report="on")
    assert saved.config.team_report
    assert "weekly summary with the team report on Mondays" in describe_schedule(saved)
    with pytest.raises(ConfigurationError, match="team report"):
        await schedules.set_schedule(ADMIN, CHANNEL, weekly_summary="off")  # would orphan the report
    with pytest.raises(ConfigurationError, match="'on' or 'off'"):
        await schedules.set_schedule(ADMIN, CHANNEL, team_report="sometimes")
    with pytest.raises(NotAdminError):
        await schedules.set_schedule(actor("mallory"), CHANNEL, team_report="off")
    view = await schedules.show_schedule(CHANNEL)
    assert view is not None and view.schedule.config.team_report  # refusals changed nothing
    saved = await schedules.set_schedule(ADMIN, CHANNEL, team_report="off", weekly_summary="off")
    assert not saved.config.team_report and saved.config.summary_day is None


def _tries(pid: int, attempts: int, correct: int, topic: str = "DDP", level: str = "advanced") -> Any:
    return ProblemFirstTries(pid, f"q{pid}", topic, level, attempts, correct, None)


def test_most_missed_compares_exact_shares_and_breaks_ties_the_same_way() -> None:
    # 1/3 and 2/6 are one share: the problem more players tried comes first, then the lower id.
    tries = [_tries(2, 3, 1), _tries(7, 6, 2), _tries(4, 6, 2), _tries(1, 2, 2), _tries(3, 5, 4)]
    missed = most_missed(tries)
    assert [m.problem_id for m in missed] == [4, 7, 2]
    assert [m.problem_id for m in most_missed(list(reversed(tries)))] == [4, 7, 2]
    assert all(Fraction(m.first_correct, m.first_attempts) == Fraction(1, 3) for m in missed)
    assert most_missed([_tries(1, 2, 2)]) == ()  # nobody missed it: not a missed question
    assert missed[0].explanation == "No explanation is stored for this question."
    long = ProblemFirstTries(5, "q5", "DDP", "expert", 1, 0, "x" * (MAX_EXPLANATION + 50))
    [cut] = most_missed([long])
    assert len(cut.explanation) == MAX_EXPLANATION and cut.explanation.endswith("…")


def test_heat_cells_sum_per_topic_and_difficulty_easiest_first() -> None:
    tries = [
        _tries(1, 3, 1, "FSDP", "expert"),
        _tries(2, 2, 2, "DDP", "expert"),
        _tries(3, 4, 1, "DDP", "intermediate"),
        _tries(4, 1, 0, "DDP", "expert"),
    ]
    assert heat_cells(tries) == (
        HeatCell("DDP", "intermediate", 4, 1),
        HeatCell("DDP", "expert", 3, 2),
        HeatCell("FSDP", "expert", 3, 1),
    )
    assert team_report_title(dt.date(2026, 11, 29)) == "Team report · week of 2026-11-23"


def test_a_movers_movement_reads_as_the_platforms_show_it() -> None:
    from bot.core.cards import Mover

    assert Mover("a", 10, rank=1, previous_rank=None).movement == "new"
    assert Mover("a", 10, rank=1, previous_rank=3).movement == "▲2"
    assert Mover("a", 10, rank=4, previous_rank=3).movement == "▼1"
    assert Mover("a", 10, rank=2, previous_rank=2).movement == "="
