"""Button clicks: payload -> the command layer's problem flow -> render; the time-up edit.

Every click is acknowledged first (a deferred response, well within Discord's 3 s), then the flow
(bot.commands.flow) makes the service calls and arms the deadline timer, and the message is edited
through the interaction's webhook. Game rules stay in QuizService.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import discord

from bot.adapters.discord import render
from bot.adapters.discord.sanitize import no_mentions
from bot.commands.admin import AdminPolicy, PlatformRights
from bot.commands.flow import ProblemFlow
from bot.commands.timer import DeadlineTimers
from bot.core.cards import Feedback, HintCard, ProblemCard
from bot.core.errors import RankZeroError
from bot.core.models import Actor, ChannelRef, PlayerRef, Tenant, bounded_display_name
from bot.core.ports import Clock
from bot.core.service import QuizService

log = logging.getLogger(__name__)

PLATFORM = "discord"


#: What a member who is not an admin is told.
REFUSAL = "only admins can do that (Manage Server permission or a RankZero admin role): ask a server admin"


def admin_policy(admin_roles: Sequence[int] = ()) -> AdminPolicy:
    """Discord's admins: Manage Server (or Administrator), or a member of one of ``admin_roles``."""
    return AdminPolicy(refusal=REFUSAL, admin_roles=admin_roles)


def rights_of(interaction: discord.Interaction[Any]) -> PlatformRights:
    """What Discord reports about the user behind ``interaction`` (the layer decides from it)."""
    perms = interaction.permissions
    # A Member's roles resolve through the guild cache the (non-privileged) guilds intent keeps; a user
    # outside a guild (a DM) has none.
    role_ids = frozenset(str(role.id) for role in getattr(interaction.user, "roles", ()))
    return PlatformRights(
        manages_workspace=bool(perms.manage_guild or perms.administrator), role_ids=role_ids
    )


def actor_of(interaction: discord.Interaction[Any], admins: AdminPolicy | None = None) -> Actor:
    """The player behind an interaction, admin or not according to ``admins`` (Manage Server only when
    no policy is given).
    """
    user = interaction.user
    player = PlayerRef(PLATFORM, str(user.id), bounded_display_name(user.display_name, str(user.id)))
    return (admins or admin_policy()).actor(player, rights_of(interaction), tenant_of(interaction))


def tenant_of(interaction: discord.Interaction[Any]) -> Tenant | None:
    """The server an interaction came from; None in a DM (where nobody administers any tenant)."""
    return Tenant(PLATFORM, str(interaction.guild_id)) if interaction.guild_id else None


def channel_of(interaction: discord.Interaction[Any], timezone: str = "UTC") -> ChannelRef:
    """The channel an interaction came from (workspace = the guild, 'dm' outside one)."""
    channel = interaction.channel
    name = getattr(channel, "name", None)
    workspace = str(interaction.guild_id) if interaction.guild_id else "dm"
    return ChannelRef(PLATFORM, workspace, str(interaction.channel_id), name, timezone)


class PlayHandler:
    """Handles RankZero button clicks (start, answer, hint, next) for the private problem flow."""

    def __init__(
        self,
        quiz: QuizService,
        clock: Clock,
        *,
        admins: AdminPolicy | None = None,
        timezone: str = "UTC",
    ) -> None:
        self.quiz = quiz
        self.admins = admins or admin_policy()
        self.timezone = timezone
        #: The shared problem flow (bot.commands.flow); its surface is the latest click's interaction,
        #: whose webhook edits the player's ephemeral message.
        self.flow: ProblemFlow[discord.Interaction[Any]] = ProblemFlow(quiz, clock, self._time_up)

    @property
    def countdowns(self) -> DeadlineTimers:
        """The time-up timers of the problems shown (best effort; the stored deadline is what counts)."""
        return self.flow.timers

    @staticmethod
    async def _time_up(interaction: discord.Interaction[Any], card: ProblemCard, feedback: Feedback) -> None:
        """A problem's time ran out while shown: edit the player's message to say so."""
        try:
            await interaction.edit_original_response(
                content=None,
                embed=render.problem_embed(card, feedback),
                view=render.problem_view(card, feedback),
                allowed_mentions=no_mentions(),
            )
        except discord.HTTPException as exc:  # token expired, message gone: the deadline still counts
            log.info("time-up of problem %s could not edit the message: %s", card.problem_id, exc)

    async def on_button(
        self, interaction: discord.Interaction[Any], action: str, args: tuple[str, ...]
    ) -> None:
        """Acknowledge, call the service, edit the message (or say what went wrong)."""
        if action == "start":
            # The Start button is on the public post: answer with a new ephemeral message.
            await interaction.response.defer(ephemeral=True, thinking=True)
        else:
            # Buttons on the ephemeral message: update that message in place.
            await interaction.response.defer()
        actor = actor_of(interaction, self.admins)
        try:
            if action == "start" or action == "next":
                await self._show_next(interaction, actor, int(args[0]))
            elif action == "answer":
                await self._answer(interaction, actor, int(args[0]), args[1])
            elif action == "hint":
                await self._hint(interaction, actor, int(args[0]))
        except RankZeroError as exc:
            if action == "start":  # replace the "thinking…" placeholder rather than leave it spinning
                await interaction.edit_original_response(
                    content=render.error_text(str(exc)), embed=None, view=None, allowed_mentions=no_mentions()
                )
            else:
                await interaction.followup.send(
                    render.error_text(str(exc)), ephemeral=True, allowed_mentions=no_mentions()
                )
        except (ValueError, IndexError):
            await interaction.followup.send(render.error_text("this button is malformed"), ephemeral=True)

    async def _edit(
        self,
        interaction: discord.Interaction[Any],
        card: ProblemCard,
        feedback: Feedback | None = None,
        hint: HintCard | None = None,
    ) -> None:
        await interaction.edit_original_response(
            content=None,
            embed=render.problem_embed(card, feedback, hint),
            view=render.problem_view(card, feedback),
            allowed_mentions=no_mentions(),
        )

    async def _show_next(
        self, interaction: discord.Interaction[Any], actor: Actor, challenge_id: int
    ) -> None:
        shown = await self.flow.next(actor, challenge_id, interaction)
        if shown.card is not None:
            await self._edit(interaction, shown.card)
        elif shown.summary is not None:
            await interaction.edit_original_response(
                content=None,
                embed=render.summary_embed(shown.summary),
                view=None,
                allowed_mentions=no_mentions(),
            )

    async def _answer(
        self, interaction: discord.Interaction[Any], actor: Actor, problem_id: int, letter: str
    ) -> None:
        # The interaction id is the idempotency key: a redelivered click is not a second attempt.
        shown = await self.flow.answer(actor, problem_id, letter, f"discord:{interaction.id}", interaction)
        assert shown.card is not None
        await self._edit(interaction, shown.card, shown.feedback)

    async def _hint(self, interaction: discord.Interaction[Any], actor: Actor, problem_id: int) -> None:
        shown = await self.flow.hint(actor, problem_id, interaction)
        assert shown.card is not None
        await self._edit(interaction, shown.card, None, shown.hint)
