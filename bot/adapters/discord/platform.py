"""DiscordPlatform: the ChatPlatform port over a discord.py client (outbound posts to channels)."""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

import discord

from bot.adapters.discord import dispute_render, practice_render, render, team_report
from bot.adapters.discord.sanitize import no_mentions, safe_text, split_text
from bot.adapters.notices import NoticeThrottle
from bot.core.cards import (
    ChallengeCard,
    DeliveryNotice,
    LeaderboardCard,
    PracticeNudgeCard,
    ReminderCard,
    ResultsCard,
    TeamReportCard,
)
from bot.core.disputes import AdminNotice
from bot.core.models import ChannelRef, PlayerRef
from bot.core.parts import current_part_mark, send_parts

log = logging.getLogger(__name__)
#: Discord's longest message nonce (docs: Create Message).
NONCE_MAX = 25


def post_nonce() -> str | None:
    """The nonce of the outbox message being sent (None outside the outbox): its mark
    (:func:`bot.core.parts.current_part_mark`), hashed when over Discord's 25 characters. discord.py sends it
    with ``enforce_nonce``, so Discord answers a second create with the same nonce from this bot, within a
    few minutes, with the message it made the first time instead of a new one: a sender that died after
    Discord accepted a post, and the sender that takes its lease over, post it once.
    """
    mark = current_part_mark()
    if mark is None or len(mark) <= NONCE_MAX:
        return mark
    return hashlib.sha256(mark.encode()).hexdigest()[:NONCE_MAX]


def nonced() -> dict[str, Any]:
    """``send``'s keyword for :func:`post_nonce` (none outside the outbox)."""
    nonce = post_nonce()
    return {} if nonce is None else {"nonce": nonce}


def embed_text(embed: discord.Embed) -> str:
    """An embed's content as text (what a post in parts' digest compares between tries)."""
    return json.dumps(embed.to_dict(), sort_keys=True, default=str)


#: Discord's error code for a reply without Read Message History in the channel.
CANNOT_REPLY_WITHOUT_HISTORY = 160002


def refused_post_text(channel: ChannelRef, card: ChallengeCard, exc: discord.HTTPException) -> str:
    """The admins' notice of a daily post Discord refused: what, where, why, and how to fix it."""
    why = f"{exc.status} {safe_text(exc.text or 'error')} (code {exc.code})"
    if exc.status in (403, 404):
        fix = (
            "Grant RankZero View Channel, Send Messages and Embed Links in that channel (or check that it "
            "still exists), then run `/rankzero post-now` there (RankZero also retries for a while)."
        )
    else:
        fix = "Run `/rankzero post-now` in that channel to try again (RankZero also retries for a while)."
    return (
        f"⚠️ RankZero could not post the challenge of {card.day.isoformat()} in "
        f"<#{channel.channel_id}>: Discord answered {why}. Nobody can play it until it is posted. {fix}"
    )


