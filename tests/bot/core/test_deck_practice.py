"""A deck worth reviewing (issue 28 §1), on SQLite and PostgreSQL with a frozen clock: mistakes become
cards, new cards per day, retired questions' cards suspended, the player's own day (timezone and 4 am
cutoff) for due cards, the streak and the nudge, and FSRS parameters fitted per team."""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bot.core.models import Actor, ChannelRef, PlayerRef
from bot.core.player_day import InvalidTimezoneError, day_streak, parse_timezone, player_day
from bot.core.practice import OPTIMIZE_MIN_REVIEWS, PracticeError, PracticeService
from bot.core.practice_models import QuizQuestionCard
from bot.core.srs import DEFAULT_SCHEDULER
from bot.storage.models import CardReviewRow, ReviewCardModel
from bot.storage.uow import SqlUnitOfWork, session_factory
from tests.bootstrap import Env as AppEnv
from tests.bootstrap import open_env
from tests.conftest import ADMIN, CHANNEL, actor, make_spec, test_bank
from tests.fakes import FakePlatform, FrozenClock

ALICE = actor("alice")
BOB = actor("bob")


def _cards(n: int) -> list[dict[str, Any]]:
    return [
        {
            "id": f"card-{i:02d}",
            "kind": "flashcard",
            "topic": "DDP",
            "difficulty": "beginner",
            "front": f"Front {i}?",
            "back": f"Back {i}.",
        }
        for i in range(n)
    ]


class Env(AppEnv):
    """The app over one migrated database (an empty bank), and a way to count rows."""

    @functools.cached_property
    def factory(self) -> async_sessionmaker[AsyncSession]:
        return session_factory(self.engine)

    async def cards_of(self, user_id: str) -> dict[str, str]:
        """question id -> source of the player's cards."""
        from bot.storage.models import PlayerRow

        async with self.factory() as s, s.begin():
            rows = await s.execute(
                select(ReviewCardModel.question_id, ReviewCardModel.source)
                .join(PlayerRow, PlayerRow.id == ReviewCardModel.player_pk)
                .where(PlayerRow.user_id == user_id)
            )
            return {q: src for q, src in rows.tuples()}


@pytest.fixture
async def env(db_url: str, clock: FrozenClock, platform: FakePlatform) -> AsyncIterator[Env]:
    async with open_env(db_url, clock, platform, kind=Env, bank=[]) as made:
        yield made


async def _study(practice: PracticeService, who: PlayerRef, grade: str = "easy") -> list[str]:
    """Grade every card offered now; the question ids in order."""
    seen = []
    while (card := await practice.next_card(who)) is not None:
        seen.append(card.question_id)
        await practice.grade_card(who, card.card_id, grade, card.showing)
    return seen


# ------------------------------------------------------------------------------------ mistakes
async def test_a_wrong_quiz_answer_adds_the_questions_card_once_and_first(env: Env) -> None:
    await env.quiz.admin_import(ADMIN, test_bank())
    card: QuizQuestionCard | None = await env.practice.start_quiz(ALICE.player)
    wrong_ids = []
    while card is not None:
        letter = "B" if card.position in (2, 4) else "A"  # the test bank's answer is always A
        if letter == "B":
            wrong_ids.append(card.question_id)
        await env.practice.answer_quiz(ALICE.player, card.quiz_id, card.position, letter)
        await env.practice.answer_quiz(ALICE.player, card.quiz_id, card.position, "C")  # a repeat: no-op
        card = await env.practice.quiz_question(ALICE.player, card.quiz_id)
    cards = await env.cards_of("alice")
    assert cards == dict.fromkeys(wrong_ids, "mistake"), "only the wrong answers, once each"
    await env.practice.start_review(ALICE.player)
    first = []
    for _ in range(2):
        shown = await env.practice.next_card(ALICE.player)
        assert shown is not None
        first.append(shown.question_id)
        await env.practice.grade_card(ALICE.player, shown.card_id, "good", shown.showing)
    assert sorted(first) == sorted(wrong_ids), "review starts with the player's gaps"
    assert len(await env.cards_of("alice")) == 18, "the rest of the deck is the bank's, each card once"


