"""Slash commands and the question modal: payload -> one service call -> render.

Every command acknowledges first (a deferred ephemeral response, within Discord's 3 s), except
``/question add`` and ``/dispute variant:True`` whose first response must be the form itself (no form keeps
a View: submissions.py routes their submissions by custom id, however late). The bodies are the command
layer's (bot.commands): this module turns interactions into its calls (Actor, ChannelRef, typed options) and
renders the cards. Admin rights are decided by the layer from what Discord reports (Manage Server, the
member's roles) and enforced again by the services (NotAdminError).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from enum import StrEnum
from typing import Any

import discord
from discord import app_commands

from bot.adapters import charts
from bot.adapters.chart_drawing import missing_note
from bot.adapters.discord import attachments, dispute_render, practice_render, render
from bot.adapters.discord.disputes import MAX_VARIANT_INPUT, VARIANT_INPUT, DisputeHandler, variant_form
from bot.adapters.discord.failures import tell_failure
from bot.adapters.discord.insights import register_insight_commands
from bot.adapters.discord.play import PLATFORM, actor_of, admin_policy, channel_of
from bot.adapters.discord.question_form import FIRST_RESPONSE_BUDGET_S, QuestionForms
from bot.adapters.discord.replies import give_back, send_private
from bot.adapters.discord.sanitize import (
    FIELD_VALUE,
    code_block,
    fit_embed,
    no_mentions,
    plain,
    safe_text,
    truncate,
)
from bot.adapters.discord.submissions import submitted_values
from bot.adapters.drafts import DraftStore
from bot.commands import questions
from bot.commands.deadline import within
from bot.commands.handlers import Commands, NoChallenge, PostCheck
from bot.commands.parsing import parse_period, parse_retire, parse_scope
from bot.commands.web import web_link
from bot.core.errors import ConfigurationError, PostRefusedError, RankZeroError
from bot.core.models import Actor, PlayerRef, bounded_display_name
from bot.core.ports import Clock, SystemClock
from bot.core.practice import PracticeService
from bot.core.repositories.drafts import DraftRepository
from bot.core.repositories.form_drafts import FormDraftRepository
from bot.core.schedule_service import ScheduleService
from bot.core.schedule_text import describe_schedule, meanwhile_text
from bot.core.service import QuizService
from bot.core.vocabulary import MULTIPLE_CHOICE_KINDS, Difficulty, Kind, Period, Scope
from bot.core.web_links import WebLinks
from questions.loader import BankValidationError, validate_text_async

log = logging.getLogger(__name__)

LETTERS = questions.LETTERS
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
#: Largest YAML attachment /question import reads.
MAX_IMPORT_BYTES = 512 * 1024
#: Discord's limits for autocomplete answers: 25 choices, names of at most 100 characters.
MAX_CHOICES = 25
MAX_CHOICE_NAME = 100
#: The longest text /dispute's problem option takes (a question id is at most 64; Discord enforces it).
PROBLEM_OPTION_MAX = 100
VARIANT_SLOW = (
    "the database did not answer in time, so the variant form could not open: try again in a moment"
)
VARIANT_EMPTY = "your variant is empty: type your version of the code in the form"

Reply = Callable[[str | None, discord.Embed | None], Awaitable[None]]

#: What /leaderboard calls each scope: Discord's word for a workspace is "server".
SCOPE_NAMES: dict[Scope, str] = {Scope.CHANNEL: "channel", Scope.WORKSPACE: "server"}


def choices_of(values: Iterable[StrEnum]) -> list[app_commands.Choice[str]]:
    """Slash-command choices from the vocabulary, so a member added there is offered here too."""
    return [app_commands.Choice(name=v.value, value=v.value) for v in values]


def missing_post_permissions(permissions: discord.Permissions) -> list[str]:
    """The names of the post permissions ``permissions`` lacks (the interaction's ``app_permissions``)."""
    return [label for name, label in POST_PERMISSIONS.items() if not getattr(permissions, name)]


class CommandHandler:
    """The slash commands' bodies."""

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
        #: The platform-neutral command bodies; this handler translates and renders.
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

    def actor(self, interaction: discord.Interaction[Any]) -> Actor:
        """The Actor behind ``interaction``."""
        return actor_of(interaction, self.admins)

    async def _send(
        self,
        interaction: discord.Interaction[Any],
        text: str | None = None,
        embed: discord.Embed | None = None,
        view: discord.ui.View | None = None,
    ) -> None:
        await send_private(interaction, text, embed, view)

    async def run(
        self,
        interaction: discord.Interaction[Any],
        body: Callable[[], Awaitable[None]],
        *,
        admin: bool = False,
    ) -> None:
        """Acknowledge, refuse non-admins of admin commands, run ``body`` (within the interaction deadline:
        HandlerDeadlineError goes to the tree's on_error, which tells the user), show domain errors.
        """
        await interaction.response.defer(ephemeral=True, thinking=True)
        try:
            if admin:
                self.admins.require(self.actor(interaction))
            await within(getattr(interaction.client, "rankzero_deadline_s", None), body())
        except RankZeroError as exc:
            await self._send(interaction, render.error_text(str(exc)))

    # ------------------------------------------------------------------ the variant form
    async def open_variant(self, interaction: discord.Interaction[Any], problem: str) -> None:
        """``/dispute problem:<ref> variant:True``: resolve ``problem`` to its id and check the player may
        dispute it (so nobody types code for a dispute that would be refused), then open the form whose
        custom id carries the id (``rz:variant:<id>``). The form is the first response, so the checks get
        the time a first response leaves; a database slower than that is said, and nothing opens.
        """
        actor = self.actor(interaction)
        channel = channel_of(interaction, self.timezone)

        async def checked() -> int:
            disputes = self.disputes
            if disputes is None:
                raise ConfigurationError("the runner is not configured on this bot")
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
            await self._send(interaction, render.error_text(VARIANT_EMPTY))
            return
        try:
            if self.disputes is None:  # a form opened before the runner was unconfigured
                raise ConfigurationError("the runner is not configured on this bot")
            deadline = getattr(interaction.client, "rankzero_deadline_s", None)
            await within(deadline, self.dispute(interaction, key, code))
        except RankZeroError as exc:
            await self._send(interaction, render.error_text(str(exc)))
        except Exception as exc:  # the runner or the database failed: say so, and keep the code
            await tell_failure(interaction, exc, "variant form")
        else:
            return
        await self._send(
            interaction,
            "Your code is not lost: here it is to copy. Once the problem above is fixed, run "
            f"`/dispute problem:{key} variant:True` again and paste it.",
        )
        await give_back(interaction, code, "py")

    # ------------------------------------------------------------------ players
    async def leaderboard(self, interaction: discord.Interaction[Any], scope: str, period: str) -> None:
        """Top players of the channel or server."""
        card = await self.commands.leaderboard(
            self.actor(interaction),
            channel_of(interaction, self.timezone),
            parse_scope(scope),
            parse_period(period),
        )
        await self._send(interaction, embed=render.leaderboard_embed(card))

    async def stats(self, interaction: discord.Interaction[Any], member: discord.abc.User | None) -> None:
        """A player's record (yours by default)."""
        who = self.actor(interaction).player
        if member is not None:
            who = PlayerRef(
                PLATFORM, str(member.id), bounded_display_name(member.display_name, str(member.id))
            )
        stats = await self.commands.stats(who, channel_of(interaction, self.timezone))
        embeds = [render.stats_embed(stats.record)]
        if stats.practice is not None:  # practice is shown apart from the competitive record
            embeds.append(practice_render.practice_stats_embed(stats.practice))
        embeds = practice_render.fit_message(embeds)
        # The chart (issue 30) goes with the same private reply; without it the figures still arrive.
        chart, why = await attachments.drawn_file(charts.player_chart, stats.record)
        if chart is not None:
            try:
                await interaction.followup.send(
                    embeds=embeds, file=chart, ephemeral=True, allowed_mentions=no_mentions()
                )
                return
            except discord.HTTPException as exc:  # the picture refused (413...): the text goes alone
                log.warning("/stats chart refused by Discord: %s %s", exc.status, exc.text)
                why = "Discord refused the picture"
        await interaction.followup.send(
            missing_note(why or "unknown"),
            embeds=embeds,
            ephemeral=True,
            allowed_mentions=no_mentions(),
        )

    async def web(self, interaction: discord.Interaction[Any]) -> None:
        """A private link to this channel's read-only page (any member, for the channel asked in)."""
        link = web_link(self.web_links, channel_of(interaction, self.timezone))
        await self._send(interaction, link.text("<{url}>"))  # <...>: no preview fetched by Discord

    async def challenge(self, interaction: discord.Interaction[Any]) -> None:
        """Today's challenge of this channel with its Start button (for a late joiner).

        Never creates one: only the schedule (or an admin's post-now) posts a challenge, with its window.
        """
        card = await self.commands.challenge(channel_of(interaction, self.timezone))
        if isinstance(card, NoChallenge):
            if card.next_post is not None:
                at = card.next_post
                when = f"The next one is scheduled {render.relative(at)} ({render.absolute(at)})."
            else:
                when = "This channel has no daily schedule running."
            await self._send(
                interaction,
                f"There is no challenge in this channel yet today. {when}\n"
                "Meanwhile, practise with `/quiz`, `/review` or `/explain` (not ranked).",
            )
            return
        await self._send(interaction, embed=render.challenge_embed(card), view=render.challenge_view(card))

    async def dispute(self, interaction: discord.Interaction[Any], problem: str, code: str | None) -> None:
        """Run a problem's code (or a variant) on the runner and show the verdict. ``problem`` is what the
        user typed or picked: ``today:N``, a question id or the problem's number, as on Slack and the CLI.
        """
        if self.disputes is None:
            await self._send(interaction, render.error_text("the runner is not configured on this bot"))
            return
        card = await self.commands.dispute(
            self.actor(interaction), channel_of(interaction, self.timezone), problem, code
        )
        embed = dispute_render.verdict_embed(card)
        thread = await self._dispute_thread(interaction, f"Dispute · {card.question_id}")
        if thread is None:
            await self._send(interaction, embed=embed)
            return
        await thread.send(embed=embed, allowed_mentions=no_mentions())
        await self._send(interaction, f"The runner's verdict is in {thread.mention}.")

    async def problem_choices(
        self, interaction: discord.Interaction[Any], typed: str
    ) -> list[app_commands.Choice[str]]:
        """``/dispute``'s suggestions while typing: today's problems of this channel (``today:N``, with the
        topic and question id to recognise them), those containing what is typed. Nothing when there is no
        challenge today; a database error is logged and suggests nothing (the command still takes any form).
        """
        try:
            card = await self.quiz.find_challenge(channel_of(interaction, self.timezone))
            challenge = await self.quiz.get_challenge(card.challenge_id) if card is not None else None
        except Exception:  # a suggestion is a convenience: never an error in the user's face
            log.warning("no /dispute suggestions for channel %s", interaction.channel_id, exc_info=True)
            return []
        if challenge is None:
            return []
        wanted = typed.strip().lower()
        choices = []
        for p in challenge.problems:
            value = f"today:{p.position}"
            name = f"{value} · {p.question.topic} · {p.question.id}"[:MAX_CHOICE_NAME]
            if wanted in name.lower():
                choices.append(app_commands.Choice(name=name, value=value))
        return choices[:MAX_CHOICES]

    @staticmethod
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

    # ------------------------------------------------------------------ admins
    def _can_post_here(self, interaction: discord.Interaction[Any]) -> PostCheck:
        """The check that the bot may post the daily challenge in this channel (else: what to grant)."""

        async def check() -> None:
            missing = missing_post_permissions(interaction.app_permissions)
            if missing:
                raise PostRefusedError(
                    f"I cannot post in this channel: I lack {', '.join(missing)} here. {GRANT_HINT} "
                    "Then run this command again."
                )

        return check

    async def schedule_set(self, interaction: discord.Interaction[Any], **options: Any) -> None:
        """Set the channel's schedule."""
        saved = await self.commands.schedule_set(
            self.actor(interaction),
            channel_of(interaction, self.timezone),
            options,
            self._can_post_here(interaction),
        )
        # Another admin's save in between is named, not hidden behind "saved" (issue 25 §5).
        meanwhile = meanwhile_text(saved)
        said = f"Schedule saved: {plain(describe_schedule(saved))}."
        await self._send(interaction, f"{plain(meanwhile)}\n{said}" if meanwhile else said)

    async def schedule_show(self, interaction: discord.Interaction[Any]) -> None:
        """Show the channel's schedule and next posts."""
        view = await self.commands.schedule_show(channel_of(interaction, self.timezone))
        if view is None:
            await self._send(interaction, "This channel has no schedule: `/rankzero schedule set`.")
            return
        nexts = ", ".join(render.absolute(at) for at in view.next_posts) or "none (paused)"
        await self._send(interaction, f"{plain(describe_schedule(view.schedule))}.\nNext posts: {nexts}")

    async def schedule_pause(self, interaction: discord.Interaction[Any], resume: bool) -> None:
        """Pause (or resume) the channel's schedule."""
        saved = await self.commands.schedule_pause(
            self.actor(interaction), channel_of(interaction, self.timezone), paused=not resume
        )
        said = "Schedule resumed." if not saved.config.paused else "Schedule paused."
        meanwhile = meanwhile_text(saved)
        await self._send(interaction, f"{plain(meanwhile)}\n{said}" if meanwhile else said)

    async def post_now(self, interaction: discord.Interaction[Any]) -> None:
        """Post today's challenge in this channel now (once per day and channel), with the channel's
        schedule settings (closing time, problems, overrides) when it has a schedule.
        """
        try:
            card = await self.commands.post_now(
                self.actor(interaction),
                channel_of(interaction, self.timezone),
                self._can_post_here(interaction),
            )
        except discord.HTTPException as exc:
            # Refused by Discord: the service removed the unposted challenge; the next post-now posts it.
            log.warning("post-now in %s refused by Discord: %s", interaction.channel_id, exc)
            await self._send(
                interaction,
                render.error_text(
                    f"today's challenge is NOT posted: Discord refused it ({exc.status}: {exc.text}). "
                    f"{GRANT_HINT} Then run `/rankzero post-now` again: it posts today's challenge."
                ),
            )
            return
        if (await self.quiz.get_challenge(card.challenge_id)).message_ref is None:
            # Another post of it is under way or was refused less than a minute ago (one try a minute).
            await self._send(
                interaction,
                render.error_text(
                    f"challenge #{card.challenge_id} is NOT posted yet: a post of it was tried less than a "
                    "minute ago. Run `/rankzero post-now` again in a minute."
                ),
            )
            return
        text = f"Challenge #{card.challenge_id} of {card.day.isoformat()} is posted."
        if card.closes_at is not None:
            text += f" It closes {render.relative(card.closes_at)} ({render.absolute(card.closes_at)})."
        else:
            text += " It has no closing time (no schedule here): close it with `/rankzero close-now`."
        await self._send(interaction, text)

    async def close_now(self, interaction: discord.Interaction[Any], challenge: int) -> None:
        """Close a challenge now; its results are posted by the service."""
        results = await self.commands.close_challenge(self.actor(interaction), challenge)
        if results is None:
            text = "That challenge was already closed."
        elif results.not_posted is not None:
            text = f"Closed. The results are **not posted yet**: {safe_text(results.not_posted)}."
        else:
            text = "Closed; results posted."
        await self._send(interaction, text)

    async def import_questions(self, interaction: discord.Interaction[Any], file: discord.Attachment) -> None:
        """Import a YAML bank file attached to the command."""
        if file.size > MAX_IMPORT_BYTES:
            await self._send(
                interaction, render.error_text(f"{file.filename} is over {MAX_IMPORT_BYTES // 1024} KiB")
            )
            return
        text = (await file.read()).decode("utf-8", errors="replace")
        try:
            loaded = await validate_text_async(text, file.filename)  # off the event loop
        except BankValidationError as exc:
            lines = "\n".join(f"• {e.file}:{e.line}: {e.field}: {e.message}" for e in exc.errors)
            await self._send(interaction, render.error_text(f"nothing imported:\n{lines}"))
            return
        specs = [q.spec.model_dump(mode="json", exclude_none=True) for q in loaded]
        report = await self.commands.import_questions(self.actor(interaction), specs)
        await self._send(
            interaction,
            f"Imported {plain(file.filename)}: {len(report.added)} added, {len(report.updated)} updated, "
            f"{len(report.unchanged)} unchanged.",
        )

    async def retire(self, interaction: discord.Interaction[Any], question: str) -> None:
        """Retire a question."""
        question_id = parse_retire([question])
        await self.commands.retire(self.actor(interaction), question_id)
        await self._send(interaction, f"Question {plain(question_id)} retired.")

    async def preview(self, interaction: discord.Interaction[Any], question: str) -> None:
        """Show a question as players would see it, with its answer."""
        spec = await self.commands.preview(self.actor(interaction), question.strip())
        embed = discord.Embed(
            title=f"Preview · {spec['id']} · {spec.get('topic', '')}",
            description=safe_text(spec.get("prompt") or ""),
        )
        if spec.get("code"):
            embed.add_field(name="Code", value=code_block(spec["code"]), inline=False)
        lines = [
            f"**{LETTERS[i]}.** {safe_text(c['text'])}{' ✅' if c.get('correct') else ''}"
            for i, c in enumerate(spec.get("choices") or [])
        ]
        if lines:
            embed.add_field(name="Choices", value=truncate("\n".join(lines), FIELD_VALUE), inline=False)
        await self._send(interaction, embed=fit_embed(embed))


def register_commands(tree: app_commands.CommandTree[Any], h: CommandHandler) -> None:
    """Add RankZero's slash commands to ``tree``."""

    @tree.command(name="leaderboard", description="Top players of this channel or server")
    @app_commands.choices(
        scope=[app_commands.Choice(name=name, value=name) for name in SCOPE_NAMES.values()],
        period=choices_of(Period),
    )
    async def leaderboard(
        interaction: discord.Interaction[Any],
        scope: str = SCOPE_NAMES[Scope.CHANNEL],
        period: str = Period.ALL.value,
    ) -> None:
        await h.run(interaction, lambda: h.leaderboard(interaction, scope, period))

    @tree.command(name="stats", description="A player's record (yours by default)")
    async def stats(interaction: discord.Interaction[Any], member: discord.User | None = None) -> None:
        await h.run(interaction, lambda: h.stats(interaction, member))

    @tree.command(name="web", description="A private link to this channel's read-only leaderboard page")
    async def web(interaction: discord.Interaction[Any]) -> None:
        await h.run(interaction, lambda: h.web(interaction))

    @tree.command(name="challenge", description="Today's challenge of this channel, with its Start button")
    async def challenge(interaction: discord.Interaction[Any]) -> None:
        await h.run(interaction, lambda: h.challenge(interaction))

    @tree.command(name="dispute", description="Run a problem's code on the runner and see the verdict")
    @app_commands.describe(
        problem="today:N (problem N of today's challenge here), a question id, or the number in its footer",
        variant="True: type your own version of the code in a form and run that instead",
    )
    async def dispute(
        interaction: discord.Interaction[Any],
        problem: app_commands.Range[str, 1, PROBLEM_OPTION_MAX],
        variant: bool = False,
    ) -> None:
        # str(): a client that still has the tree where this option was an integer sends a number.
        typed = str(problem)
        if variant and h.disputes is not None:  # the form must be the first response
            await h.open_variant(interaction, typed)
            return
        await h.run(interaction, lambda: h.dispute(interaction, typed, None))

    @dispute.autocomplete("problem")
    async def dispute_problem(
        interaction: discord.Interaction[Any], current: str
    ) -> list[app_commands.Choice[str]]:
        return await h.problem_choices(interaction, current)

    # Admin groups: hidden from members without Manage Server (admins may allow a role in the server's
    # Integrations settings) and absent from DMs; the handlers still check (actor_of / NotAdminError).
    manage_guild = discord.Permissions(manage_guild=True)
    rankzero = app_commands.Group(
        name="rankzero",
        description="RankZero administration",
        default_permissions=manage_guild,
        guild_only=True,
    )
    schedule = app_commands.Group(name="schedule", description="This channel's schedule", parent=rankzero)

    @schedule.command(name="set", description="Set this channel's daily schedule")
    @app_commands.describe(
        time="HH:MM",
        days="e.g. mon-fri",
        window="e.g. 8h or next",
        reminder="e.g. 30m or off",
        team_report="on or off: the weekly team report, with the weekly summary",
    )
    async def schedule_set(
        interaction: discord.Interaction[Any],
        time: str | None = None,
        timezone: str | None = None,
        days: str | None = None,
        problems: int | None = None,
        time_limit_s: int | None = None,
        attempts: int | None = None,
        window: str | None = None,
        reminder: str | None = None,
        weekly_summary: str | None = None,
        team_report: str | None = None,
    ) -> None:
        await h.run(
            interaction,
            lambda: h.schedule_set(
                interaction,
                post_time=time,
                timezone=timezone,
                days=days,
                problems=problems,
                time_limit_s=time_limit_s,
                attempts=attempts,
                window=window,
                reminder=reminder,
                weekly_summary=weekly_summary,
                team_report=team_report,
            ),
            admin=True,
        )

    @schedule.command(name="show", description="Show this channel's schedule")
    async def schedule_show(interaction: discord.Interaction[Any]) -> None:
        await h.run(interaction, lambda: h.schedule_show(interaction))

    @schedule.command(name="pause", description="Pause (or resume) this channel's schedule")
    async def schedule_pause(interaction: discord.Interaction[Any], resume: bool = False) -> None:
        await h.run(interaction, lambda: h.schedule_pause(interaction, resume), admin=True)

    @rankzero.command(name="post-now", description="Post today's challenge here now")
    async def post_now(interaction: discord.Interaction[Any]) -> None:
        await h.run(interaction, lambda: h.post_now(interaction), admin=True)

    @rankzero.command(name="close-now", description="Close a challenge now and post its results")
    async def close_now(interaction: discord.Interaction[Any], challenge: int) -> None:
        await h.run(interaction, lambda: h.close_now(interaction, challenge), admin=True)

    question = app_commands.Group(
        name="question",
        description="The question bank (admins)",
        default_permissions=manage_guild,
        guild_only=True,
    )

    @question.command(name="add", description="Add a multiple-choice question through a form")
    @app_commands.choices(difficulty=choices_of(Difficulty), kind=choices_of(MULTIPLE_CHOICE_KINDS))
    async def question_add(
        interaction: discord.Interaction[Any],
        id: str,
        topic: str,
        difficulty: str,
        kind: str = Kind.CONCEPTUAL.value,
    ) -> None:
        # The modal must be the first response, so the refusal is decided before opening it.
        if not h.actor(interaction).is_admin:
            await interaction.response.send_message(render.error_text(h.admins.refusal), ephemeral=True)
            return
        await h.forms.open(interaction, id, kind, topic, difficulty)

    @question.command(name="restore", description="Reopen your last question form, as you typed it (24 h)")
    async def question_restore(interaction: discord.Interaction[Any]) -> None:
        # The form must be the first response: no deferral; the handler refuses non-admins itself.
        await h.forms.restore(interaction)

    @question.command(name="import", description="Import questions from an attached YAML bank file")
    async def question_import(interaction: discord.Interaction[Any], file: discord.Attachment) -> None:
        await h.run(interaction, lambda: h.import_questions(interaction, file), admin=True)

    @question.command(name="retire", description="Retire a question")
    async def question_retire(interaction: discord.Interaction[Any], question: str) -> None:
        await h.run(interaction, lambda: h.retire(interaction, question), admin=True)

    @question.command(name="preview", description="Preview a question with its answer")
    async def question_preview(interaction: discord.Interaction[Any], question: str) -> None:
        await h.run(interaction, lambda: h.preview(interaction, question), admin=True)

    @question.command(name="correct", description="Fix a question's answer and re-score past attempts")
    @app_commands.describe(question="the question id", letter="the right choice, e.g. B")
    async def question_correct(
        interaction: discord.Interaction[Any],
        question: str,
        letter: app_commands.Range[str, 1, 1],
    ) -> None:
        await h.run(interaction, lambda: h.disputes_ui.correct(interaction, question, letter), admin=True)

    @question.command(name="flags", description="Questions whose official answer a dispute contradicted")
    @app_commands.describe(everything="also the resolved ones")
    async def question_flags(interaction: discord.Interaction[Any], everything: bool = False) -> None:
        await h.run(interaction, lambda: h.disputes_ui.flags(interaction, everything), admin=True)

    register_insight_commands(rankzero, h)
    tree.add_command(rankzero)
    tree.add_command(question)
