"""A server that removes the bot gets its schedules paused (no post attempt every day), and adding the bot
again resumes them, not the ones an admin paused (issue 25 §5): the gateway's GUILD_DELETE and
GUILD_CREATE parsed by discord.py's own state, the real schedule service on SQLite.
"""

from __future__ import annotations

import asyncio

import pytest

from bot.core.models import ChannelRef
from tests.bot.adapters.discord.test_discord_adapter import OPTIONS
from tests.conftest import ADMIN
from tests.discord_env import ADMIN_ROLE, CHANNEL, Bot, BotOptions
from tests.discord_fake import CHANNEL_ID, GUILD_ID

OTHER = ChannelRef("discord", str(GUILD_ID), "222000000000000002", "quiet")


@pytest.fixture
def bot_options() -> BotOptions:
    """tests/bot/adapters/discord/test_discord_adapter.py's bot: admins by role, the test bank."""
    return OPTIONS


async def _paused(bot: Bot) -> dict[str, bool]:
    schedules = bot.adapter.client.rankzero_schedules
    assert schedules is not None
    return {s.channel.channel_id: s.config.paused for s in await schedules.schedules()}


async def _until(bot: Bot, want: dict[str, bool]) -> None:
    for _ in range(500):
        if await _paused(bot) == want:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"schedules are {await _paused(bot)}, expected {want}")


async def test_removal_pauses_the_servers_schedules_and_a_re_add_resumes_them(bot: Bot) -> None:
    schedules = bot.adapter.client.rankzero_schedules
    assert schedules is not None
    await schedules.set_schedule(ADMIN, CHANNEL, post_time="09:00", timezone="UTC")
    await schedules.set_schedule(ADMIN, OTHER, post_time="10:00", timezone="UTC")
    await schedules.pause_schedule(ADMIN, OTHER)  # an admin's pause: the re-add must keep it
    assert await _paused(bot) == {str(CHANNEL_ID): False, OTHER.channel_id: True}

    # Kicked: Discord sends GUILD_DELETE without ``unavailable`` (an outage sends it with true).
    bot.adapter.client._connection.parse_guild_delete({"id": str(GUILD_ID)})
    await _until(bot, {str(CHANNEL_ID): True, OTHER.channel_id: True})

    # Added again: GUILD_CREATE without ``unavailable`` (after an outage it says false: not a join).
    payload = bot.fake.guild_payload(GUILD_ID, [CHANNEL_ID], [ADMIN_ROLE])
    payload.pop("unavailable", None)
    bot.adapter.client._connection.parse_guild_create(payload)
    await _until(bot, {str(CHANNEL_ID): False, OTHER.channel_id: True})


async def test_an_outage_is_not_a_removal(bot: Bot) -> None:
    schedules = bot.adapter.client.rankzero_schedules
    assert schedules is not None
    await schedules.set_schedule(ADMIN, CHANNEL, post_time="09:00", timezone="UTC")
    state = bot.adapter.client._connection
    state.parse_guild_delete({"id": str(GUILD_ID), "unavailable": True})
    await asyncio.sleep(0.2)
    assert await _paused(bot) == {str(CHANNEL_ID): False}
