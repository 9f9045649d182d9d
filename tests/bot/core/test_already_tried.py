"""A second click on a wrong letter already tried is refused and costs no attempt (SQLite and PostgreSQL).

Before this, a double click on a wrong answer recorded it twice and burnt both attempts.
"""

from __future__ import annotations

import asyncio

import pytest

from bot.core.errors import AlreadyTriedError
from bot.core.service import QuizService
from tests.conftest import CHANNEL, actor


async def test_a_wrong_letter_clicked_twice_costs_one_attempt(service: QuizService) -> None:
    challenge, _ = await service.open_challenge(CHANNEL)
    alice, problem = actor("alice"), challenge.problems[0]
    await service.start_problem(alice, problem.id)
    first = await service.answer(alice, problem.id, "B", idempotency_key="click-1")
    assert not first.correct and first.attempts_left == 1
    with pytest.raises(AlreadyTriedError, match="you already tried B"):
        await service.answer(alice, problem.id, "b", idempotency_key="click-2")  # another click, same letter
    card = await service.view_problem(alice, problem.id)
    assert card.attempts_left == 1 and not card.over and card.wrong_letters == ("B",)
    right = await service.answer(alice, problem.id, "A", idempotency_key="click-3")
    assert right.correct and right.over


async def test_two_clicks_on_the_same_wrong_letter_at_once_cost_one_attempt(service: QuizService) -> None:
    challenge, _ = await service.open_challenge(CHANNEL)
    bob, problem = actor("bob"), challenge.problems[0]
    await service.start_problem(bob, problem.id)
    outcomes = await asyncio.gather(
        service.answer(bob, problem.id, "C"), service.answer(bob, problem.id, "C"), return_exceptions=True
    )
    assert sum(isinstance(o, AlreadyTriedError) for o in outcomes) == 1, outcomes
    card = await service.view_problem(bob, problem.id)
    assert card.attempts_left == 1 and not card.over