async def test_a_wrong_challenge_answer_adds_the_card_at_once_but_not_a_tenants_own_question(
    env: Env,
) -> None:
    await env.quiz.admin_import(ADMIN, test_bank())
    challenge, _ = await env.quiz.open_challenge(CHANNEL)
    first, second = challenge.problems[:2]
    await env.quiz.start_problem(ALICE, first.id)
    await env.quiz.answer(ALICE, first.id, "B")  # wrong, one attempt left
    assert await env.cards_of("alice") == {first.question.id: "mistake"}, "before any review"
    await env.quiz.answer(ALICE, first.id, "C")
    await env.quiz.start_problem(ALICE, second.id)
    await env.quiz.answer(ALICE, second.id, "A")  # right: no card
    assert await env.cards_of("alice") == {first.question.id: "mistake"}

    # A tenant's own question stays in its tenant: a mistake on it adds nothing to the deck.
    other = ChannelRef("test", "ws2", "lab", "lab")
    tenant_admin = Actor(PlayerRef("test", "boss", "Boss"), is_admin=True, tenant=other.tenant)
    own = [make_spec(f"own-{i}", "intermediate", "DDP") for i in range(6)]
    await env.quiz.admin_import(tenant_admin, own)
    for spec in test_bank():  # the tenant plays only its own questions
        await env.quiz.admin_retire(tenant_admin, spec["id"])
    carol = actor("carol", other)
    own_challenge, _ = await env.quiz.open_challenge(other)
    mine = [p for p in own_challenge.problems if p.question.id.startswith("own-")]
    assert mine, "the tenant's challenge draws its own questions"
    await env.quiz.start_problem(carol, mine[0].id)
    await env.quiz.answer(carol, mine[0].id, "B")
    assert not any(q.startswith("own-") for q in await env.cards_of("carol"))
    await env.practice.start_review(carol.player)
    assert not any(q.startswith("own-") for q in await env.cards_of("carol"))


# ------------------------------------------------------------------------------------ new cards per day
async def test_new_cards_per_day_default_setting_and_the_4am_cutoff(env: Env, clock: FrozenClock) -> None:
    await env.quiz.admin_import(ADMIN, _cards(30))
    summary = await env.practice.start_review(ALICE.player)
    assert (summary.cards, summary.new_cards, summary.due_now, summary.new_today) == (30, 30, 10, 10)
    assert len(await _study(env.practice, ALICE.player)) == 10, "default: 10 new cards a day"
    assert await env.practice.set_new_per_day(ALICE.player, 3) == 3
    assert await _study(env.practice, ALICE.player) == [], "already 10 started today"
    with pytest.raises(PracticeError, match="0 to 200"):
        await env.practice.set_new_per_day(ALICE.player, 201)
    # START is 09:00 UTC; the next day starts at 04:00 UTC (no timezone set).
    clock.advance(18 * 3600)  # 03:00 the next calendar day: still the same player day
    assert await _study(env.practice, ALICE.player) == []
    clock.advance(3600)  # 04:00: a new day, 3 new cards (the easy reviews are due in days)
    assert len(await _study(env.practice, ALICE.player)) == 3
    await env.practice.set_new_per_day(ALICE.player, 0)
    clock.advance(86400)
    assert (await env.practice.start_review(ALICE.player)).new_today == 0
    assert (await env.practice.day_settings(ALICE.player)).new_per_day == 0
    assert (await env.practice.day_settings(BOB.player)).new_per_day == 10


async def test_retired_questions_cards_are_suspended(env: Env) -> None:
    await env.quiz.admin_import(ADMIN, _cards(3))
    await env.practice.start_review(ALICE.player)
    shown = await env.practice.next_card(ALICE.player)
    assert shown is not None
    await env.quiz.admin_retire(ADMIN, shown.question_id)
    summary = await env.practice.start_review(ALICE.player)
    assert (summary.cards, summary.suspended, summary.new_today) == (3, 1, 2)
    assert shown.question_id not in await _study(env.practice, ALICE.player)
    with pytest.raises(PracticeError, match="suspended"):
        await env.practice.grade_card(ALICE.player, shown.card_id, "good", shown.showing)
    stats = await env.practice.stats(ALICE.player)
    assert sum(t.cards for t in stats.topics) == 2


