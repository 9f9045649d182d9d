"""Issue 30 on Discord: /stats attaches the player's chart, the weekly team report carries the heatmap and
"Explanation" buttons; every request goes through discord.py's real client to the strict fake (files
within Discord's limits, alt text as the attachment's description).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import discord
import pytest

from bot.adapters import charts
from bot.adapters.discord import attachments
from bot.core.cards import HeatCell, MissedQuestion, Mover, TeamReportCard
from tests.discord_env import CHANNEL, Bot, BotOptions
from tests.discord_fake import (
    ALL_PERMISSIONS,
    ATTACH_FILES,
    CHANNEL_ID,
    GUILD_ID,
    MAX_ATTACHMENT_DESCRIPTION,
    MAX_UPLOAD_BYTES,
    FakeDiscord,
    no_unexpected_rejections,
)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(autouse=True)
def _strict_discord(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    no_unexpected_rejections(request)


@pytest.fixture
def bot_options() -> BotOptions:
    """The test bank, no admin roles."""
    return BotOptions()


async def _closed_problems(bot: Bot) -> list[int]:
    """Post today's challenge, close it, and return its problem ids."""
    post = await bot.post()
    challenge_id = int(bot.buttons(post)["Start"].split(":")[2])
    await bot.quiz.close_challenge(challenge_id)
    challenge = await bot.quiz.get_challenge(challenge_id)
    return [p.id for p in challenge.problems]


def _report(problem_ids: list[int]) -> TeamReportCard:
    return TeamReportCard(
        title="Weekly team report @everyone <#1>",
        week_start=dt.date(2026, 11, 16),
        cells=(
            HeatCell("DDP", "advanced", 10, 3),
            HeatCell("FSDP", "beginner", 4, 4),
        ),
        missed=tuple(
            MissedQuestion(pid, f"q{pid}", "DDP", 10, 2, f"because q{pid}") for pid in problem_ids[:3]
        ),
        movers=(Mover("**bob** @here", 40, 1, 4), Mover("carol", 30, 2, None)),
    )


def _uploads_of(fake: FakeDiscord, message_id: int) -> list[Any]:
    return [u for u in fake.uploads if u.message_id == message_id]


# ---------------------------------------------------------------------- /stats
async def test_stats_attaches_the_players_chart_with_alt_text(bot: Bot) -> None:
    token = bot.act.command(bot.client, "stats")
    reply = await bot.reply(token)

    assert reply["embeds"][0]["title"].startswith("Stats")
    [upload] = bot.fake.uploads
    assert upload.data.startswith(PNG_SIGNATURE) and 0 < len(upload.data) <= MAX_UPLOAD_BYTES
    assert upload.filename == "rankzero-stats.png" and upload.ephemeral
    assert upload.description and len(upload.description) <= MAX_ATTACHMENT_DESCRIPTION
    assert "points" in upload.description.lower()