class DiscordPlatform:
    """Posts the daily challenge, results, reminders, weekly summaries and admin notices."""

    def __init__(self, client: discord.Client, *, admin_channel_id: int | None = None) -> None:
        self.client = client
        self.admin_channel_id = admin_channel_id
        #: Repeats of the same refusal (a retried post) are logged, not told again.
        self.notices = NoticeThrottle()

    def _channel(self, channel: ChannelRef) -> discord.PartialMessageable:
        guild_id = int(channel.workspace_id) if channel.workspace_id.isdigit() else None
        return self.client.get_partial_messageable(int(channel.channel_id), guild_id=guild_id)

    async def post_challenge(self, channel: ChannelRef, card: ChallengeCard) -> str | None:
        """Post the embed with its Start button; the message id is the reference.

        When Discord refuses the post (a missing permission, a deleted channel), the admins hear of it
        (the admin channel, else an error in the log) and the refusal propagates: the challenge stays
        unposted, and ``/rankzero post-now`` in that channel posts it once the cause is fixed.
        """
        try:
            message = await self._channel(channel).send(
                embed=render.challenge_embed(card),
                view=render.challenge_view(card),
                allowed_mentions=no_mentions(),
                **nonced(),
            )
        except discord.HTTPException as exc:
            await self._report_refused_post(channel, card, exc)
            raise
        return str(message.id)

    async def _report_refused_post(
        self, channel: ChannelRef, card: ChallengeCard, exc: discord.HTTPException
    ) -> None:
        text = refused_post_text(channel, card, exc)
        log.error("%s", text)
        # A refused post is retried until it works; the admins hear of each cause once per period.
        if not self.notices.first(f"{channel.channel_id}:{card.day}:{exc.status}:{exc.code}"):
            return
        await self._tell_admins(channel, text)

    async def _tell_admins(self, channel: ChannelRef, text: str) -> None:
        """A message in the admin channel; the log is the report when there is none (or it is the very
        channel that fails), or when it refuses too.
        """
        if self.admin_channel_id is None or str(self.admin_channel_id) == channel.channel_id:
            return  # the log is the report (set RANKZERO_DISCORD_ADMIN_CHANNEL_ID to be told in Discord)
        try:
            target = self.client.get_partial_messageable(self.admin_channel_id)
            for chunk in split_text(text):
                await target.send(chunk, allowed_mentions=no_mentions())
        except discord.HTTPException as failed:
            log.error("the admin channel %s refused the report too: %s", self.admin_channel_id, failed)

    async def post_delivery_notice(self, channel: ChannelRef, notice: DeliveryNotice) -> None:
        """Tell the admin channel that a post of ``channel`` keeps failing, or was given up on (the outbox
        tells each cause once; bot/core/outbox.py).
        """
        text = f"⚠️ {safe_text(notice.text())} (channel <#{channel.channel_id}>)"
        log.error("%s", text)
        await self._tell_admins(channel, text)

    async def post_results(self, channel: ChannelRef, card: ResultsCard, message_ref: str | None) -> None:
        """Post the results and disable the original post's Start button (best effort).

        Results over one embed's limits are several messages: sent through ``send_parts``, so an outbox
        retry after a failure at message 2 sends messages 2 and on, not message 1 again.
        """
        target = self._channel(channel)

        async def send(embed: discord.Embed) -> None:
            await target.send(embed=embed, allowed_mentions=no_mentions(), **nonced())

        await send_parts(render.results_embeds(card), send, key=embed_text)
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
            try:
                await target.send(text, reference=reference, allowed_mentions=no_mentions(), **nonced())
                return
            except discord.Forbidden as exc:
                if exc.code != CANNOT_REPLY_WITHOUT_HISTORY:
                    raise
                # A reply needs Read Message History; the reminder still matters without the link.
                log.warning("reminder in %s posted without reply: %s", channel.channel_id, exc)
        await target.send(text, allowed_mentions=no_mentions(), **nonced())

    async def post_team_report(self, channel: ChannelRef, card: TeamReportCard) -> None:
        """Post the weekly team report: the heatmap attached with its alt text, the movers, the most-missed
        problems with their "Explanation" buttons (team_report.py). A refusal propagates (HTTPException),
        as for the other posts, for the outbox to retry and tell the admins.
        """
        await team_report.post_report(self._channel(channel), card, nonced())

    async def post_weekly_summary(self, channel: ChannelRef, card: LeaderboardCard) -> None:
        """Post the week's leaderboard."""
        await self._channel(channel).send(
            embed=render.leaderboard_embed(card), allowed_mentions=no_mentions(), **nonced()
        )

    async def post_admin_notice(self, notice: AdminNotice, channel: ChannelRef | None = None) -> None:
        """Send an admin notice to the configured admin channel (logged when none is configured)."""
        text = dispute_render.admin_notice_text(notice)  # escaped: the explanation quotes runner output
        if self.admin_channel_id is None:
            log.warning("admin notice (no RANKZERO_DISCORD_ADMIN_CHANNEL_ID set): %s", text)
            return
        target = self.client.get_partial_messageable(self.admin_channel_id)

        async def send(chunk: str) -> None:
            await target.send(chunk, allowed_mentions=no_mentions(), **nonced())

        # A long notice is several messages: each sent once across the outbox's retries.
        await send_parts(split_text(text), send, key=str)

    async def send_practice_nudge(self, player: PlayerRef, card: PracticeNudgeCard) -> None:
        """DM the player (Discord answers 403 code 50007 when their DMs are closed: that propagates)."""
        channel = await self.client.create_dm(discord.Object(id=int(player.user_id)))
        await channel.send(practice_render.nudge_text(card), allowed_mentions=no_mentions())
