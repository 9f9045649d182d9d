"""``/rankzero difficulty`` and ``/rankzero insights`` (admins, private answers): where the difficulty
learned from the server's first attempts disagrees with the bank's labels, and the team's weakest topics
with the practice quiz that targets them. Embeds here; the bodies are the command layer's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import discord
from discord import app_commands

from bot.adapters.discord.replies import send_private
from bot.adapters.discord.sanitize import FIELD_VALUE, fit_embed, plain, safe_text, truncate
from bot.core.cards import DifficultyCard, DifficultyLine, InsightsCard

if TYPE_CHECKING:  # commands.py imports this module to register the commands
    from bot.adapters.discord.commands import CommandHandler


def _line(line: DifficultyLine) -> str:
    return (
        f"`{safe_text(line.question_id)}` · labelled **{plain(line.label)}**, plays like "
        f"**{plain(line.learned)}** ({line.first_correct}/{line.first_attempts} right first time)"
    )


def difficulty_embed(card: DifficultyCard) -> discord.Embed:
    """The disagreements, the widest gap first."""
    embed = discord.Embed(
        title=f"📐 Label vs. answers · {card.disagreeing} disagree", colour=discord.Colour.orange()
    )
    head = (
        f"{card.learned} question(s) have {card.min_attempts}+ first attempts in this server; "
        f"{card.disagreeing} play harder or easier than their label."
    )
    lines = [_line(line) for line in card.lines]
    more = card.disagreeing - len(card.lines)
    tail = [f"…and {more} more (`rankzero questions stats --tenant`)"] if more > 0 else []
    embed.description = truncate("\n".join([head, "", *lines, *tail]), 4000)
    return fit_embed(embed)


def insights_embed(card: InsightsCard) -> discord.Embed:
    """The weakest topics, the quiz to practise the weakest, and the top disagreements."""
    embed = discord.Embed(title="🔎 Team insights", colour=discord.Colour.blurple())
    if card.weakest:
        weak = "\n".join(
            f"**{plain(t.topic)}**: {t.accuracy:.0%} right first time ({t.first_correct}/{t.first_attempts})"
            for t in card.weakest
        )
    else:
        weak = f"No topic has {card.min_attempts}+ first attempts in the last {card.days} days yet."
    embed.add_field(
        name=f"Weakest topics · last {card.days} days", value=truncate(weak, FIELD_VALUE), inline=False
    )
    if card.quiz_topic is not None:
        embed.add_field(
            name="Practise them",
            value=truncate(
                "Anyone can run `/quiz topic:weakest` (these topics) or "
                f"`/quiz topic:{safe_text(card.quiz_topic)}` (the weakest): private, not ranked.",
                FIELD_VALUE,
            ),
            inline=False,
        )
    gaps = "\n".join(_line(line) for line in card.difficulty.lines) or "None: the labels match the answers."
    embed.add_field(
        name=f"Label vs. answers · {card.difficulty.disagreeing} disagree",
        value=truncate(gaps, FIELD_VALUE),
        inline=False,
    )
    return fit_embed(embed)


def register_insight_commands(group: app_commands.Group, h: CommandHandler) -> None:
    """Add ``difficulty`` and ``insights`` to the admin ``/rankzero`` group; ``h`` is the CommandHandler
    (its ``run`` defers, refuses non-admins and shows domain errors).
    """

    @group.command(name="difficulty", description="Questions whose label the server's answers disagree with")
    async def difficulty(interaction: discord.Interaction[Any]) -> None:
        async def body() -> None:
            card = await h.commands.difficulty(h.actor(interaction))
            await send_private(interaction, embed=difficulty_embed(card))

        await h.run(interaction, body, admin=True)

    @group.command(name="insights", description="The team's weakest topics and the quiz that targets them")
    async def insights(interaction: discord.Interaction[Any]) -> None:
        async def body() -> None:
            card = await h.commands.insights(h.actor(interaction))
            await send_private(interaction, embed=insights_embed(card))

        await h.run(interaction, body, admin=True)