# ------------------------------------------------------------------------------------ the player's day
def test_timezones_are_validated_with_a_clear_error() -> None:
    assert parse_timezone(" Europe/Paris ") == "Europe/Paris"
    assert parse_timezone("europe/paris") == "Europe/Paris"
    assert parse_timezone("UTC") == "UTC"
    with pytest.raises(InvalidTimezoneError, match=r"'Europe/Pari' is not an IANA timezone.*Europe/Paris"):
        parse_timezone("Europe/Pari")
    # "localtime" and "Factory" are in the tz database but are no place: a player's day would follow the
    # bot server's clock.
    for bad in ("", "../../etc/passwd", "x" * 500, "localtime\x00", "localtime", "Factory", "posixrules"):
        with pytest.raises(InvalidTimezoneError):
            parse_timezone(bad)


def test_the_players_day_runs_from_4am_to_4am_in_their_zone() -> None:
    # 02:30 in Tokyo on the 22nd is still the 21st's day there; it ends at 04:00 JST (19:00 UTC).
    now = dt.datetime(2026, 11, 21, 17, 30, tzinfo=dt.UTC)
    day = player_day(now, "Asia/Tokyo")
    assert day.day == dt.date(2026, 11, 21)
    assert day.end == dt.datetime(2026, 11, 21, 19, 0, tzinfo=dt.UTC)
    assert player_day(now, None).day == dt.date(2026, 11, 21)
    # A DST change (02:00 on 1 November 2026): New York's day of 31 October, to 04:00 EST, lasts 25 hours.
    ny = player_day(dt.datetime(2026, 10, 31, 12, 0, tzinfo=dt.UTC), "America/New_York")
    assert ny.end - ny.start == dt.timedelta(hours=25)
    times = [dt.datetime(2026, 11, d, 20, 0, tzinfo=dt.UTC) for d in (17, 18, 19, 20)]
    # At 01:00 UTC on the 21st in UTC, the 20th's day is still on: 4 days; in Tokyo that was the 21st.
    assert day_streak(times, dt.datetime(2026, 11, 21, 1, 0, tzinfo=dt.UTC), None) == 4
    assert day_streak(times, dt.datetime(2026, 11, 23, 5, 0, tzinfo=dt.UTC), None) == 0


async def test_timezone_moves_due_cards_streak_and_nudge_to_the_players_day(
    env: Env, clock: FrozenClock
) -> None:
    await env.quiz.admin_import(ADMIN, _cards(2))
    with pytest.raises(InvalidTimezoneError, match="IANA"):
        await env.practice.set_timezone(ALICE.player, "Mars/Olympus")
    assert await env.practice.set_timezone(ALICE.player, "america/los_angeles") == "America/Los_Angeles"
    await env.practice.start_review(ALICE.player)
    # 09:00 UTC is 01:00 in Los Angeles: still the 20th's day there. Good twice (the second within the
    # learn-ahead) makes each card a review card, due in days.
    assert len(await _study(env.practice, ALICE.player, "good")) == 4
    stats = await env.practice.stats(ALICE.player)
    assert stats.review_streak == 1 and stats.timezone == "America/Los_Angeles"
    async with env.factory() as s, s.begin():
        due = list(await s.scalars(select(ReviewCardModel.due_at).order_by(ReviewCardModel.id)))
    # A review due later in the player's day counts as due today (as Anki), one due after it does not.
    target = due[0]
    local_day = player_day(target, "America/Los_Angeles")
    clock.advance((local_day.start - clock.now()).total_seconds() + 60)  # 04:01 there on the due day
    summary = await env.practice.start_review(ALICE.player)
    assert summary.due_now >= 1, "due before tonight's cutoff: due today"
    # The nudge: one per player day, claimed with the player's date.
    await env.practice.set_nudge(ALICE.player, True)
    platform = FakePlatform()
    await env.practice.send_nudges(platform)
    assert [(p.user_id, c.day) for p, c in platform.nudges] == [("alice", local_day.day)]
    clock.advance(3600)
    await env.practice.send_nudges(platform)
    assert len(platform.nudges) == 1, "the same day of the player's: not again"


