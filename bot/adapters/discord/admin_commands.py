"""The admin command groups, ``/rankzero`` (schedule, post-now, close-now, difficulty, insights) and
``/question`` (the bank): discord.py ``app_commands.Group`` classes whose methods translate the
interaction and call the command layer (bot.commands) directly.

Both groups are hidden from members without Manage Server (admins may allow a role in the server's
Integrations settings) and absent from DMs; the methods still check: each body starts with
:meth:`Slash.admin <bot.adapters.discord.slash.Slash.admin>` (and the services raise NotAdminError too).
"""

from __future__ import annotations

import logging
from typing import Any

import discord
from discord import app_commands

from bot.adapters.discord import render
from bot.adapters.discord.insights import difficulty_embed, insights_embed
from bot.adapters.discord.sanitize import FIELD_VALUE, code_block, fit_embed, plain, safe_text, truncate
from bot.adapters.discord.slash import GRANT_HINT, Slash, choices_of
from bot.commands import questions
from bot.commands.parsing import parse_retire
from bot.core.schedule_text import describe_schedule, meanwhile_text
from bot.core.vocabulary import MULTIPLE_CHOICE_KINDS, Difficulty, Kind
from questions.loader import BankValidationError, validate_text_async

log = logging.getLogger(__name__)

LETTERS = questions.LETTERS
#: Largest YAML attachment /question import reads.
MAX_IMPORT_BYTES = 512 * 1024
MANAGE_GUILD = discord.Permissions(manage_guild=True)


