"""The learned difficulty through the engine on real databases (SQLite and PostgreSQL): updated once when
a challenge closes, per tenant; used by the daily ramp past the setting's attempts; listed for admins
where it disagrees with the label; the team's weakest topics in the insights.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator

import pytest

from bot.commands.practice import PracticeFlow
from bot.core.difficulty import DifficultyEstimate, label_prior
from bot.core.errors import ConfigurationError, NotAdminError, NotFoundError
from bot.core.models import Actor, ChannelRef, PlayerRef, Tenant
from bot.core.service import QuizService
from bot.services import App
from bot.storage.uow import SqlUnitOfWork, session_factory
from tests.bootstrap import build_test_app
from tests.conftest import ADMIN, CHANNEL, actor, make_spec, test_bank
from tests.fakes import FakePlatform, FrozenClock

OTHER = ChannelRef("test", "ws2", "general")


def _admin(channel: ChannelRef = CHANNEL) -> Actor:
    return Actor(PlayerRef("test", "boss", "Boss"), is_admin=True, tenant=channel.tenant)


async def _estimates(app: App, tenant: Tenant, ids: list[str]) -> dict[str, DifficultyEstimate]:
    async with SqlUnitOfWork(session_factory(app.engine)) as uow:
        return await uow.difficulty.estimates(tenant, ids)


async def _store(app: App, tenant: Tenant, qid: str, label: str, estimate: DifficultyEstimate) -> None:
    async with SqlUnitOfWork(session_factory(app.engine)) as uow:
        await uow.difficulty.lock_estimates(tenant, {qid: label}, app.clock.now())
        await uow.difficulty.save_estimates(tenant, {qid: estimate}, {qid: label}, app.clock.now())


async def _play(service: QuizService, channel: ChannelRef, players: list[str], letter: str) -> list[str]:
    """Open the channel's challenge; each player answers every problem once with ``letter``."""
    challenge, _ = await service.open_challenge(channel)
    for name in players:
        for p in challenge.problems:
            await service.start_problem(actor(name, channel), p.id)
            await service.answer(actor(name, channel), p.id, letter)
    await service.close_challenge(challenge.id)
    return [p.question.id for p in challenge.problems]


async def test_a_close_counts_first_attempts_once_and_only_in_its_tenant(
    service: QuizService, app: App
) -> None:
    # Everyone misses at the first try (the correct answer is A), then gets it right: only the misses count.
    challenge, _ = await service.open_challenge(CHANNEL)
    ids = [p.question.id for p in challenge.problems]
    for name in ("ann", "bob", "cyd"):
        for p in challenge.problems:
            await service.start_problem(actor(name), p.id)
            await service.answer(actor(name), p.id, "B")
            await service.answer(actor(name), p.id, "A")
    assert await _estimates(app, CHANNEL.tenant, ids) == {}, "nothing is learned before the close"
    assert await service.close_challenge(challenge.id) is not None
    learned = await _estimates(app, CHANNEL.tenant, ids)
    assert set(learned) == set(ids)
    for p in challenge.problems:
        e = learned[p.question.id]
        assert (e.first_attempts, e.first_correct) == (3, 0)
        assert e.rating > label_prior(p.question.difficulty).rating, "all missed: harder than the label"
    # A repeated close (a retried job, another process) counts nothing again.
    assert await service.close_challenge(challenge.id) is None
    assert await _estimates(app, CHANNEL.tenant, ids) == learned
    # Another tenant learned nothing from this team's answers.
    assert await _estimates(app, OTHER.tenant, ids) == {}


@pytest.fixture
async def small(db_url: str, clock: FrozenClock) -> AsyncIterator[App]:
    """A bank of five questions: every challenge asks them all, in ramp order."""
    bank = [
        make_spec("easy", "beginner", "DDP"),
        make_spec("mid-1", "intermediate", "FSDP"),
        make_spec("mid-2", "intermediate", "Scaling"),
        make_spec("hard-1", "advanced", "Collectives"),
        make_spec("hard-2", "advanced", "Checkpointing"),
    ]
    made = await build_test_app(
        db_url, clock=clock, platform=FakePlatform(), bank=bank, learned_difficulty_min_attempts=20
    )
    yield made
    await made.close()


