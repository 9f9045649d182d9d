"""``/rankzero difficulty`` and ``/rankzero insights`` through discord.py against the fake Discord: admins
only, private, the server's own data.
"""

from __future__ import annotations

import datetime as dt

from bot.core.difficulty import DifficultyEstimate
from bot.core.models import Actor, PlayerRef, Tenant
from bot.storage.uow import SqlUnitOfWork, session_factory
from tests.discord_env import CHANNEL, Bot
from tests.discord_fake import MANAGE_GUILD

T0 = dt.datetime(2026, 11, 21, 9, 0, tzinfo=dt.UTC)


async def _learned(bot: Bot, tenant: Tenant, qid: str, label: str, e: DifficultyEstimate) -> None:
    async with SqlUnitOfWork(session_factory(bot.engine)) as uow:
        await uow.difficulty.lock_estimates(tenant, {qid: label}, T0)
        await uow.difficulty.save_estimates(tenant, {qid: e}, {qid: label}, T0)


async def _everyone_misses(bot: Bot, players: int) -> None:
    challenge, _ = await bot.quiz.open_challenge(CHANNEL)
    for i in range(players):
        who = Actor(PlayerRef("discord", str(500 + i), f"p{i}"), tenant=CHANNEL.tenant)
        for p in challenge.problems:
            await bot.quiz.start_problem(who, p.id)
            await bot.quiz.answer(who, p.id, "B")
    await bot.quiz.close_challenge(challenge.id)


async def test_admins_see_where_the_servers_answers_disagree_with_the_label(bot: Bot) -> None:
    await _learned(bot, CHANNEL.tenant, "int-0", "intermediate", DifficultyEstimate(1.9, 20.0, 60, 5))
    await _learned(bot, Tenant("discord", "42"), "adv-0", "advanced", DifficultyEstimate(-2.0, 20.0, 60, 58))
    refused = bot.act.command(bot.client, "rankzero difficulty", [], user_id=222, user="mallory")
    assert "only admins" in (await bot.reply(refused))["content"]
    token = bot.act.command(bot.client, "rankzero difficulty", [], permissions=MANAGE_GUILD, user_id=9)
    reply = await bot.reply(token)
    assert reply["flags"] == 64 and reply["allowed_mentions"] == {"parse": []}
    [embed] = reply["embeds"]
    assert embed["title"] == "📐 Label vs. answers · 1 disagree"
    assert "`int-0` · labelled **intermediate**, plays like **expert** (5/60" in embed["description"]
    assert "adv-0" not in embed["description"], "another server's answers"


async def test_insights_name_the_weakest_topics_and_the_quiz(bot: Bot) -> None:
    await _everyone_misses(bot, players=10)
    token = bot.act.command(bot.client, "rankzero insights", [], permissions=MANAGE_GUILD, user_id=9)
    [embed] = (await bot.reply(token))["embeds"]
    fields = {f["name"]: f["value"] for f in embed["fields"]}
    weak = fields["Weakest topics · last 30 days"]
    assert weak.count("0% right first time (0/10)") == 3
    assert fields["Practise them"].startswith("Anyone can run `/quiz topic:weakest` (these topics)")
    # Any member's /quiz topic:weakest quizzes the server's weakest topics.
    weakest = [line.split("**")[1] for line in weak.splitlines()]
    quiz = await bot.command("quiz", [{"type": 3, "name": "topic", "value": "weakest"}], user_id=333)
    [question] = bot.fake.messages[quiz]["embeds"]
    assert question["title"].startswith("Quiz 1/5") and question["title"].endswith(tuple(weakest))
    refused = bot.act.command(bot.client, "rankzero insights", [], user_id=222, user="mallory")
    assert "only admins" in (await bot.reply(refused))["content"]