class RankZeroGroup(
    app_commands.Group,
    name="rankzero",
    description="RankZero administration",
    default_permissions=MANAGE_GUILD,
    guild_only=True,
):
    """``/rankzero``: this channel's schedule and challenges, and what the server's answers show."""

    def __init__(self, slash: Slash) -> None:
        super().__init__()
        self.slash = slash

    schedule = app_commands.Group(name="schedule", description="This channel's schedule")

    @schedule.command(name="set", description="Set this channel's daily schedule")
    @app_commands.describe(
        time="HH:MM",
        days="e.g. mon-fri",
        window="e.g. 8h or next",
        reminder="e.g. 30m or off",
        team_report="on or off: the weekly team report, with the weekly summary",
    )
    async def schedule_set(
        self,
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
        """Set the channel's schedule; the options left out keep their values."""
        options = {
            "post_time": time,
            "timezone": timezone,
            "days": days,
            "problems": problems,
            "time_limit_s": time_limit_s,
            "attempts": attempts,
            "window": window,
            "reminder": reminder,
            "weekly_summary": weekly_summary,
            "team_report": team_report,
        }
        s = self.slash
        async with s.answering(interaction):
            actor = s.admin(interaction)
            saved = await s.commands.schedule_set(
                actor, s.channel(interaction), options, s.can_post_here(interaction)
            )
            # Another admin's save in between is named, not hidden behind "saved" (issue 25 §5).
            meanwhile = meanwhile_text(saved)
            said = f"Schedule saved: {plain(describe_schedule(saved))}."
            await s.send(interaction, f"{plain(meanwhile)}\n{said}" if meanwhile else said)

    @schedule.command(name="show", description="Show this channel's schedule")
    async def schedule_show(self, interaction: discord.Interaction[Any]) -> None:
        """Show the channel's schedule and next posts."""
        async with self.slash.answering(interaction):
            view = await self.slash.commands.schedule_show(self.slash.channel(interaction))
            if view is None:
                await self.slash.send(interaction, "This channel has no schedule: `/rankzero schedule set`.")
                return
            nexts = ", ".join(render.absolute(at) for at in view.next_posts) or "none (paused)"
            text = f"{plain(describe_schedule(view.schedule))}.\nNext posts: {nexts}"
            await self.slash.send(interaction, text)

    @schedule.command(name="pause", description="Pause (or resume) this channel's schedule")
    async def schedule_pause(self, interaction: discord.Interaction[Any], resume: bool = False) -> None:
        """Pause (or resume) the channel's schedule."""
        s = self.slash
        async with s.answering(interaction):
            actor = s.admin(interaction)
            saved = await s.commands.schedule_pause(actor, s.channel(interaction), paused=not resume)
            said = "Schedule resumed." if not saved.config.paused else "Schedule paused."
            meanwhile = meanwhile_text(saved)
            await s.send(interaction, f"{plain(meanwhile)}\n{said}" if meanwhile else said)

    @app_commands.command(name="post-now", description="Post today's challenge here now")
    async def post_now(self, interaction: discord.Interaction[Any]) -> None:
        """Post today's challenge in this channel now (once per day and channel), with the channel's
        schedule settings (closing time, problems, overrides) when it has a schedule.
        """
        s = self.slash
        async with s.answering(interaction):
            actor = s.admin(interaction)
            try:
                card = await s.commands.post_now(actor, s.channel(interaction), s.can_post_here(interaction))
            except discord.HTTPException as exc:
                # Refused by Discord: the service removed the unposted challenge; the next post-now posts it.
                log.warning("post-now in %s refused by Discord: %s", interaction.channel_id, exc)
                await s.send(
                    interaction,
                    render.error_text(
                        f"today's challenge is NOT posted: Discord refused it ({exc.status}: {exc.text}). "
                        f"{GRANT_HINT} Then run `/rankzero post-now` again: it posts today's challenge."
                    ),
                )
                return
            if (await s.quiz.get_challenge(card.challenge_id)).message_ref is None:
                # Another post of it is under way or was refused less than a minute ago (one try a minute).
                await s.send(
                    interaction,
                    render.error_text(
                        f"challenge #{card.challenge_id} is NOT posted yet: a post of it was tried less than "
                        "a minute ago. Run `/rankzero post-now` again in a minute."
                    ),
                )
                return
            text = f"Challenge #{card.challenge_id} of {card.day.isoformat()} is posted."
            if card.closes_at is not None:
                text += f" It closes {render.relative(card.closes_at)} ({render.absolute(card.closes_at)})."
            else:
                text += " It has no closing time (no schedule here): close it with `/rankzero close-now`."
            await s.send(interaction, text)

    @app_commands.command(name="close-now", description="Close a challenge now and post its results")
    async def close_now(self, interaction: discord.Interaction[Any], challenge: int) -> None:
        """Close a challenge now; its results are posted by the service."""
        async with self.slash.answering(interaction):
            actor = self.slash.admin(interaction)
            results = await self.slash.commands.close_challenge(actor, challenge)
            if results is None:
                text = "That challenge was already closed."
            elif results.not_posted is not None:
                text = f"Closed. The results are **not posted yet**: {safe_text(results.not_posted)}."
            else:
                text = "Closed; results posted."
            await self.slash.send(interaction, text)

    @app_commands.command(
        name="difficulty", description="Questions whose label the server's answers disagree with"
    )
    async def difficulty(self, interaction: discord.Interaction[Any]) -> None:
        """Where the difficulty learned from the server's first attempts disagrees with the labels."""
        async with self.slash.answering(interaction):
            actor = self.slash.admin(interaction)
            card = await self.slash.commands.difficulty(actor)
            await self.slash.send(interaction, embed=difficulty_embed(card))

    @app_commands.command(
        name="insights", description="The team's weakest topics and the quiz that targets them"
    )
    async def insights(self, interaction: discord.Interaction[Any]) -> None:
        """The team's weakest topics, the quiz that targets them, and the top label disagreements."""
        async with self.slash.answering(interaction):
            actor = self.slash.admin(interaction)
            card = await self.slash.commands.insights(actor)
            await self.slash.send(interaction, embed=insights_embed(card))


class QuestionGroup(
    app_commands.Group,
    name="question",
    description="The question bank (admins)",
    default_permissions=MANAGE_GUILD,
    guild_only=True,
):
    """``/question``: add, import, retire, preview and correct the server's questions."""

    def __init__(self, slash: Slash) -> None:
        super().__init__()
        self.slash = slash

    @app_commands.command(name="add", description="Add a multiple-choice question through a form")
    @app_commands.choices(difficulty=choices_of(Difficulty), kind=choices_of(MULTIPLE_CHOICE_KINDS))
    async def question_add(
        self,
        interaction: discord.Interaction[Any],
        id: str,
        topic: str,
        difficulty: str,
        kind: str = Kind.CONCEPTUAL.value,
    ) -> None:
        """Open the "Add a question" form."""
        # The modal must be the first response, so the refusal is decided before opening it.
        if not self.slash.actor(interaction).is_admin:
            refusal = render.error_text(self.slash.admins.refusal)
            await interaction.response.send_message(refusal, ephemeral=True)
            return
        await self.slash.forms.open(interaction, id, kind, topic, difficulty)

    @app_commands.command(
        name="restore", description="Reopen your last question form, as you typed it (24 h)"
    )
    async def question_restore(self, interaction: discord.Interaction[Any]) -> None:
        """Reopen the admin's last form."""
        # The form must be the first response: no deferral; the forms refuse non-admins themselves.
        await self.slash.forms.restore(interaction)

    @app_commands.command(name="import", description="Import questions from an attached YAML bank file")
    async def question_import(self, interaction: discord.Interaction[Any], file: discord.Attachment) -> None:
        """Import a YAML bank file attached to the command."""
        s = self.slash
        async with s.answering(interaction):
            actor = s.admin(interaction)
            if file.size > MAX_IMPORT_BYTES:
                too_big = f"{file.filename} is over {MAX_IMPORT_BYTES // 1024} KiB"
                await s.send(interaction, render.error_text(too_big))
                return
            text = (await file.read()).decode("utf-8", errors="replace")
            try:
                loaded = await validate_text_async(text, file.filename)  # off the event loop
            except BankValidationError as exc:
                lines = "\n".join(f"• {e.file}:{e.line}: {e.field}: {e.message}" for e in exc.errors)
                await s.send(interaction, render.error_text(f"nothing imported:\n{lines}"))
                return
            specs = [q.import_spec() for q in loaded]
            report = await s.commands.import_questions(actor, specs)
            await s.send(
                interaction,
                f"Imported {plain(file.filename)}: {len(report.added)} added, {len(report.updated)} updated, "
                f"{len(report.unchanged)} unchanged.",
            )

    @app_commands.command(name="retire", description="Retire a question")
    async def question_retire(self, interaction: discord.Interaction[Any], question: str) -> None:
        """Retire a question."""
        async with self.slash.answering(interaction):
            actor = self.slash.admin(interaction)
            question_id = parse_retire([question])
            await self.slash.commands.retire(actor, question_id)
            await self.slash.send(interaction, f"Question {plain(question_id)} retired.")

    @app_commands.command(name="preview", description="Preview a question with its answer")
    async def question_preview(self, interaction: discord.Interaction[Any], question: str) -> None:
        """Show a question as players would see it, with its answer."""
        async with self.slash.answering(interaction):
            actor = self.slash.admin(interaction)
            spec = await self.slash.commands.preview(actor, question.strip())
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
            await self.slash.send(interaction, embed=fit_embed(embed))

    @app_commands.command(name="correct", description="Fix a question's answer and re-score past attempts")
    @app_commands.describe(question="the question id", letter="the right choice, e.g. B")
    async def question_correct(
        self,
        interaction: discord.Interaction[Any],
        question: str,
        letter: app_commands.Range[str, 1, 1],
    ) -> None:
        """Fix a question's answer (the dispute UI re-scores and reports)."""
        async with self.slash.answering(interaction):
            self.slash.admin(interaction)
            await self.slash.disputes_ui.correct(interaction, question, letter)

    @app_commands.command(name="flags", description="Questions whose official answer a dispute contradicted")
    @app_commands.describe(everything="also the resolved ones")
    async def question_flags(self, interaction: discord.Interaction[Any], everything: bool = False) -> None:
        """The flagged questions (the dispute UI lists them)."""
        async with self.slash.answering(interaction):
            self.slash.admin(interaction)
            await self.slash.disputes_ui.flags(interaction, everything)