async def test_the_ramp_places_a_beginner_question_the_team_finds_hard_later(small: App) -> None:
    hard = DifficultyEstimate(rating=1.6, information=9.0, first_attempts=30, first_correct=4)
    await _store(small, CHANNEL.tenant, "easy", "beginner", hard)
    # Below the setting's 20 attempts in the other tenant: its label still places it.
    await _store(small, OTHER.tenant, "easy", "beginner", DifficultyEstimate(1.6, 9.0, 19, 2))
    mine, _ = await small.service.open_challenge(CHANNEL)
    theirs, _ = await small.service.open_challenge(OTHER)
    assert theirs.problems[0].question.id == "easy"
    assert mine.problems[-1].question.id == "easy"
    # The label shown and scored is the bank's: only the ramp's order changes.
    assert mine.problems[-1].question.difficulty == "beginner"


async def test_admins_see_where_label_and_data_disagree(small: App) -> None:
    await _store(small, CHANNEL.tenant, "easy", "beginner", DifficultyEstimate(1.6, 9.0, 30, 4))
    await _store(small, CHANNEL.tenant, "mid-1", "intermediate", DifficultyEstimate(-0.4, 9.0, 40, 25))
    await _store(small, CHANNEL.tenant, "mid-2", "intermediate", DifficultyEstimate(-1.2, 9.0, 25, 20))
    await _store(small, CHANNEL.tenant, "hard-1", "advanced", DifficultyEstimate(-1.9, 3.0, 5, 5))
    await _store(small, OTHER.tenant, "hard-2", "advanced", DifficultyEstimate(-2.0, 9.0, 50, 48))
    card = await small.service.difficulty_report(_admin())
    assert [(line.question_id, line.label, line.learned) for line in card.lines] == [
        ("easy", "beginner", "expert"),
        ("mid-2", "intermediate", "beginner"),
    ]
    # hard-1 has too few attempts to count; hard-2 is another tenant's.
    assert (card.learned, card.disagreeing, card.min_attempts) == (3, 2, 20)
    with pytest.raises(NotAdminError):
        await small.service.difficulty_report(actor("ann"))
    with pytest.raises(NotAdminError):  # a tenant's admin cannot read another tenant's answers
        await small.service.difficulty_report(_admin(), tenant=OTHER.tenant)
    with pytest.raises(ConfigurationError):
        await small.service.difficulty_report(ADMIN)  # the operator names a tenant
    theirs = await small.service.difficulty_report(ADMIN, tenant=OTHER.tenant)
    assert [line.question_id for line in theirs.lines] == ["hard-2"]


async def test_insights_name_the_weakest_topics_and_the_quiz_for_them(
    db_url: str, clock: FrozenClock
) -> None:
    app = await build_test_app(db_url, clock=clock, platform=FakePlatform(), bank=test_bank())
    try:
        names = [f"p{i}" for i in range(10)]
        asked = await _play(app.service, CHANNEL, names, "B")  # all wrong at the first attempt
        card = await app.service.insights(_admin())
        assert card.weakest and all(t.first_attempts == 10 and t.first_correct == 0 for t in card.weakest)
        assert card.quiz_topic == card.weakest[0].topic
        assert len(card.weakest) == 3 and card.days == 30
        # The other tenant has no answers: nothing is weak there, no quiz proposed.
        other = await app.service.insights(_admin(OTHER))
        assert other.weakest == () and other.quiz_topic is None
        # The practice quiz on them: "weakest" in a team quizzes exactly the team's weakest topics.
        weakest = [t.topic for t in card.weakest]
        assert await app.practice.team_weakest_topics(CHANNEL.tenant) == weakest
        flow = PracticeFlow(app.practice)
        ann = PlayerRef("test", "ann", "Ann")
        quiz = await flow.start_quiz(ann, " Weakest", CHANNEL.tenant)
        for position in range(1, quiz.total + 1):
            await app.practice.answer_quiz(ann, quiz.quiz_id, position, "A")
        result = await app.practice.quiz_result(ann, quiz.quiz_id)
        assert quiz.total == 5 and {item.topic for item in result.items} <= set(weakest)
        with pytest.raises(NotFoundError, match="no weak topic yet"):
            await flow.start_quiz(PlayerRef("test", "zed", "Zed"), "weakest", OTHER.tenant)
        # 31 days later the window is empty.
        clock.advance(dt.timedelta(days=31).total_seconds())
        assert (await app.service.insights(_admin())).weakest == ()
        assert len(asked) == 5
    finally:
        await app.close()


