"""No silent failures on Discord (issue 15, section 2), through discord.py's real client and the strict fake.

Every interaction gets an answer whatever fails (a database error, a transient conflict, an HTTP error on
a follow-up, an unexpected exception); admin commands check the bot's channel permissions first; a daily
post Discord refuses is reported and posted once fixed; admin commands are hidden from members; guild
sync removes stale global commands and publishes only a changed tree; /healthz shows the gateway.
"""

from __future__ import annotations

import ast
import asyncio
import logging
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import discord
import pytest
from sqlalchemy import text

from bot.core.ports import TransientConflictError
from bot.storage.db import make_engine
from tests.discord_env import ADMIN_CHANNEL, ADMIN_ROLE, CHANNEL, Bot, BotOptions, close_bot, open_bot
from tests.discord_fake import (
    ALL_PERMISSIONS,
    CHANNEL_ID,
    EMBED_LINKS,
    GUILD_ID,
    MANAGE_GUILD,
    READ_MESSAGE_HISTORY,
    SEND_MESSAGES,
    VIEW_CHANNEL,
    FakeDiscord,
    no_unexpected_rejections,
)
from tests.fakes import FrozenClock

WENT_WRONG = "Something went wrong on my side"
OPTIONS = BotOptions(admin_roles=(ADMIN_ROLE,), admin_channel=ADMIN_CHANNEL)


