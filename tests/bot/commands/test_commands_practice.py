"""The command layer's practice steps (bot/commands/practice.py) on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from bot.commands.practice import PracticeFlow
from tests.bootstrap import open_env
from tests.conftest import actor, test_bank
from tests.fakes import FakePlatform, FrozenClock

ALICE = actor("alice").player


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


@pytest.fixture
async def flow(db_url: str, clock: FrozenClock, platform: FakePlatform) -> AsyncIterator[PracticeFlow]:
    async with open_env(db_url, clock, platform, bank=test_bank() + _cards()) as env:
        yield PracticeFlow(env.practice)


async def test_a_quiz_ends_with_its_result_on_the_last_answer(flow: PracticeFlow) -> None:
    question = await flow.start_quiz(ALICE, None)
    quiz_id = question.quiz_id
    for position in range(1, 6):
        step = await flow.answer_quiz(ALICE, quiz_id, position, "A")  # the test bank's answer is A
        assert step.feedback is not None and step.feedback.correct
        if position < 5:
            assert step.result is None
            following = await flow.next_question(ALICE, quiz_id)
            assert following.question is not None and following.question.position == position + 1
        else:
            assert step.result is not None and (step.result.correct, step.result.total) == (5, 5)
    old_next = await flow.next_question(ALICE, quiz_id)  # Next on an old message: the result
    assert old_next.question is None and old_next.result is not None


async def test_review_reveal_grade_and_the_end_of_the_deck(flow: PracticeFlow) -> None:
    with pytest.raises(ValueError, match="whole number"):
        await flow.set_new_per_day(ALICE, "ten")
    assert await flow.set_new_per_day(ALICE, " 2 ") == 2  # two new cards today: the deck's two first
    first = await flow.review(ALICE)
    assert first.card is not None and first.summary is not None and first.summary.due_now == 2
    stale = await flow.reveal(ALICE, first.card.card_id, first.card.showing + 1)
    assert stale.moved and not stale.revealed and stale.card == first.card
    back = await flow.reveal(ALICE, first.card.card_id, first.card.showing)
    assert back.revealed and back.card is not None
    graded = await flow.grade(ALICE, first.card.card_id, first.card.showing, "easy")
    assert graded.outcome is not None and not graded.outcome.duplicate
    assert graded.card is not None and graded.card.card_id != first.card.card_id
    again = await flow.grade(ALICE, first.card.card_id, first.card.showing, "easy")  # a double click
    assert again.outcome is not None and again.outcome.duplicate
    last = await flow.grade(ALICE, graded.card.card_id, graded.card.showing, "easy")
    assert last.card is None and last.summary is not None and last.summary.due_now == 0
    done = await flow.reveal(ALICE, graded.card.card_id, graded.card.showing)
    assert done.card is None and done.summary is not None
