"""``/rankzero difficulty`` and ``/rankzero insights`` through signed requests into the Bolt app and the
strict Web API fake: admins only, ephemeral, the workspace's own data, bank text escaped.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.core.difficulty import DifficultyEstimate
from bot.core.models import Actor, ChannelRef, PlayerRef, Tenant
from bot.storage.uow import SqlUnitOfWork, session_factory
from tests.bot.adapters.slack.test_slack_adapter import OWNER, PLAYER, SLACK_TENANT, Harness, _harness
from tests.conftest import make_spec

T0 = dt.datetime(2026, 11, 21, 9, 0, tzinfo=dt.UTC)
HOSTILE = "<!here> & co"


@pytest.fixture
async def h(tmp_path: Path, sqlite_template: Path) -> AsyncIterator[Harness]:
    bank = [
        make_spec(f"q-{i}", level, HOSTILE if i == 0 else f"topic {i}")
        for i, level in enumerate(["beginner", "intermediate", "intermediate", "advanced", "expert"])
    ]
    async for harness in _harness(tmp_path, sqlite_template, bank):
        yield harness


async def _reply(h: Harness, user: str, text: str) -> str:
    n = len(h.api.of("response"))
    r = await h.send.command(user, text)
    assert r.status_code == 200
    return (await h.api.wait_for("response", n + 1))[n].dump()


async def _learned(h: Harness, tenant: Tenant, qid: str, label: str, e: DifficultyEstimate) -> None:
    async with SqlUnitOfWork(session_factory(h.services.app.engine)) as uow:
        await uow.difficulty.lock_estimates(tenant, {qid: label}, T0)
        await uow.difficulty.save_estimates(tenant, {qid: e}, {qid: label}, T0)


async def test_difficulty_lists_the_workspaces_disagreements_to_admins_only(h: Harness) -> None:
    await _learned(h, SLACK_TENANT, "q-0", "beginner", DifficultyEstimate(1.8, 20.0, 50, 6))
    await _learned(h, Tenant("slack", "T-OTHER"), "q-4", "expert", DifficultyEstimate(-2.0, 20.0, 50, 49))
    assert "only admins" in await _reply(h, PLAYER, "difficulty")
    out = await _reply(h, OWNER, "difficulty")
    assert "Label vs. answers* · 1 disagree" in out
    assert "`q-0` labelled *beginner*, plays like *expert* (6/50 right first time)" in out
    assert "q-4" not in out, "another workspace's answers"


async def test_insights_escape_the_topic_and_offer_the_quiz(h: Harness) -> None:
    channel = ChannelRef("slack", SLACK_TENANT.workspace_id, "C1")
    challenge, _ = await h.services.quiz.open_challenge(channel)
    for i in range(10):
        who = Actor(PlayerRef("slack", f"U{i}", f"p{i}"), tenant=SLACK_TENANT)
        for p in challenge.problems:
            await h.services.quiz.start_problem(who, p.id)
            await h.services.quiz.answer(who, p.id, "A" if p.question.topic != HOSTILE else "B")
    await h.services.quiz.close_challenge(challenge.id)
    assert "only admins" in await _reply(h, PLAYER, "insights")
    out = json.loads(await _reply(h, OWNER, "insights"))
    text = json.dumps(out, ensure_ascii=False)
    assert "<!here>" not in text, "a topic must not ping the channel"
    assert "*&lt;!here&gt; &amp; co*: 0% right first time (0/10)" in text
    assert "`/rankzero quiz weakest` (these topics)" in text
    # The quiz command quotes the topic as /rankzero reads it back, then escapes it for mrkdwn.
    assert "`/rankzero quiz '&lt;!here&gt; &amp; co'`" in text
    # Any member's "quiz weakest" quizzes the workspace's three weakest topics: one question each here
    # (the whole bank would make five).
    n = len(h.api.of("views.update"))
    assert (await h.send.command(PLAYER, "quiz weakest")).status_code == 200
    quiz = (await h.api.wait_for("views.update", n + 1))[-1].args["view"]
    assert "*Quiz 1 of 3*" in json.dumps(quiz, ensure_ascii=False)
    help_text = await _reply(h, OWNER, "help")
    assert "`insights`" in help_text and "`difficulty`" in help_text
