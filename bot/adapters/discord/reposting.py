"""Post a refused daily challenge again once an admin fixes the cause, without waiting to be asked.

When Discord refuses a scheduled post (a missing permission), the challenge exists but nobody can see it;
the admins are told (platform.py). The fix is a permission change, which the gateway announces to the bot
(``GUILD_CHANNEL_UPDATE`` for a channel's overwrites, ``GUILD_ROLE_UPDATE`` for a role; both come with
the non-privileged guilds intent). On such an event, the open, never-posted challenges of today in the
scheduled channels concerned are posted again through ``QuizService.post_daily``, which allows one try a
minute per challenge (a database claim), so a burst of events or a second process cannot post twice.
``/rankzero post-now`` in the channel does the same on demand.
"""

from __future__ import annotations

import logging

import discord

from bot.core.schedule_service import ScheduleService
from bot.core.service import QuizService

log = logging.getLogger(__name__)

PLATFORM = "discord"


class Reposter:
    """Retries the refused daily posts of a guild's scheduled channels."""

    def __init__(self, quiz: QuizService, schedules: ScheduleService) -> None:
        self.quiz = quiz
        self.schedules = schedules

    async def retry(self, guild_id: int, channel_ids: set[int] | None = None) -> list[int]:
        """Post again today's open, unposted challenges of the guild's scheduled channels (only
        ``channel_ids`` when given); return the ids of the challenges now posted.
        """
        posted: list[int] = []
        for schedule in await self.schedules.schedules():
            channel = schedule.channel
            if channel.platform != PLATFORM or channel.workspace_id != str(guild_id):
                continue
            if channel_ids is not None and channel.channel_id not in {str(c) for c in channel_ids}:
                continue
            card = await self.quiz.find_challenge(channel)
            if card is None or card.status != "open":
                continue
            if (await self.quiz.get_challenge(card.challenge_id)).message_ref is not None:
                continue
            try:
                await self.quiz.post_daily(channel, card.day)
            except discord.HTTPException as exc:  # still refused: the platform reported it again
                log.info("challenge %s still cannot be posted: %s", card.challenge_id, exc)
                continue
            if (await self.quiz.get_challenge(card.challenge_id)).message_ref is not None:
                log.warning("challenge %s posted after the fix in %s", card.challenge_id, channel.channel_id)
                posted.append(card.challenge_id)
        return posted

    async def on_permissions_changed(self, guild_id: int, channel_ids: set[int] | None = None) -> None:
        """A gateway event that may be the fix: retry, and never let a failure escape into discord.py."""
        try:
            await self.retry(guild_id, channel_ids)
        except Exception:  # a database error: the next event or post-now retries
            log.exception("retrying refused posts in guild %s failed", guild_id)