@pytest.fixture(autouse=True)
def _strict_discord(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    no_unexpected_rejections(request)


@pytest.fixture
def bot_options() -> BotOptions:
    """Admins by role, notices to ADMIN_CHANNEL; the test bank."""
    return OPTIONS


def _said(bot: Bot, token: str) -> str:
    """Everything the bot told the user with this interaction: responses, follow-ups, edits."""
    bodies = [c.get("data") or {} for c in bot.callbacks(token)] + bot.followups(token) + bot.edits(token)
    return "\n".join(b.get("content") or "" for b in bodies)


async def _answered(bot: Bot, token: str, needle: str) -> str:
    await bot.fake.wait_for(lambda: needle in _said(bot, token), timeout=5)
    return _said(bot, token)


# ---------------------------------------------------------------------- every interaction gets an answer
async def test_unexpected_exception_in_a_command_answers_and_logs(
    bot: Bot, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def broken(*_: Any, **__: Any) -> Any:
        raise RuntimeError("leaderboard exploded")

    monkeypatch.setattr(bot.quiz, "leaderboard", broken)
    with caplog.at_level(logging.ERROR, logger="bot.adapters.discord.failures"):
        token = bot.act.command(bot.client, "leaderboard")
        said = await _answered(bot, token, WENT_WRONG)
    assert "leaderboard exploded" not in said  # no internals shown to the player
    [record] = [r for r in caplog.records if "/leaderboard failed" in r.getMessage()]
    assert record.exc_info is not None and "leaderboard exploded" in str(record.exc_info[1])


async def test_database_error_on_the_start_button_answers(bot: Bot, db: str) -> None:
    post = await bot.post()
    engine = make_engine(db)
    async with engine.begin() as conn:  # a real database failure: the table the button needs is gone
        await conn.execute(text("ALTER TABLE play_sessions RENAME TO play_sessions_gone"))
    await engine.dispose()
    token = bot.act.click(bot.client, post, bot.buttons(post)["Start"])
    said = await _answered(bot, token, WENT_WRONG)
    assert str(bot.callbacks(token)[0]["type"]) == "5"  # acknowledged first, then told
    assert "play_sessions" not in said


async def test_transient_conflict_on_an_answer_says_try_again(
    bot: Bot, monkeypatch: pytest.MonkeyPatch
) -> None:
    post = await bot.post()
    _, eph = await bot.start(post)

    async def busy(*_: Any, **__: Any) -> Any:
        raise TransientConflictError("deadlock detected")

    monkeypatch.setattr(bot.quiz, "answer", busy)
    token = bot.act.click(bot.client, eph, bot.buttons(eph)["B"])
    said = await _answered(bot, token, "database was busy")
    assert "nothing was recorded" in said


async def test_http_error_on_a_follow_up_still_answers(bot: Bot) -> None:
    token = bot.act.command(bot.client, "leaderboard")
    # Discord refuses the command's follow-up once (the error handler's own follow-up then goes through).
    bot.fake.fail_next(
        "POST", rf"/webhooks/\d+/{token}", 400, {"message": "Invalid Form Body", "code": 50035, "errors": {}}
    )
    said = await _answered(bot, token, "Discord rejected my reply")
    assert "HTTP 400, code 50035" in said
    assert [r[0] for r in bot.fake.take_rejections()] == [400]


async def test_a_form_whose_submit_raises_answers(bot: Bot, monkeypatch: pytest.MonkeyPatch) -> None:
    opts = [
        {"type": 3, "name": "id", "value": "modal-boom"},
        {"type": 3, "name": "topic", "value": "DDP"},
        {"type": 3, "name": "difficulty", "value": "advanced"},
    ]
    token = bot.act.command(bot.client, "question add", opts, permissions=MANAGE_GUILD)
    await bot.fake.wait_for(lambda: bot.callbacks(token))
    modal = bot.callbacks(token)[0]["data"]
    prompt, code, choices, correct, notes = [c["components"][0]["custom_id"] for c in modal["components"]]

    async def broken(*_: Any, **__: Any) -> Any:
        raise RuntimeError("import exploded")

    monkeypatch.setattr(bot.quiz, "admin_import", broken)
    values = {prompt: "What?", code: "", choices: "a\nb", correct: "A", notes: ""}
    submit = bot.act.submit_modal(bot.client, modal["custom_id"], values, permissions=MANAGE_GUILD)
    await _answered(bot, submit, WENT_WRONG)


# ---------------------------------------------------------------------- permissions
async def test_schedule_set_refuses_where_the_bot_cannot_post(bot: Bot) -> None:
    bot.fake.set_permissions(CHANNEL_ID, ALL_PERMISSIONS & ~SEND_MESSAGES & ~EMBED_LINKS)
    opts = [{"type": 3, "name": "time", "value": "09:30"}]
    token = bot.act.command(bot.client, "rankzero schedule set", opts, permissions=MANAGE_GUILD)
    said = await _answered(bot, token, "I cannot post in this channel")
    assert "I lack Send Messages, Embed Links here" in said and "Schedule saved" not in said
    assert await bot.adapter.commands.schedules.show_schedule(CHANNEL) is None  # type: ignore[union-attr]


async def test_post_now_refuses_without_view_channel_and_creates_nothing(bot: Bot) -> None:
    bot.fake.set_permissions(CHANNEL_ID, ALL_PERMISSIONS & ~VIEW_CHANNEL)
    token = bot.act.command(bot.client, "rankzero post-now", permissions=MANAGE_GUILD)
    said = await _answered(bot, token, "I cannot post in this channel")
    assert "View Channel" in said and "is posted" not in said
    assert await bot.quiz.find_challenge(CHANNEL) is None
    assert bot.fake.calls("POST", rf"/channels/{CHANNEL_ID}/messages") == []


async def test_post_now_refused_by_discord_says_so_and_the_next_post_now_posts_it(bot: Bot) -> None:
    missing = {"message": "Missing Permissions", "code": 50013}
    bot.fake.fail_next("POST", rf"/channels/{CHANNEL_ID}/messages", 403, missing)
    first = bot.act.command(bot.client, "rankzero post-now", permissions=MANAGE_GUILD)
    said = await _answered(bot, first, "NOT posted")
    assert "is posted" not in said and "post-now" in said
    # the admins were told in their channel
    [notice] = bot.fake.calls("POST", rf"/channels/{ADMIN_CHANNEL}/messages")
    content = notice.body["content"]
    assert "could not post the challenge" in content and "Embed Links" in content
    assert [r[0] for r in bot.fake.take_rejections()] == [403]
    assert await bot.quiz.find_challenge(CHANNEL) is None  # nobody saw it: removed
    # Fixed: the next post-now posts the day's challenge.
    second = bot.act.command(bot.client, "rankzero post-now", permissions=MANAGE_GUILD)
    said = await _answered(bot, second, "is posted")
    posted = bot.fake.calls("POST", rf"/channels/{CHANNEL_ID}/messages")
    assert len(posted) == 2  # the refused one and the real one
    button = posted[-1].body["components"][0]["components"][0]["custom_id"]
    challenge = await bot.quiz.get_challenge(int(button.split(":")[2]))
    assert f"Challenge #{challenge.id}" in said and challenge.message_ref is not None


async def test_a_refused_scheduled_post_is_reported_and_posted_after_the_fix(
    fake: FakeDiscord, db: str, clock: FrozenClock, caplog: pytest.LogCaptureFixture
) -> None:
    bot = await open_bot(fake, db, clock, OPTIONS.but(admin_channel=None))
    try:
        fake.set_permissions(CHANNEL_ID, ALL_PERMISSIONS & ~EMBED_LINKS)
        with caplog.at_level(logging.ERROR), pytest.raises(discord.Forbidden):
            await bot.quiz.post_daily(CHANNEL)  # what the scheduled job runs
        assert any("could not post the challenge" in r.getMessage() for r in caplog.records)
        assert [r[0] for r in fake.take_rejections()] == [403]
        assert await bot.quiz.find_challenge(CHANNEL) is None  # removed: nobody saw it
        fake.permissions.pop(CHANNEL_ID)
        card = await bot.quiz.post_daily(CHANNEL)  # the scheduler's retry after the fix posts the day
        assert len(fake.calls("POST", rf"/channels/{CHANNEL_ID}/messages")) == 2
        assert (await bot.quiz.get_challenge(card.challenge_id)).message_ref is not None
        clock.advance(60)
        await bot.quiz.post_daily(CHANNEL)  # posted: never again
        assert len(fake.calls("POST", rf"/channels/{CHANNEL_ID}/messages")) == 2
    finally:
        await close_bot(bot)


# ---------------------------------------------------------------------- commands as members see them
async def test_admin_commands_are_hidden_from_members_and_absent_from_dms(
    fake: FakeDiscord, db: str, clock: FrozenClock
) -> None:
    bot = await open_bot(fake, db, clock, OPTIONS)
    try:
        await bot.adapter.sync_commands()
        [put] = fake.calls("PUT", r"/applications/\d+/commands")
        by_name = {c["name"]: c for c in put.body}
        for admin in ("rankzero", "question"):
            assert str(by_name[admin]["default_member_permissions"]) == str(MANAGE_GUILD)
            assert by_name[admin].get("dm_permission") is False or by_name[admin].get("contexts") == [0]
        for player in ("leaderboard", "stats", "challenge", "dispute"):
            assert by_name[player].get("default_member_permissions") is None
    finally:
        await close_bot(bot)


async def test_guild_sync_removes_stale_globals_and_publishes_only_a_changed_tree(
    fake: FakeDiscord, db: str, clock: FrozenClock, tmp_path: Path
) -> None:
    state = tmp_path / "discord-commands.sha256"
    bot = await open_bot(fake, db, clock, OPTIONS.but(adapter={"guild_id": GUILD_ID, "sync_state": state}))
    try:
        fake.commands[""] = [{"name": "leaderboard", "id": "1"}]  # synced globally by an older version
        assert await bot.adapter.sync_commands() is True
        assert fake.commands[""] == []  # the stale global commands are gone
        assert {c["name"] for c in fake.commands[f"/guilds/{GUILD_ID}"]} >= {"leaderboard", "rankzero"}
        puts = len(fake.calls("PUT", r"/applications/\d+(/guilds/\d+)?/commands"))
        assert puts == 2
    finally:
        await close_bot(bot)
    # A restart with the same commands publishes nothing.
    bot = await open_bot(fake, db, clock, OPTIONS.but(adapter={"guild_id": GUILD_ID, "sync_state": state}))
    try:
        assert await bot.adapter.sync_commands() is False
        assert len(fake.calls("PUT", r"/applications/\d+(/guilds/\d+)?/commands")) == puts

        @bot.client.tree.command(name="newcommand", description="a change in the tree")
        async def newcommand(interaction: discord.Interaction[Any]) -> None: ...

        assert await bot.adapter.sync_commands() is True
        assert "newcommand" in {c["name"] for c in fake.commands[f"/guilds/{GUILD_ID}"]}
    finally:
        await close_bot(bot)


async def test_health_reports_the_gateway(fake: FakeDiscord, db: str, clock: FrozenClock) -> None:
    from bot.serve import health_report

    bot = await open_bot(fake, db, clock, OPTIONS)
    try:
        health = bot.adapter.health()
        assert health["ok"] is False and health["gateway"] == "not started"
        scheduler = SimpleNamespace(state=lambda: {"state": "running", "jobs": []})
        report = await health_report(bot.engine, scheduler, [bot.adapter])  # type: ignore[arg-type]
        assert report["adapters"]["discord"]["gateway"] == "not started" and report["ok"] is False
    finally:
        await close_bot(bot)
    assert bot.adapter.health()["gateway"] == "closed"


# ---------------------------------------------------------------------- text and public APIs
async def test_schedule_replies_are_a_sentence_not_a_repr(bot: Bot) -> None:
    opts = [
        {"type": 3, "name": "time", "value": "09:00"},
        {"type": 3, "name": "timezone", "value": "Europe/Berlin"},
        {"type": 3, "name": "days", "value": "mon-fri"},
    ]
    token = bot.act.command(bot.client, "rankzero schedule set", opts, permissions=MANAGE_GUILD)
    said = await _answered(bot, token, "Schedule saved")
    assert "Mon–Fri at 09:00 Europe/Berlin, 5 problems" in said
    show = bot.act.command(bot.client, "rankzero schedule show", permissions=MANAGE_GUILD)
    shown = await _answered(bot, show, "Next posts")
    for text_ in (said, shown):
        assert "ScheduleConfig" not in text_ and "hour=" not in text_


def test_the_adapter_uses_no_private_discord_py_names() -> None:
    """A name starting with ``_`` read from a discord.py object (``Member._roles`` was one) is private."""
    root = Path(__file__).resolve().parents[4] / "bot" / "adapters" / "discord"
    ours: set[str] = set()
    trees = {path: ast.parse(path.read_text()) for path in root.glob("*.py")}
    for tree in trees.values():  # private names we define ourselves
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                ours.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                ours.add(node.attr)
    found = []
    for path, tree in trees.items():
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
            ) and node.attr not in ours:
                found.append(f"{path.name}:{node.lineno} .{node.attr}")
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", None) == "getattr"
                and len(node.args) > 1
            ):
                name = node.args[1]
                if isinstance(name, ast.Constant) and str(name.value).startswith("_"):
                    found.append(f"{path.name}:{node.lineno} getattr {name.value!r}")
    assert found == []


