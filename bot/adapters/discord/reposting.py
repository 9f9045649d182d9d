"""Post a refused daily challenge again once an admin fixes the cause, without waiting to be asked.

When Discord refuses a scheduled post (a missing permission), the challenge exists but nobody can see it;
the admins are told (platform.py). The fix is a permission change, which the gateway announces to the bot
(``GUILD_CHANNEL_UPDATE`` for a channel's overwrites, ``GUILD_ROLE_UPDATE`` for a role; both come with
the non-privileged guilds intent). On such an event, the day's post of each scheduled channel concerned is
made again through the scheduled path (the refused challenge was removed, so nobody saw half a day); the
challenge row of the day is the claim, so a burst of events or a second process cannot post twice.
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
        """Post again the refused daily posts of the guild's scheduled channels (only ``channel_ids``
        when given); return the ids of the challenges now posted.

        A refused post leaves no challenge behind (the service removes what nobody saw), so the day's post
        is simply made again through the scheduled path, which keeps the schedule's window and grace
        period; a challenge already played but never posted is posted as it is.
        """
        posted: list[int] = []
        for schedule in await self.schedules.schedules():
            channel = schedule.channel
            if channel.platform != PLATFORM or channel.workspace_id != str(guild_id):
                continue
            if channel_ids is not None and channel.channel_id not in {str(c) for c in channel_ids}:
                continue
            card = await self.quiz.find_challenge(channel)
            if card is not None and (
                card.status != "open" or (await self.quiz.get_challenge(card.challenge_id)).message_ref
            ):
                continue  # posted, or over: nothing was refused
            try:
                if card is None:
                    outcome = await self.schedules.post_scheduled(schedule.channel_pk)
                    challenge_id = outcome.challenge_id
                else:
                    await self.quiz.post_daily(channel, card.day)
                    challenge_id = card.challenge_id
            except discord.HTTPException as exc:  # still refused: the platform reported it again
                log.info("the post in %s still cannot be made: %s", channel.channel_id, exc)
                continue
            if challenge_id is not None and (await self.quiz.get_challenge(challenge_id)).message_ref:
                log.warning("challenge %s posted after the fix in %s", challenge_id, channel.channel_id)
                posted.append(challenge_id)
        return posted

    async def on_permissions_changed(self, guild_id: int, channel_ids: set[int] | None = None) -> None:
        """A gateway event that may be the fix: retry, and never let a failure escape into discord.py."""
        try:
            await self.retry(guild_id, channel_ids)
        except Exception:  # a database error: the next event or post-now retries
            log.exception("retrying refused posts in guild %s failed", guild_id)
