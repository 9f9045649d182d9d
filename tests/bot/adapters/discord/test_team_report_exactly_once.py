"""The weekly posts (leaderboard, team report) Discord accepted before their sender died are not posted again
(the survivor finds the message by its nonce), as
tests/bot/adapters/discord/test_outbox_exactly_once_discord.py
does for the other posts.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from tests.bot.adapters.discord.test_outbox_exactly_once_discord import (  # noqa: F401 (fixtures)
    TIMING,
    _strict_discord,
    bot_options,
    in_channel,
    takes_over,
)
from tests.discord_env import CHANNEL, Bot
from tests.fakes import die_mid_post


@pytest.mark.parametrize("kind", ["summary", "team_report"])
async def test_weekly_post_accepted_before_a_death_is_not_posted_again(bot: Bot, kind: Any) -> None:
    """The survivor's try after the lease finds the accepted message and sends nothing."""
    day = dt.date(2026, 11, 23)
    async with bot.quiz._uow() as uow:
        pk = await uow.players.ensure_channel(CHANNEL)
        item_id = await bot.quiz.outbox.queue_summary(
            uow, CHANNEL, pk, "Team report · week of 2026-11-23", day, f"{pk}:probe", kind=kind
        )
    assert item_id is not None
    await die_mid_post(bot.quiz.outbox, item_id)
    [_accepted] = in_channel(bot.fake)
    assert await takes_over(bot, item_id, TIMING.lease_s + 1) == "sent"
    assert len(in_channel(bot.fake)) == 1, "the team report was posted twice"