async def test_a_rate_limited_daily_post_is_retried_not_lost(bot: Bot) -> None:
    bot.fake.rate_limit_next("POST", rf"/channels/{CHANNEL_ID}/messages", retry_after=0.2)
    card = await bot.quiz.post_daily(CHANNEL)
    assert [r[0] for r in bot.fake.take_rejections()] == [429]
    assert len(bot.fake.calls("POST", rf"/channels/{CHANNEL_ID}/messages")) == 2  # the 429, then the post
    assert (await bot.quiz.get_challenge(card.challenge_id)).message_ref is not None


async def test_a_reminder_without_read_message_history_is_posted_without_the_reply(bot: Bot) -> None:
    from bot.core.cards import ReminderCard

    card = await bot.quiz.post_daily(CHANNEL, closes_at=bot.clock.now().replace(hour=17))
    post = max(bot.fake.messages)
    bot.fake.set_permissions(CHANNEL_ID, ALL_PERMISSIONS & ~READ_MESSAGE_HISTORY)
    assert card.closes_at is not None
    reminder = ReminderCard(card.challenge_id, card.title, card.day, card.closes_at)
    await bot.adapter.platform.post_reminder(CHANNEL, reminder, str(post))
    assert [(r[0], r[3]["code"]) for r in bot.fake.take_rejections()] == [(403, 160002)]
    sent = bot.fake.calls("POST", rf"/channels/{CHANNEL_ID}/messages")[-1].body
    assert "closes" in sent["content"] and "message_reference" not in sent