async def test_stats_keeps_the_text_when_the_chart_cannot_be_drawn(
    bot: Bot, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(card: Any) -> charts.Chart:
        raise RuntimeError("renderer bug")

    monkeypatch.setattr(charts, "player_chart", broken)
    token = bot.act.command(bot.client, "stats")
    reply = await bot.reply(token)

    assert reply["embeds"][0]["title"].startswith("Stats")
    assert "could not be attached" in reply["content"]
    assert not bot.fake.uploads


async def test_stats_keeps_the_text_when_discord_refuses_the_picture(
    bot: Bot, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A picture over Discord's upload limit (checked by the fake, not by our own bound: it is lifted
    here) is refused with 413; the figures still arrive, saying the chart is missing.
    """
    monkeypatch.setattr(attachments, "MAX_UPLOAD_BYTES", 4 * MAX_UPLOAD_BYTES)
    monkeypatch.setattr(
        charts,
        "player_chart",
        lambda card: charts.Chart(PNG_SIGNATURE + b"\0" * MAX_UPLOAD_BYTES, "alt", "big.png"),
    )
    token = bot.act.command(bot.client, "stats")
    await bot.fake.wait_for(lambda: len(bot.followups(token)) == 2)  # refused, then the text alone

    assert [r[0] for r in bot.fake.take_rejections()] == [413]
    reply = bot.followups(token)[-1]
    assert reply["embeds"][0]["title"].startswith("Stats")
    assert "could not be attached" in reply["content"]


async def test_stats_says_what_to_grant_when_the_file_needs_attach_files(bot: Bot) -> None:
    """The chart's follow-up refused with 403 50013 (Missing Permissions: the app's permissions in the
    channel lack Attach Files; the fake's permission table models channel messages, so the refusal is
    forced here): the figures arrive, and the note says which permission the chart needs.
    """
    bot.fake.fail_next("POST", r"/webhooks/\d+/[^/]+", 403, {"message": "Missing Permissions", "code": 50013})
    token = bot.act.command(bot.client, "stats")
    await bot.fake.wait_for(lambda: len(bot.followups(token)) == 2)  # refused, then the text alone

    assert [r[0] for r in bot.fake.take_rejections()] == [403]
    reply = bot.followups(token)[-1]
    assert reply["embeds"][0]["title"].startswith("Stats")
    assert "Attach Files" in reply["content"] and not bot.fake.uploads


# ---------------------------------------------------------------------- the team report
async def test_team_report_posts_heatmap_movers_and_explanation_buttons(bot: Bot) -> None:
    problems = await _closed_problems(bot)
    await bot.adapter.platform.post_team_report(CHANNEL, _report(problems))

    message_id = max(bot.fake.messages)
    message = bot.fake.messages[message_id]
    [upload] = _uploads_of(bot.fake, message_id)
    assert upload.data.startswith(PNG_SIGNATURE) and len(upload.data) <= MAX_UPLOAD_BYTES
    assert upload.description and "DDP" in upload.description
    embed = message["embeds"][0]
    assert embed["image"]["url"] == f"attachment://{upload.filename}"
    movers = next(f["value"] for f in embed["fields"] if f["name"] == "Movers")
    assert "@\u200bhere" in movers and "\\*\\*bob" in movers  # escaped: no ping, no bold
    buttons = bot.buttons(message_id)
    assert sorted(buttons.values()) == sorted(f"rz:miss:{pid}" for pid in problems[:3])
    # Mentions never ping: the title's @everyone is inert.
    assert bot.fake.calls("POST", r"/channels/\d+/messages")[-1].body["allowed_mentions"]["parse"] == []


async def test_team_report_without_attach_files_goes_without_the_heatmap(bot: Bot) -> None:
    """Discord refuses the message with the file (403 50013): the report is sent again without it, saying
    what the channel lacks, with its movers and buttons (not retried and given up by the outbox).
    """
    problems = await _closed_problems(bot)
    bot.fake.set_permissions(CHANNEL_ID, ALL_PERMISSIONS & ~ATTACH_FILES)
    before = set(bot.fake.messages)

    await bot.adapter.platform.post_team_report(CHANNEL, _report(problems))

    [(status, method, _path, body)] = bot.fake.take_rejections()
    assert (status, method, body["code"]) == (403, "POST", 50013)
    [message_id] = set(bot.fake.messages) - before
    assert not _uploads_of(bot.fake, message_id)
    embed = bot.fake.messages[message_id]["embeds"][0]
    assert "Attach Files" in embed["description"] and "image" not in embed
    assert sorted(bot.buttons(message_id).values()) == sorted(f"rz:miss:{pid}" for pid in problems[:3])


async def test_explanation_button_answers_privately(bot: Bot) -> None:
    problems = await _closed_problems(bot)
    await bot.adapter.platform.post_team_report(CHANNEL, _report(problems))
    message_id = max(bot.fake.messages)

    token = await bot.click(message_id, "Explanation #1", user_id=333, name="dave")

    reply = await bot.reply(token)
    assert reply["flags"] & 64  # ephemeral
    embed = reply["embeds"][0]
    assert embed["fields"][0]["value"] == f"because {embed['title'].split('· ')[1]}"


async def test_explanation_of_another_servers_problem_is_refused(bot: Bot) -> None:
    """Ids are sequential: a click forged from another server (or a report of this server copied there)
    is told exactly what a missing problem gets, and the explanation is not shown.
    """
    problems = await _closed_problems(bot)
    await bot.adapter.platform.post_team_report(CHANNEL, _report([problems[0], 999999]))
    message_id = max(bot.fake.messages)
    custom_id = bot.buttons(message_id)["Explanation #1"]

    theirs = bot.act.click(bot.client, message_id, custom_id, guild_id=GUILD_ID + 1)
    missing = bot.act.click(bot.client, message_id, "rz:miss:999999", guild_id=GUILD_ID + 1)
    text = (await bot.reply(theirs))["content"]

    pid = custom_id.rsplit(":", 1)[1]
    assert "because" not in text and "no problem" in text
    assert text.replace(pid, "N") == (await bot.reply(missing))["content"].replace("999999", "N")


async def test_explanation_of_an_open_challenge_is_not_given(bot: Bot) -> None:
    post = await bot.post()  # still open: its explanations would give the answers away
    challenge = await bot.quiz.get_challenge(int(bot.buttons(post)["Start"].split(":")[2]))
    await bot.adapter.platform.post_team_report(CHANNEL, _report([challenge.problems[0].id]))

    token = await bot.click(max(bot.fake.messages), "Explanation #1")

    text = (await bot.reply(token))["content"]
    assert "still open" in text and "because" not in text


async def test_team_report_goes_without_the_heatmap_when_it_cannot_be_drawn(
    bot: Bot, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(card: Any) -> charts.Chart:
        raise RuntimeError("renderer bug")

    monkeypatch.setattr(charts, "team_heatmap", broken)
    await bot.adapter.platform.post_team_report(CHANNEL, _report(await _closed_problems(bot)))

    message = bot.fake.messages[max(bot.fake.messages)]
    assert not bot.fake.uploads and "image" not in message["embeds"][0]
    assert "could not be attached" in message["embeds"][0]["description"]


async def test_team_report_refused_raises_for_the_outbox(bot: Bot) -> None:
    problems = await _closed_problems(bot)
    bot.fake.fail_next("POST", r"/channels/\d+/messages", 403, {"message": "Missing Access", "code": 50001})

    with pytest.raises(discord.Forbidden):
        await bot.adapter.platform.post_team_report(CHANNEL, _report(problems))
    assert [r[0] for r in bot.fake.take_rejections()] == [403]


# ---------------------------------------------------------------------- the fake's rules
async def _send_files(fake: FakeDiscord, files: list[discord.File]) -> discord.HTTPException:
    client = discord.Client(intents=discord.Intents(guilds=True))
    await client.login("test-token")
    try:
        channel = client.get_partial_messageable(int(CHANNEL.channel_id), guild_id=GUILD_ID)
        with pytest.raises(discord.HTTPException) as refused:
            await channel.send("files", files=files)
        return refused.value
    finally:
        await client.close()


def _file(data: bytes = PNG_SIGNATURE, name: str = "a.png", description: str | None = "alt") -> discord.File:
    import io

    return discord.File(io.BytesIO(data), filename=name, description=description)


async def test_fake_refuses_a_file_over_the_upload_limit(fake: FakeDiscord) -> None:
    exc = await _send_files(fake, [_file(b"\0" * (MAX_UPLOAD_BYTES + 1))])
    assert (exc.status, exc.code) == (413, 40005)
    fake.take_rejections()


async def test_fake_refuses_eleven_files(fake: FakeDiscord) -> None:
    exc = await _send_files(fake, [_file(name=f"f{i}.png") for i in range(11)])
    assert (exc.status, exc.code) == (400, 50035) and "attachments" in str(exc.text)
    fake.take_rejections()


async def test_fake_refuses_a_description_over_1024(fake: FakeDiscord) -> None:
    exc = await _send_files(fake, [_file(description="d" * (MAX_ATTACHMENT_DESCRIPTION + 1))])
    assert (exc.status, exc.code) == (400, 50035)
    assert "description" in str(fake.take_rejections()[0][3]["errors"]["attachments"]["0"])


async def test_fake_refuses_a_file_without_a_name(fake: FakeDiscord) -> None:
    exc = await _send_files(fake, [_file(name="")])
    assert (exc.status, exc.code) == (400, 50035)
    assert "filename" in str(fake.take_rejections()[0][3]["errors"]["attachments"]["0"])
    assert not fake.uploads