async def test_concurrent_closes_in_one_tenant_lose_no_update(small: App) -> None:
    # Two channels of one tenant ask the same five questions; their closes race on the same rows.
    second = ChannelRef(CHANNEL.platform, CHANNEL.workspace_id, "second")
    challenges = [(await small.service.open_challenge(ch))[0] for ch in (CHANNEL, second)]
    for challenge, channel in zip(challenges, (CHANNEL, second), strict=True):
        for name in ("ann", "bob"):
            for p in challenge.problems:
                await small.service.start_problem(actor(name, channel), p.id)
                await small.service.answer(actor(name, channel), p.id, "A")
    await asyncio.gather(*(small.service.close_challenge(c.id) for c in challenges))
    ids = [p.question.id for p in challenges[0].problems]
    learned = await _estimates(small, CHANNEL.tenant, ids)
    assert {(e.first_attempts, e.first_correct) for e in learned.values()} == {(4, 4)}


async def test_an_answer_correction_relearns_the_question_in_its_tenant_only(small: App) -> None:
    # The key says A; every player answers B, the truth: at the close everything looks missed.
    ids = await _play(small.service, CHANNEL, ["ann", "bob"], "B")
    await _play(small.service, OTHER, ["cyd", "dee"], "B")
    before = await _estimates(small, CHANNEL.tenant, ids)
    theirs = await _estimates(small, OTHER.tenant, ids)
    assert (before["easy"].first_attempts, before["easy"].first_correct) == (2, 0)

    await small.disputes.correct_answer(_admin(), "easy", "B")

    after = await _estimates(small, CHANNEL.tenant, ids)
    fixed = after["easy"]
    assert (fixed.first_attempts, fixed.first_correct) == (2, 2), "the re-judged first attempts count"
    assert fixed.rating < label_prior("beginner").rating < before["easy"].rating, "easier, not harder"
    assert fixed.information > label_prior("beginner").information
    assert {q: after[q] for q in ids if q != "easy"} == {q: before[q] for q in ids if q != "easy"}
    assert await _estimates(small, OTHER.tenant, ids) == theirs, "another tenant's answers stay its own"
    # Correcting back re-judges them wrong again: the same tally, as hard as the close first said (up to
    # the other questions' ratings the abilities are measured against, which the close has since moved).
    await small.disputes.correct_answer(_admin(), "easy", "A")
    again = (await _estimates(small, CHANNEL.tenant, ["easy"]))["easy"]
    assert (again.first_attempts, again.first_correct) == (2, 0)
    assert again.rating == pytest.approx(before["easy"].rating, abs=0.1)


async def test_a_correction_of_an_open_challenge_is_counted_once_by_its_close(
    small: App, clock: FrozenClock
) -> None:
    ids = await _play(small.service, CHANNEL, ["ann"], "B")  # closed: counted (1, 0)
    clock.advance(dt.timedelta(days=1).total_seconds())
    challenge, _ = await small.service.open_challenge(CHANNEL)
    for name in ("bob", "cyd"):
        p = next(p for p in challenge.problems if p.question.id == "mid-1")
        await small.service.start_problem(actor(name), p.id)
        await small.service.answer(actor(name), p.id, "B")
    await small.disputes.correct_answer(_admin(), "mid-1", "B")
    learned = (await _estimates(small, CHANNEL.tenant, ids))["mid-1"]
    assert (learned.first_attempts, learned.first_correct) == (1, 1), "the open challenge waits for its close"
    assert await small.service.close_challenge(challenge.id) is not None
    learned = (await _estimates(small, CHANNEL.tenant, ids))["mid-1"]
    assert (learned.first_attempts, learned.first_correct) == (3, 3)
    assert await small.service.close_challenge(challenge.id) is None
    assert (await _estimates(small, CHANNEL.tenant, ids))["mid-1"] == learned


async def test_the_operators_correction_relearns_every_tenant_that_learned_the_question(small: App) -> None:
    ids = await _play(small.service, CHANNEL, ["ann", "bob"], "B")
    await _play(small.service, OTHER, ["cyd"], "B")
    await small.disputes.correct_answer(ADMIN, "hard-1", "B")
    mine = (await _estimates(small, CHANNEL.tenant, ids))["hard-1"]
    theirs = (await _estimates(small, OTHER.tenant, ids))["hard-1"]
    assert (mine.first_attempts, mine.first_correct, theirs.first_attempts, theirs.first_correct) == (
        2,
        2,
        1,
        1,
    )
    # A tenant that never played it learned nothing and gets no row.
    third = Tenant("test", "ws3")
    assert await _estimates(small, third, ids) == {}