async def test_a_countdown_that_fails_logs_the_cause(
    bot: Bot, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    post = await bot.post()
    await bot.start(post)

    async def broken(*_: Any, **__: Any) -> Any:
        raise RuntimeError("time_up exploded")

    monkeypatch.setattr(bot.quiz, "time_up", broken)
    assert bot.adapter.play is not None
    with caplog.at_level(logging.ERROR, logger="bot.commands.timer"):
        bot.clock.advance(121)
        await bot.fake.wait_for(lambda: any("failed" in r.getMessage() for r in caplog.records), timeout=5)
    [record] = [r for r in caplog.records if r.name == "bot.commands.timer"]
    assert record.exc_info is not None and "time_up exploded" in str(record.exc_info[1])
    await bot.fake.wait_for(lambda: bot.adapter.play is not None and bot.adapter.play.countdowns.armed == 0)


async def test_a_stale_command_from_an_old_client_is_answered(bot: Bot) -> None:
    token = bot.act.command(bot.client, "renamed-long-ago")  # not in the tree any more
    said = await _answered(bot, token, "reload Discord")
    assert "changed since your Discord app loaded it" in said


async def test_a_refused_scheduled_post_is_posted_when_the_permission_is_fixed(bot: Bot) -> None:
    opts = [{"type": 3, "name": "time", "value": "09:00"}]
    token = bot.act.command(bot.client, "rankzero schedule set", opts, permissions=MANAGE_GUILD)
    await _answered(bot, token, "Schedule saved")
    reposter = bot.adapter.client.rankzero_reposter
    assert reposter is not None  # attached by the adapter's start
    schedules = reposter.schedules
    [schedule] = await schedules.schedules()
    bot.fake.set_permissions(CHANNEL_ID, ALL_PERMISSIONS & ~EMBED_LINKS)  # an admin removed Embed Links
    bot.clock.advance(2 * 86400 + 30)  # Monday's slot, 09:00:30
    with pytest.raises(discord.Forbidden):
        await schedules.post_scheduled(schedule.channel_pk)  # the scheduled post of the day
    [notice] = bot.fake.calls("POST", rf"/channels/{ADMIN_CHANNEL}/messages")
    assert "could not post the challenge" in notice.body["content"]
    assert [r[0] for r in bot.fake.take_rejections()] == [403]
    assert await bot.quiz.find_challenge(CHANNEL) is None  # nobody saw it: removed

    posts = rf"/channels/{CHANNEL_ID}/messages"
    bot.clock.advance(60)
    bot.act.channel_update(bot.client)  # an edit that fixes nothing: no new try, no new report
    await asyncio.sleep(0.2)
    assert len(bot.fake.calls("POST", posts)) == 1
    assert len(bot.fake.calls("POST", rf"/channels/{ADMIN_CHANNEL}/messages")) == 1
    bot.fake.permissions.pop(CHANNEL_ID)  # the admin grants it back: Discord tells the bot
    bot.act.channel_update(bot.client)
    await bot.fake.wait_for(lambda: len(bot.fake.calls("POST", posts)) == 2)
    card = None
    for _ in range(100):  # the message id is saved right after the post
        card = await bot.quiz.find_challenge(CHANNEL)
        if card is not None and (await bot.quiz.get_challenge(card.challenge_id)).message_ref is not None:
            break
        await asyncio.sleep(0.05)
    assert card is not None and (await bot.quiz.get_challenge(card.challenge_id)).message_ref is not None
    assert (
        bot.fake.calls("POST", posts)[-1]
        .body["embeds"][0]["footer"]["text"]
        .startswith(f"Challenge #{card.challenge_id}")
    )
    bot.clock.advance(60)
    bot.act.channel_update(bot.client)  # posted already: another edit posts nothing
    await asyncio.sleep(0.2)
    assert len(bot.fake.calls("POST", posts)) == 2
