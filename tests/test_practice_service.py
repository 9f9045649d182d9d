"""Practice use cases (quiz, flashcard review, explain) on SQLite and PostgreSQL with a frozen clock."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator
from typing import Any

import pytest

from bot.bootstrap import shipped_bank_specs
from bot.core.errors import InvalidAnswerError, NotFoundError
from bot.core.practice import PracticeError, PracticeService
from bot.core.service import QuizService
from bot.storage.db import make_engine
from bot.storage.practice import SqlPracticeUnitOfWork
from bot.storage.uow import SqlUnitOfWork, session_factory
from tests.conftest import ADMIN, CHANNEL, actor, test_bank
from tests.fakes import FakePlatform, FrozenClock

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
    return [s for s in shipped_bank_specs() if s["kind"] == "explain"]


@pytest.fixture
async def services(db_url: str, clock: FrozenClock) -> AsyncIterator[tuple[QuizService, PracticeService]]:
    engine = make_engine(db_url)
    factory = session_factory(engine)
    quiz = QuizService(lambda: SqlUnitOfWork(factory), clock, FakePlatform(), seed=1)
    practice = PracticeService(lambda: SqlPracticeUnitOfWork(factory), clock, seed=1)
    await quiz.admin_import(ADMIN, test_bank() + _cards() + _explains())
    yield quiz, practice
    await engine.dispose()


# ---------------------------------------------------------------------------------------------- quiz
async def test_quiz_of_five_with_feedback_score_and_no_leaderboard_effect(
    services: tuple[QuizService, PracticeService],
) -> None:
    quiz_svc, practice = services
    card = await practice.start_quiz(ALICE.player)
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
        card = await practice.start_quiz(ALICE.player)
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
async def test_review_schedules_cards_with_sm2_and_stores_due_dates(
    services: tuple[QuizService, PracticeService], clock: FrozenClock
) -> None:
    _, practice = services
    summary = await practice.start_review(ALICE.player)
    assert (summary.cards, summary.due_now, summary.added) == (2, 2, 2)
    assert (await practice.start_review(ALICE.player)).added == 0, "cards are unique per player and card"
    card = await practice.next_card(ALICE.player)
    assert card is not None and card.front == "Front 1?" and card.back == "Back 1."
    assert dict(card.next_intervals) == {"again": "1m", "hard": "6m", "good": "10m", "easy": "4d"}
    out = await practice.grade_card(ALICE.player, card.card_id, "good", card.showing)
    assert (out.phase, out.next_in) == ("learning", "10m")
    # The other new card is due now, so it comes before the learning card.
    second = await practice.next_card(ALICE.player)
    assert second is not None and second.front == "Front 2?"
    out2 = await practice.grade_card(ALICE.player, second.card_id, "e", second.showing)
    assert (out2.phase, out2.interval_days, out2.next_in) == ("review", 4, "4d")
    # Nothing due now: the learning card due in 10 minutes is within Anki's 20-minute learn-ahead.
    ahead = await practice.next_card(ALICE.player)
    assert ahead is not None and ahead.card_id == card.card_id and ahead.phase == "learning"
    clock.advance(600)
    out = await practice.grade_card(ALICE.player, card.card_id, "3", ahead.showing)
    assert (out.phase, out.interval_days) == ("review", 1)
    assert await practice.next_card(ALICE.player) is None
    summary = await practice.start_review(ALICE.player)
    assert summary.due_now == 0 and summary.next_due == clock.now() + dt.timedelta(days=1)
    clock.advance(86400)
    due = await practice.next_card(ALICE.player)
    assert due is not None and due.card_id == card.card_id
    assert dict(due.next_intervals) == {"again": "10m", "hard": "2d", "good": "3d", "easy": "4d"}
    out = await practice.grade_card(ALICE.player, due.card_id, "again", due.showing)
    assert (out.phase, out.lapses, out.next_in) == ("relearning", 1, "10m")
    assert (await practice.stats(ALICE.player)).reviews == 4


async def test_a_second_grade_of_one_showing_is_a_no_op(
    services: tuple[QuizService, PracticeService],
) -> None:
    _, practice = services
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
    summary = await practice.start_review(ALICE.player)
    assert summary.cards == 4  # 2 bank cards + the wrong one + the timed-out one
    fronts = {}
    while (card := await practice.next_card(ALICE.player)) is not None:
        fronts[card.question_id] = card
        await practice.grade_card(ALICE.player, card.card_id, "easy", card.showing)
    mistakes = {qid: c for qid, c in fronts.items() if c.source == "mistake"}
    assert set(mistakes) == {wrong.question.id, late.question.id}
    card = mistakes[wrong.question.id]
    assert card.front == wrong.question.prompt
    assert card.back == f"A. {wrong.question.choices[0].text}" and card.explanation
    # Bob made no mistakes: his deck has only the bank's cards.
    assert (await practice.start_review(BOB.player)).cards == 2


async def test_players_with_due_cards_for_a_nudge(services: tuple[QuizService, PracticeService]) -> None:
    _, practice = services
    await practice.start_review(ALICE.player)
    nudges = await practice.players_due()
    assert [(n.player.user_id, n.due) for n in nudges] == [("alice", 2)]


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
        "First check that CUDA is available and count the GPUs. Then call model.to(device) so the "
        "weights live on the GPU.",
    )
    assert (result.covered, result.total) == (2, 4)
    assert result.missed == (
        "Wrap the model for multiple GPUs (DataParallel or DDP)",
        "Move each batch of inputs and labels to the GPU",
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
