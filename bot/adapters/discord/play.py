"""Button clicks: payload -> one service call -> render, and the per-player countdown that edits on time up.

Every click is acknowledged first (a deferred response, well within Discord's 3 s), then the service is
called and the message edited through the interaction's webhook. Game rules stay in QuizService.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import discord

from bot.adapters.discord import render
from bot.adapters.discord.sanitize import no_mentions
from bot.commands.admin import AdminPolicy, PlatformRights
from bot.commands.timer import DeadlineTimers
from bot.core.cards import Feedback, HintCard, ProblemCard
from bot.core.errors import RankZeroError
from bot.core.models import Actor, ChannelRef, PlayerRef
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
    player = PlayerRef(PLATFORM, str(user.id), user.display_name)
    return (admins or admin_policy()).actor(player, rights_of(interaction))


def channel_of(interaction: discord.Interaction[Any], timezone: str = "UTC") -> ChannelRef:
    """The channel an interaction came from (workspace = the guild, 'dm' outside one)."""
    channel = interaction.channel
    name = getattr(channel, "name", None)
    workspace = str(interaction.guild_id) if interaction.guild_id else "dm"
    return ChannelRef(PLATFORM, workspace, str(interaction.channel_id), name, timezone)


class Countdowns:
    """The per-(player, problem) deadline timers (bot.commands.timer): at the stored deadline the time-out
    is recorded and the player's ephemeral message edited. Best effort; the stored deadline is what counts.
    """

    def __init__(self, quiz: QuizService, clock: Clock) -> None:
        self._quiz = quiz
        self._timers = DeadlineTimers(clock)
        self._latest: dict[tuple[str, int], discord.Interaction[Any]] = {}

    def arm(self, interaction: discord.Interaction[Any], actor: Actor, card: ProblemCard) -> None:
        """(Re)start the timer of this problem; later edits go through ``interaction``'s webhook."""
        key = (actor.player.user_id, card.problem_id)
        self._latest[key] = interaction
        self._timers.arm(key, card.deadline, lambda: self._due(key, actor, card))

    def disarm(self, user_id: str, problem_id: int) -> None:
        """Stop a timer (the problem ended some other way)."""
        key = (user_id, problem_id)
        self._latest.pop(key, None)
        self._timers.disarm(key)

    @property
    def armed(self) -> int:
        """How many timers are running."""
        return self._timers.armed

    async def _due(self, key: tuple[str, int], actor: Actor, card: ProblemCard) -> None:
        try:
            feedback = await self._quiz.time_up(actor, card.problem_id)
            view = await self._quiz.view_problem(actor, card.problem_id)
            interaction = self._latest.get(key)
            if interaction is not None:
                await interaction.edit_original_response(
                    content=None,
                    embed=render.problem_embed(view, feedback),
                    view=render.problem_view(view, feedback),
                    allowed_mentions=no_mentions(),
                )
        except RankZeroError as exc:  # e.g. answered meanwhile: nothing to announce
            log.debug("countdown %s ended without edit: %s", key, exc)
        except discord.HTTPException as exc:  # token expired, message gone: the deadline still counts
            log.info("countdown %s could not edit the message: %s", key, exc)
        except Exception:  # a database error: the stored deadline still counts, the next click shows it
            log.exception("countdown %s failed", key)
        finally:
            self._latest.pop(key, None)

    async def close(self) -> None:
        """Cancel every timer."""
        await self._timers.close()
        self._latest.clear()


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
        self.countdowns = Countdowns(quiz, clock)

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
        problem = await self.quiz.next_problem(actor, challenge_id)
        if problem is None:
            summary = await self.quiz.summary(actor, challenge_id)
            await interaction.edit_original_response(
                content=None, embed=render.summary_embed(summary), view=None, allowed_mentions=no_mentions()
            )
            return
        card = await self.quiz.start_problem(actor, problem.id)
        await self._edit(interaction, card)
        if not card.over:
            self.countdowns.arm(interaction, actor, card)

    async def _answer(
        self, interaction: discord.Interaction[Any], actor: Actor, problem_id: int, letter: str
    ) -> None:
        # The interaction id is the idempotency key: a redelivered click is not a second attempt.
        feedback = await self.quiz.answer(
            actor, problem_id, letter, idempotency_key=f"discord:{interaction.id}"
        )
        card = await self.quiz.view_problem(actor, problem_id)
        await self._edit(interaction, card, feedback)
        if feedback.over:
            self.countdowns.disarm(actor.player.user_id, problem_id)
        else:
            self.countdowns.arm(interaction, actor, card)

    async def _hint(self, interaction: discord.Interaction[Any], actor: Actor, problem_id: int) -> None:
        hint = await self.quiz.hint(actor, problem_id)
        card = await self.quiz.view_problem(actor, problem_id)
        await self._edit(interaction, card, None, hint)
        if not card.over:
            self.countdowns.arm(interaction, actor, card)
