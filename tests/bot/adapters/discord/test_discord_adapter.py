"""The Discord adapter through discord.py's real objects: its HTTP client talks to a local fake of the
Discord REST API (tests/discord_fake.py) and interactions enter through the real ConnectionState.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Iterator
from typing import Any

import discord
import pytest
from discord import app_commands

from bot.adapters.discord import sanitize
from bot.adapters.discord.app import DiscordAdapter
from bot.adapters.discord.failures import NOT_ALLOWED
from bot.core.models import Tenant
from bot.core.tenancy import TenantAllowList
from bot.core.vocabulary import MULTIPLE_CHOICE_KINDS, Difficulty, Period, Scope
from tests.conftest import ADMIN, make_spec
from tests.discord_env import ADMIN_ROLE, CHANNEL, Bot, BotOptions, close_bot, open_bot
from tests.discord_fake import (
    CHANNEL_ID,
    GUILD_ID,
    MANAGE_GUILD,
    FakeDiscord,
    no_unexpected_rejections,
)
from tests.fakes import FrozenClock


@pytest.fixture(autouse=True)
def _strict_discord(request: pytest.FixtureRequest) -> Iterator[None]:
    """Every request the bot makes must be one Discord accepts (unless the test takes the refusal)."""
    yield
    no_unexpected_rejections(request)


CALLBACK = r"/interactions/\d+/[^/]+/callback"
OPTIONS = BotOptions(admin_roles=(ADMIN_ROLE,))


@pytest.fixture
def bot_options() -> BotOptions:
    """Admins by role (ADMIN_ROLE); the test bank."""
    return OPTIONS


def _embed(body: dict[str, Any]) -> dict[str, Any]:
    embed: dict[str, Any] = body["embeds"][0]
    return embed


def _field(embed: dict[str, Any], name: str) -> str:
    value: str = next(f["value"] for f in embed["fields"] if f["name"].startswith(name))
    return value


def _labels(body: dict[str, Any]) -> list[list[str]]:
    return [[c["label"] for c in row["components"]] for row in body.get("components", [])]


# ---------------------------------------------------------------------- the daily post
async def test_daily_post_has_embed_countdown_and_start_button(bot: Bot) -> None:
    closes = bot.clock.now().replace(hour=17)
    await bot.quiz.post_daily(CHANNEL, closes_at=closes)
    [req] = bot.fake.calls("POST", rf"/channels/{CHANNEL_ID}/messages")
    embed = req.body["embeds"][0]
    assert f"<t:{int(closes.timestamp())}:R>" in embed["description"]
    assert embed["description"].count("\n**") == 4  # five problems listed
    assert req.body["allowed_mentions"] == {"parse": []}
    [[button]] = [row["components"] for row in req.body["components"]]
    assert button["label"] == "Start" and button["custom_id"].startswith("rz:start:")
    # the message id became the challenge's reference (used to close the post later)
    challenge = await bot.quiz.get_challenge(int(button["custom_id"].split(":")[2]))
    assert challenge.message_ref == str(max(bot.fake.messages))


# ---------------------------------------------------------------------- the private flow
async def test_start_opens_ephemeral_problem_with_choices_attempts_and_deadline(bot: Bot) -> None:
    post = await bot.post()
    token, _ = await bot.start(post)
    [ack] = bot.callbacks(token)
    assert ack["type"] == 5 and ack["data"]["flags"] == 64  # deferred, ephemeral, within the 3 s
    body = bot.edits(token)[-1]
    embed = _embed(body)
    assert embed["title"].startswith("Problem 1 of 5")
    assert _field(embed, "Attempts") == "Attempts: 2 left"
    deadline = int((bot.clock.now().timestamp()) + 120)
    assert f"<t:{deadline}:R>" in _field(embed, "Time")
    assert _labels(body) == [["A", "B", "C", "D"], ["Hint"]]
    assert bot.adapter.play is not None
    # armed right after the edit returns: wait for it rather than race the bot's task
    await bot.fake.wait_for(lambda: bot.adapter.play is not None and bot.adapter.play.countdowns.armed == 1)


async def test_answer_wrong_then_right_then_next(bot: Bot) -> None:
    post = await bot.post()
    _, eph = await bot.start(post)
    t1 = bot.act.click(bot.client, eph, bot.buttons(eph)["B"])
    await bot.fake.wait_for(lambda: bot.edits(t1))
    assert bot.callbacks(t1)[0]["type"] == 6  # deferred update of the ephemeral message
    wrong = _embed(bot.edits(t1)[-1])
    result = _field(wrong, "Result")
    assert result.startswith("❌ B:") and "1 attempt left" in result
    assert _field(wrong, "Attempts") == "Attempts: 1 left"
    b_button = bot.fake.messages[eph]["components"][0]["components"][1]
    assert b_button["label"] == "B" and b_button["disabled"] is True

    t2 = bot.act.click(bot.client, eph, bot.buttons(eph)["A"])
    await bot.fake.wait_for(lambda: bot.edits(t2))
    right = _embed(bot.edits(t2)[-1])
    assert _field(right, "Result").startswith("✅ A:")
    assert "because" in _field(right, "Explanation")  # the explanation once the problem is over
    assert _labels(bot.edits(t2)[-1]) == [["Next"]]

    t3 = bot.act.click(bot.client, eph, bot.buttons(eph)["Next"])
    await bot.fake.wait_for(lambda: bot.edits(t3))
    assert _embed(bot.edits(t3)[-1])["title"].startswith("Problem 2 of 5")


async def test_double_click_cannot_exceed_the_attempt_limit(bot: Bot) -> None:
    post = await bot.post()
    _, eph = await bot.start(post)
    ids = bot.buttons(eph)
    first = bot.act.click(bot.client, eph, ids["B"])
    await bot.fake.wait_for(lambda: bot.edits(first))
    # The last attempt, clicked twice before either response arrives.
    c1 = bot.act.click(bot.client, eph, ids["C"])
    c2 = bot.act.click(bot.client, eph, ids["D"])
    await bot.fake.wait_for(
        lambda: all(bot.edits(t) or bot.followups(t) for t in (c1, c2)) and bot.adapter.play
    )
    await asyncio.sleep(0.05)
    problem_id = int(ids["B"].split(":")[2])
    card = await bot.quiz.view_problem(_alice(), problem_id)
    assert card.attempts_left == 0 and card.over
    assert len(card.wrong_letters) == 2  # B and exactly one of C/D were stored
    refused = [b for t in (c1, c2) for b in bot.followups(t)]
    assert len(refused) == 1 and "⚠️" in refused[0]["content"]
    assert all(len(bot.callbacks(t)) == 1 for t in (first, c1, c2))  # every click acknowledged once


def _alice() -> Any:
    from bot.core.models import Actor, PlayerRef

    return Actor(PlayerRef("discord", "111", "alice"))


async def test_hint_shows_the_hint_and_disables_the_button(bot: Bot) -> None:
    post = await bot.post()
    _, eph = await bot.start(post)
    t = bot.act.click(bot.client, eph, bot.buttons(eph)["Hint"])
    await bot.fake.wait_for(lambda: bot.edits(t))
    body = bot.edits(t)[-1]
    assert "hint for" in _field(_embed(body), "💡 Hint")
    hint_button = body["components"][-1]["components"][0]
    assert hint_button["label"] == "Hint" and hint_button["disabled"] is True


async def test_time_up_edits_the_ephemeral_message_without_a_click(bot: Bot) -> None:
    post = await bot.post()
    token, _ = await bot.start(post)
    before = len(bot.edits(token))
    bot.clock.advance(121)  # past the stored deadline; the countdown re-reads the clock
    await bot.fake.wait_for(lambda: len(bot.edits(token)) > before)
    embed = _embed(bot.edits(token)[-1])
    assert "Time is up" in _field(embed, "Result")
    assert "Correct answer: **A**" in _field(embed, "Explanation")
    assert _labels(bot.edits(token)[-1]) == [["Next"]]
    problem_id = int(embed["footer"]["text"].split()[-1])
    card = await bot.quiz.view_problem(_alice(), problem_id)
    assert card.over  # recorded in the database, not only shown


async def test_buttons_survive_a_restart(fake: FakeDiscord, db: str, clock: FrozenClock) -> None:
    first = await open_bot(fake, db, clock, OPTIONS)
    post = await first.post()
    await close_bot(first)
    # A new process: a new client that never sent this message; only the custom_id routes the click.
    second = await open_bot(fake, db, clock, OPTIONS.but(bank=None))
    try:
        assert second.client._connection._view_store.persistent_views == []
        token, _ = await second.start(post)
        assert _embed(second.edits(token)[-1])["title"].startswith("Problem 1 of 5")
    finally:
        await close_bot(second)


# ---------------------------------------------------------------------- sanitising and limits
async def test_echoed_text_cannot_ping_or_break_code_blocks(
    fake: FakeDiscord, db: str, clock: FrozenClock
) -> None:
    evil = make_spec(
        "evil-1",
        "intermediate",
        "DDP @everyone",
        prompt="Hey @everyone and <@123> and <@&456>: ```py\nboom\n``` after",
        code="print('```')\n" + "x = 1\n" * 400,
    )
    bot = await open_bot(fake, db, clock, OPTIONS.but(bank=None))
    try:
        await bot.quiz.admin_import(ADMIN, [evil])
        await bot.quiz.post_daily(CHANNEL, problems=1)
        [post_req] = fake.calls("POST", rf"/channels/{CHANNEL_ID}/messages")
        assert "@everyone" not in post_req.body["embeds"][0]["description"]
        token, _ = await bot.start(max(fake.messages))
        body = bot.edits(token)[-1]
        assert body["allowed_mentions"] == {"parse": []}
        embed = _embed(body)
        text = embed["description"]
        assert "@everyone" not in text and "<@123>" not in text and "<@&456>" not in text
        # A fence that does not start a line opens nothing; the stray closing one is closed at the end.
        assert text.count("```") % 2 == 0 and "```py" not in text
        # Code over one field goes on in further fields, each its own closed block; nothing is cut.
        pieces = [f["value"] for f in embed["fields"] if f["name"] in ("Code", "Code (continued)")]
        assert len(pieces) == 3
        for code in pieces:
            assert code.startswith("```py\n") and code.endswith("\n```") and code.count("```") == 2
            assert len(code) <= 1024 and sanitize.MARKER not in code
        assert sum(code.count("x = 1") for code in pieces) == 400
        assert "@everyone" not in embed["title"]
    finally:
        await close_bot(bot)


def test_limits_truncate_with_a_marker_never_exceed() -> None:
    embed = discord.Embed(title="t" * 400, description="d" * 5000)
    for i in range(30):
        embed.add_field(name=f"f{i}", value="v" * 2000)
    sanitize.fit_embed(embed)
    data = embed.to_dict()
    assert len(embed) <= sanitize.EMBED_TOTAL
    assert len(data["title"]) == 256 and data["title"].endswith(sanitize.MARKER)
    assert len(data["fields"]) <= 25
    assert all(len(f["value"]) <= 1024 for f in data["fields"])
    assert any(sanitize.MARKER in f["name"] or sanitize.MARKER in f["value"] for f in data["fields"])
    chunks = sanitize.split_text("line\n" * 1000)
    assert all(len(c) <= 2000 for c in chunks) and "".join(chunks).count("line") == 1000


def test_mentions_and_fences_are_neutralised() -> None:
    text = sanitize.safe_text("@everyone @here <@123> <@!5> <#9> ```x```")
    for bad in ("@everyone", "@here", "<@123>", "<@!5>", "<#9>", "```"):
        assert bad not in text
    assert sanitize.plain("*bold* @everyone") == "\\*bold\\* @\u200beveryone"


# ---------------------------------------------------------------------- slash commands and admins
def _content(bot: Bot, token: str) -> str:
    return "\n".join(b.get("content") or "" for b in bot.followups(token))


async def test_non_admin_is_refused_clearly(bot: Bot) -> None:
    t1 = bot.act.command(bot.client, "rankzero post-now")
    await bot.fake.wait_for(lambda: bot.followups(t1))
    assert "only admins can do that" in _content(bot, t1)
    assert bot.callbacks(t1)[0]["type"] == 5  # acknowledged first
    assert bot.fake.calls("POST", rf"/channels/{CHANNEL_ID}/messages") == []  # nothing posted
    t2 = bot.act.command(
        bot.client,
        "question add",
        [
            {"type": 3, "name": "id", "value": "q-1"},
            {"type": 3, "name": "topic", "value": "DDP"},
            {"type": 3, "name": "difficulty", "value": "advanced"},
        ],
    )
    await bot.fake.wait_for(lambda: bot.callbacks(t2))
    [refusal] = bot.callbacks(t2)
    assert refusal["type"] == 4 and "only admins" in refusal["data"]["content"]  # no modal opened


async def test_admin_by_role_can_post_now(bot: Bot) -> None:
    token = bot.act.command(bot.client, "rankzero post-now", roles=[ADMIN_ROLE])
    await bot.fake.wait_for(lambda: bot.followups(token))
    assert "is posted" in _content(bot, token)
    assert len(bot.fake.calls("POST", rf"/channels/{CHANNEL_ID}/messages")) == 1


async def test_question_add_modal_shows_validation_errors_then_adds(bot: Bot) -> None:
    opts = [
        {"type": 3, "name": "id", "value": "ddp-modal-1"},
        {"type": 3, "name": "topic", "value": "DDP"},
        {"type": 3, "name": "difficulty", "value": "advanced"},
    ]
    token = bot.act.command(bot.client, "question add", opts, permissions=MANAGE_GUILD)
    await bot.fake.wait_for(lambda: bot.callbacks(token))
    [modal] = bot.callbacks(token)
    assert modal["type"] == 9  # the modal is the response
    custom_id = modal["data"]["custom_id"]
    inputs = [c["components"][0]["custom_id"] for c in modal["data"]["components"]]
    assert len(inputs) == 5
    prompt, code, choices, correct, notes = inputs
    # No choice is marked correct (letter E of 2 choices): refused with the schema's message.
    bad = bot.act.submit_modal(
        bot.client,
        custom_id,
        {prompt: "What does DDP all-reduce?", code: "", choices: "grads\nweights", correct: "E", notes: ""},
        permissions=MANAGE_GUILD,
    )
    await bot.fake.wait_for(lambda: bot.followups(bad))
    assert "was not added" in _content(bot, bad) and "choices" in _content(bot, bad)
    assert all(r.id != "ddp-modal-1" for r in await bot.quiz.list_questions(view=CHANNEL.tenant))

    token = bot.act.command(bot.client, "question add", opts, permissions=MANAGE_GUILD)
    await bot.fake.wait_for(lambda: bot.callbacks(token))
    custom_id = bot.callbacks(token)[0]["data"]["custom_id"]
    good = bot.act.submit_modal(
        bot.client,
        custom_id,
        {
            prompt: "What does DDP all-reduce?",
            code: "model = DDP(model)",
            choices: "gradients\nweights\nactivations",
            correct: "a",
            notes: "think backward\n---\nDDP averages gradients in backward.",
        },
        permissions=MANAGE_GUILD,
    )
    await bot.fake.wait_for(lambda: bot.followups(good))
    assert "`ddp-modal-1` added" in _content(bot, good)
    [spec] = [s for s in await bot.quiz.export_questions(view=CHANNEL.tenant) if s["id"] == "ddp-modal-1"]
    assert spec["choices"][0]["correct"] is True and spec["hint"] == "think backward"
    assert spec["explanation"] == "DDP averages gradients in backward."


async def test_leaderboard_after_a_solved_problem(bot: Bot) -> None:
    post = await bot.post()
    _, eph = await bot.start(post)
    t = bot.act.click(bot.client, eph, bot.buttons(eph)["A"])
    await bot.fake.wait_for(lambda: bot.edits(t))
    token = bot.act.command(bot.client, "leaderboard", [{"type": 3, "name": "period", "value": "today"}])
    await bot.fake.wait_for(lambda: bot.followups(token))
    embed = bot.followups(token)[0]["embeds"][0]
    assert "today" in embed["title"] and "**1.** alice" in embed["description"]


async def test_dispute_without_runner_says_so(fake: FakeDiscord, db: str, clock: FrozenClock) -> None:
    """No RANKZERO_RUNNER_URL: disputing a problem the player finished says how to configure a runner."""
    spec = make_spec(
        "no-runner",
        "advanced",
        "DDP",
        kind="predict_output",
        code="print('x')\n",
        runner={"mode": "python", "nproc": 1, "gpus": 0, "init_process_group": False},
    )
    bot = await open_bot(fake, db, clock, OPTIONS.but(bank=[spec]))
    try:
        await bot.quiz.post_daily(CHANNEL, problems=1)
        _, eph = await bot.start(max(fake.messages))
        answered = bot.act.click(bot.client, eph, bot.buttons(eph)["A"])
        await fake.wait_for(lambda: bot.edits(answered))
        problem_id = int(_embed(bot.edits(answered)[-1])["footer"]["text"].split()[-1])
        token = bot.act.command(bot.client, "dispute", [{"type": 4, "name": "problem", "value": problem_id}])
        await fake.wait_for(lambda: bot.followups(token))
        assert "no runner is configured: set RANKZERO_RUNNER_URL" in _content(bot, token)
        assert fake.threads == {}  # nothing ran: no verdict thread
    finally:
        await close_bot(bot)


async def test_question_import_from_attachment(bot: Bot) -> None:
    yaml_text = (
        "questions:\n"
        "  - id: imported-1\n    kind: conceptual\n    topic: FSDP & ZeRO\n    difficulty: expert\n"
        "    prompt: What does FSDP shard?\n"
        "    choices:\n      - text: parameters\n        correct: true\n      - text: nothing\n"
    )
    bot.fake.files["/files/bank.yaml"] = yaml_text.encode()
    att_id = "610000000000000001"
    attachment = {
        "id": att_id,
        "filename": "bank.yaml",
        "size": len(yaml_text),
        "url": f"{bot.fake.root}/files/bank.yaml",
        "proxy_url": f"{bot.fake.root}/files/bank.yaml",
    }
    token = bot.act.command(
        bot.client,
        "question import",
        [{"type": 11, "name": "file", "value": att_id}],
        permissions=MANAGE_GUILD,
        resolved={"attachments": {att_id: attachment}},
    )
    await bot.fake.wait_for(lambda: bot.followups(token))
    assert "1 added" in _content(bot, token)
    assert any(r.id == "imported-1" for r in await bot.quiz.list_questions(view=CHANNEL.tenant))


async def test_dispute_verdict_goes_to_a_thread(fake: FakeDiscord, db: str, clock: FrozenClock) -> None:
    from tests.bot.adapters.console.test_console_dispute import FakeRunner

    runner = FakeRunner("@everyone disc-dispute choice 0\n")
    bot = await open_bot(fake, db, clock, OPTIONS.but(bank=None, runner=runner))
    try:
        spec = make_spec(
            "disc-dispute",
            "advanced",
            "DDP",
            kind="predict_output",
            code="print('x')\n",
            runner={"mode": "python", "nproc": 1, "gpus": 0, "init_process_group": False},
        )
        await bot.quiz.admin_import(ADMIN, [spec])
        await bot.quiz.post_daily(CHANNEL, problems=1)
        _, eph = await bot.start(max(fake.messages))
        answered = bot.act.click(bot.client, eph, bot.buttons(eph)["A"])
        await fake.wait_for(lambda: bot.edits(answered))
        problem_id = int(_embed(bot.edits(answered)[-1])["footer"]["text"].split()[-1])
        token = bot.act.command(bot.client, "dispute", [{"type": 4, "name": "problem", "value": problem_id}])
        await fake.wait_for(lambda: bot.followups(token))
        [thread_id] = fake.threads
        [verdict] = fake.calls("POST", rf"/channels/{thread_id}/messages")
        output = _field(verdict.body["embeds"][0], "Rank 0")
        # Runner output stays inside one code block, its mention neutralised; nobody is pinged by it.
        assert output.count("```") == 2
        assert f"@{sanitize.ZWSP}everyone disc-dispute choice 0" in output
        assert verdict.body["allowed_mentions"] == {"parse": []}
        assert f"<#{thread_id}>" in _content(bot, token)
    finally:
        await close_bot(bot)


async def test_schedule_set_show_pause_by_slash_command(bot: Bot) -> None:
    opts = [
        {"type": 3, "name": "time", "value": "09:30"},
        {"type": 3, "name": "timezone", "value": "Europe/Berlin"},
        {"type": 3, "name": "days", "value": "mon-fri"},
    ]
    t1 = bot.act.command(bot.client, "rankzero schedule set", opts, permissions=MANAGE_GUILD)
    await bot.fake.wait_for(lambda: bot.followups(t1))
    assert "Schedule saved" in _content(bot, t1)
    t2 = bot.act.command(bot.client, "rankzero schedule show")
    await bot.fake.wait_for(lambda: bot.followups(t2))
    assert "Next posts: <t:" in _content(bot, t2)
    bad = bot.act.command(
        bot.client,
        "rankzero schedule set",
        [{"type": 3, "name": "timezone", "value": "Mars/Base"}],
        permissions=MANAGE_GUILD,
    )
    await bot.fake.wait_for(lambda: bot.followups(bad))
    assert "unknown timezone" in _content(bot, bad)
    t3 = bot.act.command(bot.client, "rankzero schedule pause", permissions=MANAGE_GUILD)
    await bot.fake.wait_for(lambda: bot.followups(t3))
    assert "paused" in _content(bot, t3)


async def test_results_reminder_and_summary_posts(bot: Bot) -> None:
    from bot.core.cards import LeaderboardCard, ReminderCard
    from bot.core.models import StandingRow

    closes = bot.clock.now().replace(hour=17)
    card = await bot.quiz.post_daily(CHANNEL, closes_at=closes)
    post = max(bot.fake.messages)
    await bot.adapter.platform.post_reminder(
        CHANNEL, ReminderCard(card.challenge_id, card.title, card.day, closes), str(post)
    )
    reminder = bot.fake.calls("POST", rf"/channels/{CHANNEL_ID}/messages")[-1].body
    assert int(reminder["message_reference"]["message_id"]) == post
    assert f"<t:{int(closes.timestamp())}:R>" in reminder["content"]
    results = await bot.quiz.close_challenge(card.challenge_id)
    assert results is not None
    posted = bot.fake.calls("POST", rf"/channels/{CHANNEL_ID}/messages")[-1].body
    assert posted["embeds"][0]["title"].startswith("Results")
    [close_edit] = bot.fake.calls("PATCH", rf"/channels/{CHANNEL_ID}/messages/{post}")
    assert close_edit.body["components"] == []  # the Start button is gone
    rows = tuple(StandingRow(i + 1, i, f"<@{i}> @everyone", 10, 1, 1000) for i in range(40))
    await bot.adapter.platform.post_weekly_summary(
        CHANNEL, LeaderboardCard(Scope.CHANNEL, Period.WEEK, "Weekly", rows, None, 40)
    )
    summary = bot.fake.calls("POST", rf"/channels/{CHANNEL_ID}/messages")[-1].body["embeds"][0]
    assert "@everyone" not in summary["description"] and "<@1>" not in summary["description"]


def test_registry_builds_the_discord_adapter() -> None:
    from pydantic import SecretStr

    from bot.adapters.registry import build_adapters
    from bot.config import Settings

    [adapter] = build_adapters(
        Settings(
            discord_token=SecretStr("t"),
            discord_admin_roles=[7],
            discord_guild_id=9,
            database_url="sqlite://",
        )
    )
    assert isinstance(adapter, DiscordAdapter) and adapter.name == "discord"
    assert adapter.admin_roles == (7,) and adapter.guild_id == 9
    assert adapter.client.intents.value == discord.Intents(guilds=True).value  # no message content


async def test_slash_commands_sync_to_the_configured_guild(
    fake: FakeDiscord, db: str, clock: FrozenClock
) -> None:
    bot = await open_bot(fake, db, clock, OPTIONS.but(bank=None))
    try:
        bot.adapter.guild_id = GUILD_ID
        await bot.adapter.sync_commands()
        [put] = fake.calls("PUT", rf"/applications/\d+/guilds/{GUILD_ID}/commands")
        names = {c["name"]: c for c in put.body}
        # The services serve gives the adapter always carry practice: /quiz, /review and /explain too.
        assert set(names) == {
            *("leaderboard", "stats", "challenge", "dispute", "rankzero", "question"),
            *("quiz", "review", "explain", "web"),
        }
        subs = {o["name"] for o in names["question"]["options"]}
        assert subs == {"add", "restore", "import", "retire", "preview", "correct", "flags"}
        scope = next(o for o in names["leaderboard"]["options"] if o["name"] == "scope")
        assert [c["value"] for c in scope["choices"]] == ["channel", "server"]
    finally:
        await close_bot(bot)


async def test_every_slash_command_is_a_method_of_its_command_class(bot: Bot) -> None:
    """Issue 29 §3: a command's callback is a method of its command class (an ``app_commands.Group`` or
    the top-level commands' class) that calls the command layer, with no registration closure between.
    """
    commands = [c for c in bot.client.tree.walk_commands() if isinstance(c, app_commands.Command)]
    names = {c.qualified_name for c in commands}
    assert {"leaderboard", "dispute", "quiz", "rankzero schedule set", "question flags"} <= names
    for command in commands:
        assert command.binding is not None, command.qualified_name
        assert "<locals>" not in command.callback.__qualname__, command.qualified_name
    groups = {c.name: c for c in bot.client.tree.get_commands() if isinstance(c, app_commands.Group)}
    # The admin groups' subcommands are bound to the group itself (the nested schedule group's too).
    subcommands = [c for c in groups["rankzero"].walk_commands() if isinstance(c, app_commands.Command)]
    assert "rankzero schedule set" in {c.qualified_name for c in subcommands}
    assert all(c.binding is groups["rankzero"] for c in subcommands)


async def test_question_add_offers_every_difficulty_and_adds_a_beginner_question(
    fake: FakeDiscord, db: str, clock: FrozenClock
) -> None:
    """The synced choices come from the vocabulary: beginner is offered (it was missing) and adds."""
    bot = await open_bot(fake, db, clock, OPTIONS.but(bank=None))
    try:
        bot.adapter.guild_id = GUILD_ID
        await bot.adapter.sync_commands()
        [put] = fake.calls("PUT", rf"/applications/\d+/guilds/{GUILD_ID}/commands")
        question = next(c for c in put.body if c["name"] == "question")
        add = {o["name"]: o for o in next(s for s in question["options"] if s["name"] == "add")["options"]}
        assert [c["value"] for c in add["difficulty"]["choices"]] == [d.value for d in Difficulty]
        assert [c["value"] for c in add["kind"]["choices"]] == [k.value for k in MULTIPLE_CHOICE_KINDS]
        opts = [
            {"type": 3, "name": "id", "value": "ddp-beginner-1"},
            {"type": 3, "name": "topic", "value": "DDP"},
            {"type": 3, "name": "difficulty", "value": "beginner"},
        ]
        with pytest.raises(ValueError, match="Discord offers only"):  # the fake checks what was synced
            bot.act.command(bot.client, "question add", [*opts[:2], {**opts[2], "value": "trivial"}])
        token = bot.act.command(bot.client, "question add", opts, permissions=MANAGE_GUILD)
        await fake.wait_for(lambda: bot.callbacks(token))
        modal = bot.callbacks(token)[0]["data"]
        prompt, code, choices, correct, notes = (c["components"][0]["custom_id"] for c in modal["components"])
        values = {prompt: "How many processes does DDP start per GPU?", code: "", choices: "one\ntwo"}
        good = bot.act.submit_modal(
            bot.client,
            modal["custom_id"],
            {**values, correct: "a", notes: "one each"},
            permissions=MANAGE_GUILD,
        )
        await fake.wait_for(lambda: bot.followups(good))
        assert "`ddp-beginner-1` added" in _content(bot, good)
        [spec] = [
            s for s in await bot.quiz.export_questions(view=CHANNEL.tenant) if s["id"] == "ddp-beginner-1"
        ]
        assert spec["difficulty"] == "beginner" and spec["kind"] == "conceptual"
    finally:
        await close_bot(bot)


async def test_full_run_ends_with_the_players_summary(bot: Bot) -> None:
    post = await bot.post()
    _, eph = await bot.start(post)
    for n in range(5):
        assert _embed(bot.fake.messages[eph])["title"].startswith(f"Problem {n + 1} of 5")
        answered = bot.act.click(bot.client, eph, bot.buttons(eph)["A"])
        await bot.fake.wait_for(functools.partial(bot.edits, answered))
        nxt = bot.act.click(bot.client, eph, bot.buttons(eph)["Next"])
        await bot.fake.wait_for(functools.partial(bot.edits, nxt))
    done = bot.fake.messages[eph]
    assert _embed(done)["title"].startswith("Done: 5/5 correct")
    assert done["components"] == []
    assert bot.adapter.play is not None and bot.adapter.play.countdowns.armed == 0


def test_six_choices_fit_five_buttons_per_row() -> None:
    import datetime as dt

    from bot.adapters.discord import render
    from bot.core.cards import ProblemCard

    now = dt.datetime(2026, 11, 21, 9, 0, tzinfo=dt.UTC)
    card = ProblemCard(
        1,
        2,
        1,
        5,
        "conceptual",
        "DDP",
        "expert",
        "p" * 5000,
        "c" * 3000,
        tuple((letter, "x" * 900) for letter in "ABCDEF"),
        2,
        2,
        now,
        now,
        True,
        None,
    )
    rows = [[c["label"] for c in row["components"]] for row in render.problem_view(card).to_components()]
    assert rows == [["A", "B", "C", "D", "E"], ["F"], ["Hint"]]
    embed = render.problem_embed(card)
    assert len(embed) <= sanitize.EMBED_TOTAL
    assert all(len(f["value"]) <= 1024 for f in embed.to_dict()["fields"])


async def test_start_on_a_closed_challenge_says_so(bot: Bot) -> None:
    post = await bot.post()
    start_id = bot.buttons(post)["Start"]
    await bot.quiz.close_challenge(int(start_id.split(":")[2]))
    bot.fake.messages[post]["components"] = [  # a client still showing the old post
        {"type": 1, "components": [{"type": 2, "style": 3, "label": "Start", "custom_id": start_id}]}
    ]
    token = bot.act.click(bot.client, post, start_id)
    await bot.fake.wait_for(lambda: bot.edits(token))
    assert "challenge is closed" in bot.edits(token)[-1]["content"]


async def test_question_preview_and_retire(bot: Bot) -> None:
    opt = [{"type": 3, "name": "question", "value": "int-0"}]
    t1 = bot.act.command(bot.client, "question preview", opt, permissions=MANAGE_GUILD)
    await bot.fake.wait_for(lambda: bot.followups(t1))
    embed = bot.followups(t1)[0]["embeds"][0]
    assert "int-0" in embed["title"] and "✅" in _field(embed, "Choices")
    t2 = bot.act.command(bot.client, "question retire", opt, permissions=MANAGE_GUILD)
    await bot.fake.wait_for(lambda: bot.followups(t2))
    assert "retired" in _content(bot, t2)
    assert "int-0" not in {r.id for r in await bot.quiz.list_questions(view=CHANNEL.tenant)}
    t3 = bot.act.command(bot.client, "question retire", [{"type": 3, "name": "question", "value": "nope"}])
    await bot.fake.wait_for(lambda: bot.followups(t3))
    assert "only admins" in _content(bot, t3)  # non-admin: refused before the service is asked


async def test_stats_of_another_member(bot: Bot) -> None:
    post = await bot.post()
    _, eph = await bot.start(post, user_id=222)
    t = bot.act.click(bot.client, eph, bot.buttons(eph)["A"], user_id=222, name="bob")
    await bot.fake.wait_for(lambda: bot.edits(t))
    from tests.discord_fake import user_payload

    token = bot.act.command(
        bot.client,
        "stats",
        [{"type": 6, "name": "member", "value": "222"}],
        resolved={"users": {"222": user_payload(222, "bob")}},
    )
    await bot.fake.wait_for(lambda: bot.followups(token))
    embed = bot.followups(token)[0]["embeds"][0]
    assert embed["title"] == "Stats · bob" and "1/1 solved" in embed["description"]


async def test_another_servers_admin_gets_missing_for_this_servers_objects(bot: Bot) -> None:
    """Issue 24: an admin of another server naming this server's challenge or own question by id is told
    exactly what a missing id gets, and nothing changes here.
    """
    post = await bot.post()
    challenge_id = int(bot.buttons(post)["Start"].split(":")[2])
    other = GUILD_ID + 1

    async def reply(name: str, options: list[dict[str, Any]]) -> str:
        token = bot.act.command(bot.client, name, options, permissions=MANAGE_GUILD, guild_id=other)
        await bot.fake.wait_for(lambda: bot.followups(token))
        return _content(bot, token)

    def close(cid: int) -> list[dict[str, Any]]:
        return [{"type": 4, "name": "challenge", "value": cid}]

    theirs = await reply("rankzero close-now", close(challenge_id))
    missing = await reply("rankzero close-now", close(challenge_id + 1000))
    assert theirs.replace(str(challenge_id), "N") == missing.replace(str(challenge_id + 1000), "N")
    assert "no challenge" in theirs
    assert (await bot.quiz.get_challenge(challenge_id)).status == "open"
    # Retiring a shared question from the other server retires it there only.
    opt = [{"type": 3, "name": "question", "value": "int-0"}]
    assert "retired" in await reply("question retire", opt)
    assert "int-0" in {r.id for r in await bot.quiz.list_questions(view=CHANNEL.tenant)}
    assert "int-0" not in {r.id for r in await bot.quiz.list_questions(view=Tenant("discord", str(other)))}
    # This server's own admin still closes it.
    token = bot.act.command(bot.client, "rankzero close-now", close(challenge_id), permissions=MANAGE_GUILD)
    await bot.fake.wait_for(lambda: bot.followups(token))
    assert "Closed" in _content(bot, token)


async def test_a_command_from_a_server_not_allowed_is_refused_and_not_run(
    bot: Bot, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 24: until the bot has left a server that is not in RANKZERO_ALLOWED_TENANTS (or if leaving
    failed), its commands are answered "not enabled" and do nothing; the allowed server is served.
    """
    bot.client.rankzero_allowed = TenantAllowList([f"discord:{GUILD_ID}"])
    caplog.set_level("WARNING", logger="bot.adapters.discord.failures")
    other = GUILD_ID + 1
    token = bot.act.command(bot.client, "rankzero post-now", permissions=MANAGE_GUILD, guild_id=other)
    await bot.fake.wait_for(lambda: bot.callbacks(token))
    assert bot.callbacks(token)[0]["data"]["content"] == NOT_ALLOWED
    assert f"refused a command from Discord server {other}" in caplog.text
    await asyncio.sleep(0.2)
    assert not bot.followups(token) and not bot.fake.calls("POST", r"/channels/\d+/messages")
    ok = bot.act.command(bot.client, "rankzero post-now", permissions=MANAGE_GUILD)  # the allowed server
    await bot.fake.wait_for(lambda: bot.followups(ok))
    assert "is posted" in _content(bot, ok)


async def test_a_button_from_a_dropped_server_is_refused(bot: Bot, caplog: pytest.LogCaptureFixture) -> None:
    """Security review of issue 24: a post made before its server was dropped from
    RANKZERO_ALLOWED_TENANTS keeps its buttons; a click is refused like a command (discord.py runs the
    dynamic item's check, not the command tree's).
    """
    post_id = await bot.post()  # posted while the server was served
    bot.client.rankzero_allowed = TenantAllowList([f"discord:{GUILD_ID + 1}"])  # then dropped
    caplog.set_level("WARNING", logger="bot.adapters.discord.failures")

    token = bot.act.click(bot.client, post_id, bot.buttons(post_id)["Start"])

    await bot.fake.wait_for(lambda: bot.callbacks(token))
    assert bot.callbacks(token)[0]["data"]["content"] == NOT_ALLOWED
    assert f"refused a button from Discord server {GUILD_ID}" in caplog.text
    await asyncio.sleep(0.2)
    assert not bot.followups(token) and not bot.edits(token), "the problem was never started"