# ------------------------------------------------------------------------------------ team parameters
class SlowEasyOptimizer:
    """A ParameterOptimizer returning FSRS's defaults with w3 (Easy's initial stability) = 20 days."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    def optimize(self, reviews: Any) -> tuple[float, ...]:
        self.calls.append(len(reviews))
        params = list(DEFAULT_SCHEDULER.parameters)
        params[3] = 20.0
        return tuple(params)


async def test_team_parameters_reach_a_bank_only_player_and_reschedule_their_cards(
    env: Env, clock: FrozenClock
) -> None:
    await env.quiz.admin_import(ADMIN, test_bank())
    optimizer = SlowEasyOptimizer()
    # Alice and Bob play the same tenant's challenge: one team. Bob has few reviews of his own.
    challenge, _ = await env.quiz.open_challenge(CHANNEL)
    for who in (ALICE, BOB):
        await env.quiz.start_problem(who, challenge.problems[0].id)
        await env.quiz.answer(who, challenge.problems[0].id, "A")
        await env.practice.start_review(who.player)
    bob_card = await env.practice.next_card(BOB.player)
    assert bob_card is not None
    await env.practice.grade_card(BOB.player, bob_card.card_id, "easy", bob_card.showing)
    async with env.factory() as s, s.begin():
        before = await s.scalar(select(ReviewCardModel.due_at).where(ReviewCardModel.id == bob_card.card_id))
    assert before == clock.now() + dt.timedelta(days=8)
    outcome = await env.practice.optimize_parameters(BOB.player, optimizer)
    assert not outcome.optimized and "default parameters" in outcome.reason

    # Alice's long history (seeded): 10 cards x 60 reviews two days apart, past the 512 needed as a team.
    async with env.factory() as s, s.begin():
        from bot.storage.models import PlayerRow

        alice_pk = await s.scalar(select(PlayerRow.id).where(PlayerRow.user_id == "alice"))
        card_ids = list(
            await s.scalars(select(ReviewCardModel.id).where(ReviewCardModel.player_pk == alice_pk).limit(10))
        )
        start = clock.now() - dt.timedelta(days=200)
        s.add_all(
            CardReviewRow(
                card_id=cid,
                grade="good",
                reviewed_at=start + dt.timedelta(days=2 * n, minutes=cid % 60),
                phase="review",
                interval_days=2,
                due_at=start + dt.timedelta(days=2 * n + 2),
            )
            for cid in card_ids
            for n in range(60)
        )
    outcomes = await env.practice.optimize_all(optimizer)
    scopes = {o.scope: o for o in outcomes}
    assert set(scopes) == {"player", CHANNEL.tenant.key}, outcomes
    team = scopes[CHANNEL.tenant.key]
    assert team.optimized and team.reviews >= OPTIMIZE_MIN_REVIEWS and "rescheduled" in team.reason
    # Bob, below 512 himself, is now scheduled with the team's parameters; his Easy card moved to 20 days.
    async with env.factory() as s, s.begin():
        after = await s.scalar(select(ReviewCardModel.due_at).where(ReviewCardModel.id == bob_card.card_id))
        reviews = await s.scalar(select(func.count()).select_from(CardReviewRow))
    assert after == clock.now() + dt.timedelta(days=20), "rescheduled with the team's parameters"
    assert reviews == 601, "rescheduling logs no review"
    nxt = await env.practice.next_card(BOB.player)
    assert nxt is not None and dict(nxt.next_intervals)["easy"] == "20d"
    outcome = await env.practice.optimize_parameters(BOB.player, optimizer)
    assert "your team's (test:ws1) parameters" in outcome.reason


async def test_every_reviewers_team_comes_from_one_query_and_matches_player_team(
    env: Env, clock: FrozenClock
) -> None:
    # Alice plays two problems in ws1 and one in ws2 (team ws1); Bob plays in ws2 only (team ws2).
    await env.quiz.admin_import(ADMIN, test_bank())
    other = ChannelRef("test", "ws2", "elsewhere", "elsewhere")
    here, _ = await env.quiz.open_challenge(CHANNEL)
    there, _ = await env.quiz.open_challenge(other)
    plays = [(ALICE, here, 0), (ALICE, here, 1), (ALICE, there, 0), (BOB, there, 0)]
    for who, challenge, n in plays:
        await env.quiz.start_problem(who, challenge.problems[n].id)
        await env.quiz.answer(who, challenge.problems[n].id, "A")
    for who in (ALICE, BOB):
        await env.practice.start_review(who.player)
        card = await env.practice.next_card(who.player)
        assert card is not None
        await env.practice.grade_card(who.player, card.card_id, "good", card.showing)
    async with SqlUnitOfWork(env.factory) as uow:
        teams = await uow.practice_settings.reviewer_teams()
        singly = {pk: await uow.practice_settings.player_team(pk) for pk in teams}
        assert await uow.practice_settings.team_players("test:ws2") == [
            pk for pk, t in teams.items() if t == "test:ws2"
        ]
    assert teams == singly
    assert sorted(teams.values()) == ["test:ws1", "test:ws2"]
