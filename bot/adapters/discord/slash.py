"""What every Discord slash command shares: the wiring (the command layer, the admin policy, the forms) and
the per-interaction plumbing (acknowledge, the actor and channel, private replies, domain errors shown).

The commands themselves are discord.py command classes (commands.py: the top-level ones; admin_commands.py:
the ``/rankzero`` and ``/question`` groups) whose methods translate an interaction and call the command
layer (bot.commands) directly, as the Slack listener table does. Every command acknowledges first (a
deferred ephemeral response, within Discord's 3 s: :meth:`Slash.answering`), except ``/question add`` and
``/dispute variant:True`` whose first response must be the form itself (no form keeps a View:
submissions.py routes their submissions by custom id, however late). Admin rights are decided by the layer
from what Discord reports (Manage Server, the member's roles) and enforced again by the services
(NotAdminError).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Iterable, Sequence
from enum import StrEnum
from typing import Any

import discord
from discord import app_commands

from bot.adapters.discord import dispute_render, render
from bot.adapters.discord.disputes import MAX_VARIANT_INPUT, VARIANT_INPUT, DisputeHandler, variant_form
from bot.adapters.discord.failures import tell_failure
from bot.adapters.discord.play import actor_of, admin_policy, channel_of
from bot.adapters.discord.question_form import FIRST_RESPONSE_BUDGET_S, QuestionForms
from bot.adapters.discord.replies import give_back, send_private
from bot.adapters.discord.sanitize import no_mentions
from bot.adapters.discord.submissions import submitted_values
from bot.adapters.drafts import DraftStore
from bot.commands.deadline import bounded, within
from bot.commands.handlers import Commands, PostCheck
from bot.core.errors import ConfigurationError, PostRefusedError, RankZeroError
from bot.core.models import Actor, ChannelRef
from bot.core.ports import Clock, SystemClock
from bot.core.practice import PracticeService
from bot.core.repositories.drafts import DraftRepository
from bot.core.repositories.form_drafts import FormDraftRepository
from bot.core.schedule_service import ScheduleService
from bot.core.service import QuizService
from bot.core.web_links import WebLinks

log = logging.getLogger(__name__)

#: What the daily post needs in its channel (the embed is refused without Embed Links).
POST_PERMISSIONS = {
    "view_channel": "View Channel",
    "send_messages": "Send Messages",
    "embed_links": "Embed Links",
}
GRANT_HINT = (
    "A server admin can grant RankZero View Channel, Send Messages and Embed Links in this channel "
    "(channel settings → Permissions → add the RankZero role or app)."
)
VARIANT_SLOW = (
    "the database did not answer in time, so the variant form could not open: try again in a moment"
)
VARIANT_EMPTY = "your variant is empty: type your version of the code in the form"
NO_RUNNER = "the runner is not configured on this bot"


def choices_of(values: Iterable[StrEnum]) -> list[app_commands.Choice[str]]:
    """Slash-command choices from the vocabulary, so a member added there is offered here too."""
    return [app_commands.Choice(name=v.value, value=v.value) for v in values]


def missing_post_permissions(permissions: discord.Permissions) -> list[str]:
    """The names of the post permissions ``permissions`` lacks (the interaction's ``app_permissions``)."""
    return [label for name, label in POST_PERMISSIONS.items() if not getattr(permissions, name)]


class Slash:
    """The slash commands' shared state and per-interaction plumbing (the client's ``rankzero_commands``)."""

    def __init__(
        self,
        quiz: QuizService,
        schedules: ScheduleService,
        disputes: Any | None,
        *,
        admin_roles: Sequence[int] = (),
        timezone: str = "UTC",
        practice: PracticeService | None = None,
        clock: Clock | None = None,
        drafts: DraftRepository | None = None,
        form_drafts: FormDraftRepository | None = None,
        web_links: WebLinks | None = None,
    ) -> None:
        self.quiz = quiz
        #: Signs /web's links (None: the page is off on this bot).
        self.web_links = web_links
        self.timezone = timezone
        #: Who is an admin (Manage Server, or one of the configured roles): decided by the command layer.
        self.admins = admin_policy(admin_roles)
        #: The platform-neutral command bodies the command classes call.
        self.commands = Commands(quiz, schedules, self.admins, disputes=disputes, practice=practice)
        #: The runner preview of new questions (Save/Cancel), /question correct and /question flags.
        # Its drafts are written through to the database when one is wired (services.drafts), so a Save
        # after a restart, or in another process, still finds the admin's question.
        self.disputes_ui = DisputeHandler(self.commands, self.admins, DraftStore(repository=drafts))
        #: The "Add a question" form, whose typing is kept a day (question_form.py).
        self.forms = QuestionForms(
            self.commands, self.admins, clock or SystemClock(), self.disputes_ui, form_drafts
        )
        self.disputes_ui.on_saved = self.forms.discard

    @property
    def schedules(self) -> ScheduleService:
        """The schedule service the commands use."""
        return self.commands.schedules

    @property
    def practice(self) -> PracticeService | None:
        """Practice (/quiz, /review, /explain and the practice panel of /stats); None: not wired."""
        return self.commands.practice

    @property
    def disputes(self) -> Any | None:
        """The dispute service (None: no runner configured); replaceable (tests point it at a runner)."""
        return self.commands.disputes

    @disputes.setter
    def disputes(self, service: Any | None) -> None:
        self.commands.disputes = service

    # ------------------------------------------------------------------ per interaction
    def actor(self, interaction: discord.Interaction[Any]) -> Actor:
        """The Actor behind ``interaction``."""
        return actor_of(interaction, self.admins)

    def channel(self, interaction: discord.Interaction[Any]) -> ChannelRef:
        """The channel ``interaction`` came from, with the bot's timezone."""
        return channel_of(interaction, self.timezone)

    @staticmethod
    async def send(
        interaction: discord.Interaction[Any],
        text: str | None = None,
        embed: discord.Embed | None = None,
        view: discord.ui.View | None = None,
    ) -> None:
        """A private reply to the acknowledged ``interaction`` (:func:`send_private`)."""
        await send_private(interaction, text, embed, view)

    def admin(self, interaction: discord.Interaction[Any]) -> Actor:
        """The Actor behind ``interaction``, who must be an admin: else NotAdminError (a RankZeroError,
        which :meth:`answering` shows), raised first thing in an admin command's body.
        """
        actor = self.actor(interaction)
        self.admins.require(actor)
        return actor

    @contextlib.asynccontextmanager
    async def answering(self, interaction: discord.Interaction[Any]) -> AsyncIterator[None]:
        """Acknowledge, run the ``async with`` body within the interaction deadline (HandlerDeadlineError
        goes to the tree's on_error, which tells the user) and show a domain error (RankZeroError, a
        refused non-admin included) to the user instead of raising it.
        """
        await interaction.response.defer(ephemeral=True, thinking=True)
        try:
            async with bounded(getattr(interaction.client, "rankzero_deadline_s", None)):
                yield
        except RankZeroError as exc:
            await self.send(interaction, render.error_text(str(exc)))

    def can_post_here(self, interaction: discord.Interaction[Any]) -> PostCheck:
        """The check that the bot may post the daily challenge in this channel (else: what to grant)."""

        async def check() -> None:
            missing = missing_post_permissions(interaction.app_permissions)
            if missing:
                raise PostRefusedError(
                    f"I cannot post in this channel: I lack {', '.join(missing)} here. {GRANT_HINT} "
                    "Then run this command again."
                )

        return check

    # ------------------------------------------------------------------ disputes and the variant form
    async def run_dispute(
        self, interaction: discord.Interaction[Any], problem: str, code: str | None
    ) -> None:
        """Run a problem's code (or a variant) on the runner and show the verdict, in a public thread where
        one can be opened. ``problem`` is what the user typed or picked: ``today:N``, a question id or the
        problem's number, as on Slack and the CLI. The interaction must have been acknowledged.
        """
        if self.disputes is None:
            await self.send(interaction, render.error_text(NO_RUNNER))
            return
        card = await self.commands.dispute(self.actor(interaction), self.channel(interaction), problem, code)
        embed = dispute_render.verdict_embed(card)
        thread = await _dispute_thread(interaction, f"Dispute · {card.question_id}")
        if thread is None:
            await self.send(interaction, embed=embed)
            return
        await thread.send(embed=embed, allowed_mentions=no_mentions())
        await self.send(interaction, f"The runner's verdict is in {thread.mention}.")

    async def open_variant(self, interaction: discord.Interaction[Any], problem: str) -> None:
        """``/dispute problem:<ref> variant:True``: resolve ``problem`` to its id and check the player may
        dispute it (so nobody types code for a dispute that would be refused), then open the form whose
        custom id carries the id (``rz:variant:<id>``). The form is the first response, so the checks get
        the time a first response leaves; a database slower than that is said, and nothing opens.
        """
        actor = self.actor(interaction)
        channel = self.channel(interaction)

        async def checked() -> int:
            disputes = self.disputes
            if disputes is None:
                raise ConfigurationError(NO_RUNNER)
            problem_id = await self.commands.resolve_problem(channel, problem)
            await disputes.check_dispute(actor, problem_id)
            return problem_id

        try:
            problem_id = await asyncio.wait_for(checked(), FIRST_RESPONSE_BUDGET_S)
        except RankZeroError as exc:
            text = render.error_text(str(exc))
        except TimeoutError:
            text = render.error_text(VARIANT_SLOW)
        else:
            await interaction.response.send_modal(variant_form(problem_id))
            return
        await interaction.response.send_message(text, ephemeral=True, allowed_mentions=no_mentions())

    async def on_variant(self, interaction: discord.Interaction[Any], key: str) -> None:
        """A variant form's submission, whenever it arrives (``key``: the problem id of its custom id, digits
        only): ``/dispute`` of that problem with the typed code, through the same checks as ever (the
        problem must be this server's and over for the player, the hour's runs left). When it cannot run,
        the player is told why and given the code back to copy.
        """
        await interaction.response.defer(ephemeral=True, thinking=True)
        code = submitted_values(interaction.data).get(VARIANT_INPUT, "")[:MAX_VARIANT_INPUT]
        if not code.strip():  # the client requires it; a forged submission may not
            await self.send(interaction, render.error_text(VARIANT_EMPTY))
            return
        try:
            if self.disputes is None:  # a form opened before the runner was unconfigured
                raise ConfigurationError(NO_RUNNER)
            deadline = getattr(interaction.client, "rankzero_deadline_s", None)
            await within(deadline, self.run_dispute(interaction, key, code))
        except RankZeroError as exc:
            await self.send(interaction, render.error_text(str(exc)))
        except Exception as exc:  # the runner or the database failed: say so, and keep the code
            await tell_failure(interaction, exc, "variant form")
        else:
            return
        await self.send(
            interaction,
            "Your code is not lost: here it is to copy. Once the problem above is fixed, run "
            f"`/dispute problem:{key} variant:True` again and paste it.",
        )
        await give_back(interaction, code, "py")


async def _dispute_thread(interaction: discord.Interaction[Any], name: str) -> discord.Thread | None:
    """A public thread on the channel for the verdict; None where threads are unavailable (DMs, no
    permission), and the verdict goes to the disputer alone instead.
    """
    channel = interaction.channel
    if not isinstance(channel, discord.TextChannel):
        return None
    try:
        return await channel.create_thread(
            name=name[:100], type=discord.ChannelType.public_thread, auto_archive_duration=1440
        )
    except discord.HTTPException as exc:
        log.info("no dispute thread in %s: %s", channel.id, exc)
        return None
