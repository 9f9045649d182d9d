"""DiscordPlatform: the ChatPlatform port over a discord.py client (outbound posts to channels)."""

from __future__ import annotations

import logging

import discord

from bot.adapters.discord import dispute_render, render
from bot.adapters.discord.sanitize import no_mentions, split_text
from bot.core.cards import ChallengeCard, LeaderboardCard, ReminderCard, ResultsCard
from bot.core.disputes import AdminNotice
from bot.core.models import ChannelRef

log = logging.getLogger(__name__)


class DiscordPlatform:
    """Posts the daily challenge, results, reminders, weekly summaries and admin notices."""

    def __init__(self, client: discord.Client, *, admin_channel_id: int | None = None) -> None:
        self.client = client
        self.admin_channel_id = admin_channel_id

    def _channel(self, channel: ChannelRef) -> discord.PartialMessageable:
        guild_id = int(channel.workspace_id) if channel.workspace_id.isdigit() else None
        return self.client.get_partial_messageable(int(channel.channel_id), guild_id=guild_id)

    async def post_challenge(self, channel: ChannelRef, card: ChallengeCard) -> str | None:
        """Post the embed with its Start button; the message id is the reference."""
        message = await self._channel(channel).send(
            embed=render.challenge_embed(card),
            view=render.challenge_view(card),
            allowed_mentions=no_mentions(),
        )
        return str(message.id)

    async def post_results(self, channel: ChannelRef, card: ResultsCard, message_ref: str | None) -> None:
        """Post the results and disable the original post's Start button (best effort)."""
        target = self._channel(channel)
        await target.send(embed=render.results_embed(card), allowed_mentions=no_mentions())
        if message_ref and message_ref.isdigit():
            try:
                await target.get_partial_message(int(message_ref)).edit(view=None)
            except discord.HTTPException as exc:  # deleted post, missing permission: results are out anyway
                log.info("could not close the post %s: %s", message_ref, exc)

    async def post_reminder(self, channel: ChannelRef, card: ReminderCard, message_ref: str | None) -> None:
        """Remind the channel, replying to the daily post when known."""
        target = self._channel(channel)
        text = render.reminder_text(card)
        if message_ref and message_ref.isdigit():
            reference = discord.MessageReference(
                message_id=int(message_ref), channel_id=int(channel.channel_id), fail_if_not_exists=False
            )
            await target.send(text, reference=reference, allowed_mentions=no_mentions())
        else:
            await target.send(text, allowed_mentions=no_mentions())

    async def post_weekly_summary(self, channel: ChannelRef, card: LeaderboardCard) -> None:
        """Post the week's leaderboard."""
        await self._channel(channel).send(
            embed=render.leaderboard_embed(card), allowed_mentions=no_mentions()
        )

    async def post_admin_notice(self, notice: AdminNotice) -> None:
        """Send an admin notice to the configured admin channel (logged when none is configured)."""
        text = dispute_render.admin_notice_text(notice)  # escaped: the explanation quotes runner output
        if self.admin_channel_id is None:
            log.warning("admin notice (no RANKZERO_DISCORD_ADMIN_CHANNEL_ID set): %s", text)
            return
        target = self.client.get_partial_messageable(self.admin_channel_id)
        for chunk in split_text(text):
            await target.send(chunk, allowed_mentions=no_mentions())
