"""Practice reads the bank as the tenant plays it (the daily picker's tenant_bank): a tenant's own
questions and corrections in its practice only, its retirements left out; on SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from bot.commands.practice import PracticeFlow
from bot.core.errors import NotFoundError
from bot.core.models import Actor, PlayerRef, Tenant
from bot.core.practice import PracticeService
from bot.core.service import QuizService
from tests.bootstrap import Env, open_env
from tests.conftest import CHANNEL, actor, make_spec
from tests.fakes import FakePlatform, FrozenClock

ALICE = actor("alice")
OURS = CHANNEL.tenant
THEIRS = Tenant(CHANNEL.tenant.platform, "ws2")
OUR_ADMIN = Actor(PlayerRef("test", "boss", "Boss"), is_admin=True, tenant=OURS)
#: The shared bank: one question on DDP, one on FSDP (so a topic's quiz is exactly one question).
SHARED = [make_spec("shared-ddp", "intermediate", "DDP"), make_spec("shared-fsdp", "intermediate", "FSDP")]
#: A topic no shared question has.
OWN_TOPIC = "Sharding"


def _own_explain() -> dict[str, Any]:
    return {
        "id": "explain-ours",
        "kind": "explain",
        "topic": OWN_TOPIC,
        "difficulty": "intermediate",
        "prompt": "Explain how ZeRO shards optimizer state.",
        "concepts": [{"name": "State is partitioned", "keywords": ["partition"]}],
        "model_answer": "Each rank keeps a partition of the optimizer state.",
    }


@pytest.fixture
async def env(db_url: str, clock: FrozenClock, platform: FakePlatform) -> AsyncIterator[Env]:
    async with open_env(db_url, clock, platform, bank=SHARED) as made:
        yield made


async def _own_question(quiz: QuizService) -> None:
    await quiz.admin_import(OUR_ADMIN, [make_spec("ours-1", "intermediate", OWN_TOPIC), _own_explain()])


async def _quiz_ids(practice: PracticeService, tenant: Tenant | None, topic: str | None = None) -> set[str]:
    """The question ids of a quiz (the bank here is smaller than a quiz: every question is in it)."""
    card = await practice.start_quiz(ALICE.player, topic, tenant=tenant)
    ids = {card.question_id}
    for position in range(1, card.total + 1):
        await practice.answer_quiz(ALICE.player, card.quiz_id, position, "A")
        nxt = await practice.quiz_question(ALICE.player, card.quiz_id)
        if nxt is not None:
            ids.add(nxt.question_id)
    return ids


async def test_a_tenants_own_question_is_in_its_practice_only(env: Env) -> None:
    await _own_question(env.quiz)
    assert await _quiz_ids(env.practice, OURS) == {"shared-ddp", "shared-fsdp", "ours-1"}
    assert await _quiz_ids(env.practice, THEIRS) == {"shared-ddp", "shared-fsdp"}
    assert await _quiz_ids(env.practice, None) == {"shared-ddp", "shared-fsdp"}
    assert await _quiz_ids(env.practice, OURS, OWN_TOPIC) == {"ours-1"}
    for tenant in (THEIRS, None):
        with pytest.raises(NotFoundError, match="no quiz questions on topic"):
            await env.practice.start_quiz(ALICE.player, OWN_TOPIC, tenant=tenant)
    # The explain prompts too: the tenant's own prompt is its own (the shared bank here has none).
    prompt = await env.practice.explain_prompt(ALICE.player, tenant=OURS)
    assert prompt.question_id == "explain-ours"
    graded = await env.practice.submit_explanation(
        ALICE.player, prompt.version_id, "Each rank holds a partition.", tenant=OURS
    )
    assert graded.covered == 1
    for tenant in (THEIRS, None):
        with pytest.raises(NotFoundError, match="no explain prompts"):
            await env.practice.explain_prompt(ALICE.player, tenant=tenant)


async def test_practice_grades_by_the_tenants_correction_in_that_tenant_only(env: Env) -> None:
    await env.disputes.correct_answer(OUR_ADMIN, "shared-ddp", "B")
    ours = await env.practice.start_quiz(ALICE.player, "DDP", tenant=OURS)
    assert (ours.question_id, ours.total) == ("shared-ddp", 1)
    assert (await env.practice.answer_quiz(ALICE.player, ours.quiz_id, 1, "B")).correct
    theirs = await env.practice.start_quiz(ALICE.player, "DDP", tenant=THEIRS)
    assert not (await env.practice.answer_quiz(ALICE.player, theirs.quiz_id, 1, "B")).correct
    shared = await env.practice.start_quiz(ALICE.player, "DDP")
    assert (await env.practice.answer_quiz(ALICE.player, shared.quiz_id, 1, "A")).correct


async def test_a_question_the_tenant_retired_leaves_its_practice(env: Env) -> None:
    await env.quiz.admin_retire(OUR_ADMIN, "shared-ddp")
    assert await _quiz_ids(env.practice, OURS) == {"shared-fsdp"}
    with pytest.raises(NotFoundError, match="no quiz questions on topic"):
        await env.practice.start_quiz(ALICE.player, "DDP", tenant=OURS)
    assert await _quiz_ids(env.practice, THEIRS) == {"shared-ddp", "shared-fsdp"}


async def test_the_weakest_topics_quiz_covers_a_topic_only_the_tenants_questions_have(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    await _own_question(env.quiz)
    flow = PracticeFlow(env.practice)

    async def weakest(tenant: Tenant) -> list[str]:
        # The team's weakest topics as insights would find them: here the one only its questions cover.
        return [OWN_TOPIC]

    monkeypatch.setattr(env.practice, "team_weakest_topics", weakest)
    card = await flow.start_quiz(ALICE.player, "weakest", OURS)
    assert (card.question_id, card.total) == ("ours-1", 1)
    with pytest.raises(NotFoundError, match="no questions on those topics"):
        await flow.start_quiz(ALICE.player, "weakest", THEIRS)


async def test_a_flashcard_shows_the_answer_as_the_reviewing_tenant_corrected_it(env: Env) -> None:
    await env.disputes.correct_answer(OUR_ADMIN, "shared-ddp", "B")
    flow = PracticeFlow(env.practice)
    step = await flow.review(ALICE.player, OURS)
    backs: dict[str, str] = {}
    while step.card is not None and step.card.question_id not in backs:
        backs[step.card.question_id] = step.card.back
        # Each tenant sees the same card (the deck is the player's) with its own version of the question.
        theirs = await flow.reveal(ALICE.player, step.card.card_id, step.card.showing, THEIRS)
        shared = await flow.reveal(ALICE.player, step.card.card_id, step.card.showing)
        assert theirs.card is not None and shared.card is not None
        assert theirs.card.card_id == shared.card.card_id == step.card.card_id
        if step.card.question_id == "shared-ddp":
            assert step.card.back.startswith("shared-ddp choice 1")  # choice B, the tenant's correction
            assert theirs.card.back.startswith("shared-ddp choice 0")  # choice A, the shared answer
            assert shared.card.back.startswith("shared-ddp choice 0")
        step = await flow.grade(ALICE.player, step.card.card_id, step.card.showing, "easy", OURS)
    assert "shared-ddp" in backs
