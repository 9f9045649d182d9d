"""Practice use cases (quiz, flashcard review, explain) on SQLite and PostgreSQL with a frozen clock."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import select

from bot.core.errors import InvalidAnswerError, NotFoundError
from bot.core.models import Actor, PlayerRef, Tenant
from bot.core.practice import EXPLAIN_RETRY_AFTER, PracticeError, PracticeService
from bot.core.practice_models import QuizQuestionCard
from bot.core.service import QuizService
from bot.storage.db import make_engine
from bot.storage.models import QuestionVersionRow
from bot.storage.uow import SqlUnitOfWork, session_factory
from tests.bootstrap import open_env
from tests.conftest import ADMIN, CHANNEL, actor, test_bank
from tests.fakes import FakePlatform, FrozenClock
from tests.shipped import shipped_specs

ALICE = actor("alice")
BOB = actor("bob")


def _cards() -> list[dict[str, Any]]:
    return [
        {
            "id": f"card-{i}",
            "kind": "flashcard",
            "topic": "DDP",
            "difficulty": "beginner",
            "front": f"Front {i}?",
            "back": f"Back {i}.",
            "explanation": f"Why {i}.",
        }
        for i in (1, 2)
    ]


def _explains() -> list[dict[str, Any]]:
    return [s for s in shipped_specs() if s["kind"] == "explain"]


@pytest.fixture
async def services(
    db_url: str, clock: FrozenClock, platform: FakePlatform
) -> AsyncIterator[tuple[QuizService, PracticeService]]:
    bank = test_bank() + _cards() + _explains()
    async with open_env(db_url, clock, platform, bank=bank) as env:
        yield env.quiz, env.practice


@pytest.fixture
async def card_services(
    db_url: str, clock: FrozenClock, platform: FakePlatform
) -> AsyncIterator[tuple[QuizService, PracticeService]]:
    """A bank of the two flashcards only: the deck is exactly those two cards."""
    async with open_env(db_url, clock, platform, bank=_cards()) as env:
        yield env.quiz, env.practice


# ---------------------------------------------------------------------------------------------- quiz
async def test_quiz_of_five_with_feedback_score_and_no_leaderboard_effect(
    services: tuple[QuizService, PracticeService],
) -> None:
    quiz_svc, practice = services
    card: QuizQuestionCard | None = await practice.start_quiz(ALICE.player)
    assert card is not None  # start_quiz always returns a card (the variable is re-set to None at the end)
    assert (card.position, card.total) == (1, 5)
    seen = []
    while card is not None:
        seen.append(card.question_id)
        letter = "B" if card.position == 3 else "A"  # the test bank's answer is always A
        fb = await practice.answer_quiz(ALICE.player, card.quiz_id, card.position, letter)
        assert fb.correct is (letter == "A")
        assert fb.correct_letter == "A" and fb.explanation
        assert fb.finished is (card.position == 5)
        card = await practice.quiz_question(ALICE.player, fb.quiz_id)
    assert len(set(seen)) == 5
    result = await practice.quiz_result(ALICE.player, fb.quiz_id)
    assert (result.correct, result.total) == (4, 5)
    assert [i.correct for i in result.items] == [True, True, False, True, True]
    # A repeated answer (double click) changes nothing.
    again = await practice.answer_quiz(ALICE.player, fb.quiz_id, 3, "A")
    assert again.duplicate and not again.correct and again.letter == "B"
    stats = await practice.stats(ALICE.player)
    assert (stats.quizzes, stats.quiz_answers, stats.quiz_correct) == (1, 5, 4)
    # Practice is not competition: no standings, no points.
    board = await quiz_svc.leaderboard(CHANNEL, period="all", player=ALICE.player)
    assert board.total_players == 0 and not board.rows and board.me is None
    assert (await quiz_svc.stats(ALICE.player)).points == 0


async def test_quiz_prefers_questions_not_yet_practised(
    services: tuple[QuizService, PracticeService],
) -> None:
    _, practice = services
    asked: list[str] = []
    for _ in range(3):  # 3 quizzes x 5 = 15 of the 18 multiple-choice questions, no repeats
        card: QuizQuestionCard | None = await practice.start_quiz(ALICE.player)
        while card is not None:
            asked.append(card.question_id)
            await practice.answer_quiz(ALICE.player, card.quiz_id, card.position, "A")
            card = await practice.quiz_question(ALICE.player, card.quiz_id)
    assert len(asked) == len(set(asked)) == 15


async def test_quiz_topic_is_case_insensitive_and_unknown_topic_lists_topics(
    services: tuple[QuizService, PracticeService],
) -> None:
    _, practice = services
    card = await practice.start_quiz(ALICE.player, "fsdp")
    assert card.total == 3 and card.topic == "FSDP"  # the test bank has 3 FSDP questions
    with pytest.raises(NotFoundError) as err:
        await practice.start_quiz(ALICE.player, "quantum")
    message = str(err.value)
    assert "'quantum'" in message and "Available topics: Checkpointing, Collectives, DDP" in message


async def test_quiz_refuses_bad_letters_and_other_players_quizzes(
    services: tuple[QuizService, PracticeService],
) -> None:
    _, practice = services
    card = await practice.start_quiz(ALICE.player)
    with pytest.raises(InvalidAnswerError, match="answer A/B/C/D"):
        await practice.answer_quiz(ALICE.player, card.quiz_id, 1, "F")
    with pytest.raises(NotFoundError):
        await practice.answer_quiz(BOB.player, card.quiz_id, 1, "A")
    with pytest.raises(NotFoundError):
        await practice.answer_quiz(ALICE.player, card.quiz_id, 9, "A")


# ---------------------------------------------------------------------------------------------- review
async def test_review_schedules_cards_with_fsrs_and_stores_due_dates(
    card_services: tuple[QuizService, PracticeService], clock: FrozenClock
) -> None:
    _, practice = card_services
    summary = await practice.start_review(ALICE.player)
    assert (summary.cards, summary.due_now, summary.added) == (2, 2, 2)
    assert (await practice.start_review(ALICE.player)).added == 0, "cards are unique per player and card"
    card = await practice.next_card(ALICE.player)
    assert card is not None and card.front == "Front 1?" and card.back == "Back 1."
    # FSRS-6 defaults: learning steps 1m/10m (Hard: their mean), Easy: the initial stability 8.3 days.
    assert dict(card.next_intervals) == {"again": "1m", "hard": "6m", "good": "10m", "easy": "8d"}
    out = await practice.grade_card(ALICE.player, card.card_id, "good", card.showing)
    assert (out.phase, out.next_in) == ("learning", "10m")
    # The other new card is due now, so it comes before the learning card.
    second = await practice.next_card(ALICE.player)
    assert second is not None and second.front == "Front 2?"
    out2 = await practice.grade_card(ALICE.player, second.card_id, "e", second.showing)
    assert (out2.phase, out2.interval_days, out2.next_in) == ("review", 8, "8d")
    # Nothing due now: the learning card due in 10 minutes is within Anki's 20-minute learn-ahead.
    ahead = await practice.next_card(ALICE.player)
    assert ahead is not None and ahead.card_id == card.card_id and ahead.phase == "learning"
    clock.advance(600)
    out = await practice.grade_card(ALICE.player, card.card_id, "3", ahead.showing)
    assert (out.phase, out.interval_days) == ("review", 2)  # Good's stability 2.3 days, rounded
    assert await practice.next_card(ALICE.player) is None
    summary = await practice.start_review(ALICE.player)
    assert summary.due_now == 0 and summary.next_due == clock.now() + dt.timedelta(days=2)
    clock.advance(2 * 86400)
    due = await practice.next_card(ALICE.player)
    assert due is not None and due.card_id == card.card_id
    # The previews are what grading schedules (no fuzz): recalled on the due day, stability grows.
    assert dict(due.next_intervals) == {"again": "10m", "hard": "8d", "good": "11d", "easy": "19d"}
    out = await practice.grade_card(ALICE.player, due.card_id, "again", due.showing)
    assert (out.phase, out.lapses, out.next_in) == ("relearning", 1, "10m")
    assert (await practice.stats(ALICE.player)).reviews == 4


async def test_a_second_grade_of_one_showing_is_a_no_op(
    card_services: tuple[QuizService, PracticeService],
) -> None:
    _, practice = card_services
    await practice.start_review(ALICE.player)
    card = await practice.next_card(ALICE.player)
    assert card is not None
    outs = await asyncio.gather(
        *(practice.grade_card(ALICE.player, card.card_id, "easy", card.showing) for _ in range(6))
    )
    assert sum(not o.duplicate for o in outs) == 1
    assert (await practice.stats(ALICE.player)).reviews == 1
    with pytest.raises(PracticeError, match="not due yet"):
        await practice.grade_card(ALICE.player, card.card_id, "good")
    with pytest.raises(NotFoundError):
        await practice.grade_card(BOB.player, card.card_id, "good")
    with pytest.raises(InvalidAnswerError, match="1-4"):
        await practice.grade_card(ALICE.player, card.card_id, "x")


async def test_challenge_mistakes_become_cards(
    services: tuple[QuizService, PracticeService], clock: FrozenClock
) -> None:
    quiz_svc, practice = services
    challenge, _ = await quiz_svc.open_challenge(CHANNEL)
    wrong, right, late = challenge.problems[:3]
    for problem, letters in ((wrong, "BC"), (right, "A")):
        await quiz_svc.start_problem(ALICE, problem.id)
        for letter in letters:
            await quiz_svc.answer(ALICE, problem.id, letter)
    await quiz_svc.start_problem(ALICE, late.id)
    clock.advance(121)
    await quiz_svc.time_up(ALICE, late.id)
    bob = await practice.start_review(BOB.player)
    summary = await practice.start_review(ALICE.player)
    assert summary.cards == bob.cards, "the deck is the bank's; a mistake moves its card ahead, not in twice"
    assert summary.due_now == summary.new_today == 10, "10 new cards a day"
    # Alice's first new cards are her two mistakes; Bob's are the bank's beginner-first order.
    firsts = []
    for _ in range(2):
        card = await practice.next_card(ALICE.player)
        assert card is not None
        firsts.append(card)
        await practice.grade_card(ALICE.player, card.card_id, "easy", card.showing)
    assert {c.question_id for c in firsts} == {wrong.question.id, late.question.id}
    assert all(c.source == "mistake" for c in firsts)
    card = next(c for c in firsts if c.question_id == wrong.question.id)
    assert card.front == wrong.question.prompt.strip()
    right_text = wrong.question.choices[0].text
    assert card.back == f"{right_text}\n\nWhy: {wrong.question.explanation}"
    bob_first = await practice.next_card(BOB.player)
    assert bob_first is not None and bob_first.source == "bank"


async def test_players_with_due_cards_for_a_nudge(card_services: tuple[QuizService, PracticeService]) -> None:
    _, practice = card_services
    await practice.start_review(ALICE.player)
    nudges = await practice.players_due()
    assert [(n.player.user_id, n.due) for n in nudges] == [("alice", 2)]


# ---------------------------------------------------------------------------------------------- daily nudge
async def test_the_daily_nudge_is_opt_in_private_and_sent_at_most_once_a_day(
    card_services: tuple[QuizService, PracticeService], clock: FrozenClock
) -> None:
    _, practice = card_services
    carol = actor("carol")
    for who in (ALICE, BOB):
        await practice.start_review(who.player)  # 2 cards due each
    platform = FakePlatform(unreachable={"bob"})
    report = await practice.send_nudges(platform)
    assert platform.nudges == [] and report.sent == (), "nobody opted in: nobody is nudged"
    assert await practice.nudge_enabled(ALICE.player) is False
    for who in (ALICE, BOB, carol):
        assert await practice.set_nudge(who.player, True) is True
    assert await practice.nudge_enabled(ALICE.player) is True

    report = await practice.send_nudges(platform)
    today = clock.now().date()
    assert [(p.user_id, c.due, c.day, c.display_name) for p, c in platform.nudges] == [
        ("alice", 2, today, "Alice")
    ]
    assert [p.user_id for p in report.failed] == ["bob"], "carol has nothing due; bob's DMs are closed"
    # Later the same day: Alice is not nudged again; Bob's undelivered nudge is tried again.
    clock.advance(3600)
    platform.unreachable.clear()
    await practice.send_nudges(platform)
    assert [p.user_id for p, _ in platform.nudges] == ["alice", "bob"]
    assert (await practice.send_nudges(platform)).sent == ()

    # The next day, two processes run the job at once: each player still gets one nudge.
    clock.advance(86400)
    first, second = FakePlatform(), FakePlatform()
    await asyncio.gather(practice.send_nudges(first), practice.send_nudges(second))
    sent = sorted(p.user_id for p, _ in first.nudges + second.nudges)
    assert sent == ["alice", "bob"]
    # Opting out stops it.
    await practice.set_nudge(ALICE.player, False)
    clock.advance(86400)
    third = FakePlatform()
    await practice.send_nudges(third)
    assert [p.user_id for p, _ in third.nudges] == ["bob"]


# ------------------------------------------------------------------------------------------ FSRS parameters
class RecordingOptimizer:
    """A ParameterOptimizer that records what it was given and returns FSRS's defaults with a longer
    initial Easy stability (w3 = 20 days), which the previews must then show.
    """

    def __init__(self) -> None:
        self.calls: list[int] = []

    def optimize(self, reviews: Any) -> tuple[float, ...]:
        from bot.core.srs import DEFAULT_SCHEDULER

        self.calls.append(len(reviews))
        params = list(DEFAULT_SCHEDULER.parameters)
        params[3] = 20.0
        return tuple(params)


async def test_parameters_are_optimised_from_the_players_own_reviews_past_the_threshold(
    db_url: str, clock: FrozenClock
) -> None:
    from bot.core.practice import OPTIMIZE_MIN_REVIEWS
    from bot.storage.models import CardReviewRow

    engine = make_engine(db_url)
    factory = session_factory(engine)
    quiz = QuizService(lambda: SqlUnitOfWork(factory), clock, FakePlatform(), seed=1)
    practice = PracticeService(lambda: SqlUnitOfWork(factory), clock, seed=1)
    cards = [dict(c, id=f"card-{i}", front=f"Front {i}?") for i, c in enumerate(_cards() * 5)]
    await quiz.admin_import(ADMIN, cards)
    await practice.start_review(ALICE.player)
    first = await practice.next_card(ALICE.player)
    assert first is not None and dict(first.next_intervals)["easy"] == "8d"
    optimizer = RecordingOptimizer()
    # A short history: the defaults stay, and the optimizer is not even started.
    await practice.grade_card(ALICE.player, first.card_id, "good", first.showing)
    outcome = await practice.optimize_parameters(ALICE.player, optimizer)
    assert (outcome.optimized, outcome.reviews, outcome.needed) == (False, 0, OPTIMIZE_MIN_REVIEWS)
    assert "512" in outcome.reason and optimizer.calls == []

    # 10 cards reviewed every other day, 60 times each: 59 countable reviews per card.
    async with factory() as session, session.begin():
        from sqlalchemy import select

        from bot.storage.models import ReviewCardModel

        card_ids = list(await session.scalars(select(ReviewCardModel.id).order_by(ReviewCardModel.id)))
        assert len(card_ids) == 10
        start = clock.now() - dt.timedelta(days=200)
        session.add_all(
            CardReviewRow(
                card_id=cid,
                grade="again" if (cid + n) % 7 == 0 else "good",
                reviewed_at=start + dt.timedelta(days=2 * n, minutes=cid),
                phase="review",
                interval_days=2,
                due_at=start + dt.timedelta(days=2 * n + 2),
            )
            for cid in card_ids
            for n in range(60)
        )
    # What serve runs daily: every player with enough reviews and no fresh parameters.
    [outcome] = await practice.optimize_all(optimizer)
    # 590, plus the real review graded above: 82 days after its card's last logged one.
    assert outcome.optimized and outcome.reviews == 591 and outcome.parameters is not None
    assert optimizer.calls == [601], "the whole history goes to the optimizer"
    assert await practice.optimize_all(optimizer) == [], "fitted today: not again"
    clock.advance(31 * 86400)
    assert await practice.optimize_all(optimizer, platforms=frozenset({"discord"})) == [], "not served here"
    assert [o.optimized for o in await practice.optimize_all(optimizer)] == [True], "refreshed monthly"
    clock.advance(-31 * 86400)
    # Bob's deck is scheduled with the defaults; Alice's with her parameters.
    await practice.start_review(BOB.player)
    bob_card = await practice.next_card(BOB.player)
    alice_card = await practice.next_card(ALICE.player)
    assert bob_card is not None and alice_card is not None
    assert dict(bob_card.next_intervals)["easy"] == "8d"
    assert dict(alice_card.next_intervals)["easy"] == "20d"
    out = await practice.grade_card(ALICE.player, alice_card.card_id, "easy", alice_card.showing)
    assert out.interval_days == 20
    await engine.dispose()


# ---------------------------------------------------------------------------------------------- explain
async def test_explain_grades_concepts_and_stores_the_attempt(
    services: tuple[QuizService, PracticeService],
) -> None:
    _, practice = services
    prompt = await practice.explain_prompt(ALICE.player, "basics")
    assert prompt.question_id == "s003-explain-prepare-model-data" and prompt.concepts == 4
    result = await practice.submit_explanation(
        ALICE.player,
        prompt.version_id,
        "First call model.to(device) so the weights live on the GPU. Then wrap the model in DataParallel.",
    )
    assert (result.covered, result.total) == (2, 4)
    assert not result.passed and result.required == 3 and result.version_id == prompt.version_id
    assert result.hint == prompt.hint and "Not passed yet" in result.verdict
    assert result.missed == (
        "Move each batch of inputs and labels to the GPU",
        "Each GPU gets its own share of the data: a DistributedSampler with DDP "
        "(DataParallel splits each batch itself)",
    )
    assert "DataParallel" in result.model_answer
    stats = await practice.stats(ALICE.player)
    assert (stats.explain_attempts, stats.concepts_covered, stats.concepts_total) == (1, 2, 4)
    # The next prompt is one Alice has not answered yet.
    nxt = await practice.explain_prompt(ALICE.player, "Multi-GPU basics")
    assert nxt.question_id == prompt.question_id  # the only Multi-GPU basics prompt
    other = await practice.explain_prompt(ALICE.player)
    assert other.question_id != prompt.question_id
    with pytest.raises(PracticeError, match="empty"):
        await practice.submit_explanation(ALICE.player, prompt.version_id, "   ")
    with pytest.raises(
        NotFoundError, match=r"Available topics: Checkpointing, Collectives, .*, torch\.compile"
    ):
        await practice.explain_prompt(ALICE.player, "sharding")


async def test_a_failed_explain_prompt_comes_back_before_unseen_ones_until_passed(
    services: tuple[QuizService, PracticeService], clock: FrozenClock
) -> None:
    """Issue 28: a failed prompt is offered again once its retry is due (before prompts not yet seen),
    is marked as a retry, and stops coming back once an answer to it passes; other players are not
    affected.
    """
    _, practice = services
    first = await practice.explain_prompt(ALICE.player)
    assert not first.retry and first.retry_note is None
    failed = await practice.submit_explanation(ALICE.player, first.version_id, "GPUs are fast.")
    assert not failed.passed
    # At once: another prompt (the one just failed is not repeated while its model answer is on screen).
    soon = await practice.explain_prompt(ALICE.player)
    assert soon.question_id != first.question_id and not soon.retry
    clock.advance(EXPLAIN_RETRY_AFTER.total_seconds() - 1)
    assert (await practice.explain_prompt(ALICE.player)).question_id != first.question_id
    clock.advance(1)
    # Due: it comes back first, though most prompts are still unseen, and says why.
    again = await practice.explain_prompt(ALICE.player)
    assert (again.question_id, again.retry) == (first.question_id, True)
    assert again.retry_note is not None and "did not pass" in again.retry_note
    # Bob has failed nothing: his prompt is not a retry.
    assert not (await practice.explain_prompt(BOB.player)).retry
    # A second failure puts it back for later again; a pass ends it.
    await practice.submit_explanation(ALICE.player, again.version_id, "No idea.")
    clock.advance(EXPLAIN_RETRY_AFTER.total_seconds())
    assert (await practice.explain_prompt(ALICE.player)).question_id == first.question_id
    passed = await practice.submit_explanation(ALICE.player, again.version_id, failed.model_answer)
    assert passed.passed
    clock.advance(EXPLAIN_RETRY_AFTER.total_seconds() * 10)
    for _ in range(5):
        nxt = await practice.explain_prompt(ALICE.player)
        assert nxt.question_id != first.question_id and not nxt.retry


async def test_an_explanation_from_a_tenant_is_graded_only_for_a_prompt_it_sees(
    services: tuple[QuizService, PracticeService], db_url: str
) -> None:
    """A version id that came back from a client (a Discord form's custom id) is checked against the
    tenant the answer comes from: another tenant's own prompt is refused as a missing one (issue 25).
    """
    quiz, practice = services
    ours, theirs = Tenant("discord", "1"), Tenant("discord", "2")
    spec = {
        "id": "explain-theirs",
        "kind": "explain",
        "topic": "DDP",
        "difficulty": "intermediate",
        "prompt": "Explain what DDP all-reduces.",
        "concepts": [{"name": "Gradients are averaged", "keywords": ["gradient"]}],
        "model_answer": "The gradients, averaged in backward.",
    }
    await quiz.admin_import(Actor(PlayerRef("discord", "9", "boss"), is_admin=True, tenant=theirs), [spec])
    engine = make_engine(db_url)
    async with engine.connect() as conn:
        version = (
            await conn.execute(
                select(QuestionVersionRow.id).where(QuestionVersionRow.question_id == spec["id"])
            )
        ).scalar_one()
    await engine.dispose()
    answer = "The gradients are all-reduced."
    with pytest.raises(NotFoundError, match=f"no explain prompt with version id {version}"):
        await practice.submit_explanation(ALICE.player, version, answer, tenant=ours)
    assert (await practice.stats(ALICE.player)).explain_attempts == 0
    graded = await practice.submit_explanation(ALICE.player, version, answer, tenant=theirs)
    assert graded.covered == 1
    shared = await practice.explain_prompt(ALICE.player)  # the shared bank's: every tenant sees it
    await practice.submit_explanation(ALICE.player, shared.version_id, answer, tenant=ours)
    assert (await practice.stats(ALICE.player)).explain_attempts == 2
