"""``/rankzero difficulty`` and ``/rankzero insights`` (admins, private answers): where the difficulty
learned from the server's first attempts disagrees with the bank's labels, and the team's weakest topics
with the practice quiz that targets them. Embeds here; the commands are RankZeroGroup's
(admin_commands.py), the bodies the command layer's.
"""

from __future__ import annotations

import discord

from bot.adapters.discord.sanitize import FIELD_VALUE, code_span, fit_embed, plain, safe_text, truncate
from bot.core.cards import DifficultyCard, DifficultyLine, InsightsCard


def _line(line: DifficultyLine) -> str:
    return (
        f"{code_span(line.question_id)} · labelled **{plain(line.label)}**, plays like "
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
