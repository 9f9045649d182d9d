"""Button clicks: payload -> one service call -> render, and the per-player countdown that edits on time up.

Every click is acknowledged first (a deferred response, well within Discord's 3 s), then the service is
called and the message edited through the interaction's webhook. Game rules stay in QuizService.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import Any

import discord

from bot.adapters.discord import render
from bot.adapters.discord.sanitize import no_mentions
from bot.core.cards import Feedback, HintCard, ProblemCard
from bot.core.errors import RankZeroError
from bot.core.models import Actor, ChannelRef, PlayerRef
from bot.core.ports import Clock
from bot.core.service import QuizService

log = logging.getLogger(__name__)

PLATFORM = "discord"


def actor_of(interaction: discord.Interaction[Any], admin_roles: Sequence[int] = ()) -> Actor:
    """The player behind an interaction; admin = Manage Server permission or one of ``admin_roles``."""
    user = interaction.user
    perms = interaction.permissions
    # A Member's roles resolve through the guild cache the (non-privileged) guilds intent keeps; a user
    # outside a guild (a DM) has none.
    role_ids = {role.id for role in getattr(user, "roles", ())}
    is_admin = bool(perms.manage_guild or perms.administrator) or bool(role_ids & set(admin_roles))
    return Actor(PlayerRef(PLATFORM, str(user.id), user.display_name), is_admin)


def channel_of(interaction: discord.Interaction[Any], timezone: str = "UTC") -> ChannelRef:
    """The channel an interaction came from (workspace = the guild, 'dm' outside one)."""
    channel = interaction.channel
    name = getattr(channel, "name", None)
    workspace = str(interaction.guild_id) if interaction.guild_id else "dm"
    return ChannelRef(PLATFORM, workspace, str(interaction.channel_id), name, timezone)


class Countdowns:
    """One asyncio timer per (player, problem): at the stored deadline it records the time-out and edits
    the player's ephemeral message. Best effort (a restart loses timers); the stored deadline is what counts.
    """

    def __init__(self, quiz: QuizService, clock: Clock, *, tick_s: float = 5.0) -> None:
        self._quiz = quiz
        self._clock = clock
        #: The timer re-reads the clock at least this often (so it follows the clock, not its own sleep).
        self.tick_s = tick_s
        self._tasks: dict[tuple[str, int], asyncio.Task[None]] = {}
        self._latest: dict[tuple[str, int], discord.Interaction[Any]] = {}

    def arm(self, interaction: discord.Interaction[Any], actor: Actor, card: ProblemCard) -> None:
        """(Re)start the timer of this problem; later edits go through ``interaction``'s webhook."""
        key = (actor.player.user_id, card.problem_id)
        self._latest[key] = interaction
        if key in self._tasks and not self._tasks[key].done():
            return
        self._tasks[key] = asyncio.create_task(self._run(key, actor, card))

    def disarm(self, user_id: str, problem_id: int) -> None:
        """Stop a timer (the problem ended some other way)."""
        key = (user_id, problem_id)
        task = self._tasks.pop(key, None)
        self._latest.pop(key, None)
        if task is not None and task is not asyncio.current_task():
            task.cancel()

    @property
    def armed(self) -> int:
        """How many timers are running."""
        return sum(1 for t in self._tasks.values() if not t.done())

    async def _run(self, key: tuple[str, int], actor: Actor, card: ProblemCard) -> None:
        try:
            # Polling on purpose: the deadline is measured on the service's clock, which may not be
            # the event loop's (tests move a frozen clock), so sleep in ticks and re-read it.
            while (left := (card.deadline - self._clock.now()).total_seconds()) > 0:  # noqa: ASYNC110
                await asyncio.sleep(min(left, self.tick_s))
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
        except asyncio.CancelledError:
            raise
        except RankZeroError as exc:  # e.g. answered meanwhile: nothing to announce
            log.debug("countdown %s ended without edit: %s", key, exc)
        except discord.HTTPException as exc:  # token expired, message gone: the deadline still counts
            log.info("countdown %s could not edit the message: %s", key, exc)
        except Exception:  # a database error: the stored deadline still counts, the next click shows it
            log.exception("countdown %s failed", key)
        finally:
            self._tasks.pop(key, None)
            self._latest.pop(key, None)

    async def close(self) -> None:
        """Cancel every timer."""
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


class PlayHandler:
    """Handles RankZero button clicks (start, answer, hint, next) for the private problem flow."""

    def __init__(
        self,
        quiz: QuizService,
        clock: Clock,
        *,
        admin_roles: Sequence[int] = (),
        timezone: str = "UTC",
        tick_s: float = 5.0,
    ) -> None:
        self.quiz = quiz
        self.admin_roles = tuple(admin_roles)
        self.timezone = timezone
        self.countdowns = Countdowns(quiz, clock, tick_s=tick_s)

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
        actor = actor_of(interaction, self.admin_roles)
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
