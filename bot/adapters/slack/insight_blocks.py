"""Block Kit for ``/rankzero difficulty`` and ``/rankzero insights`` (admins, ephemeral): where the
difficulty learned from the workspace's first attempts disagrees with the labels, and the team's weakest
topics with the practice quiz that targets them. Every name from the bank is escaped.
"""

from __future__ import annotations

import shlex

from bot.adapters.slack.blocks import Block, esc, section
from bot.core.cards import DifficultyCard, DifficultyLine, InsightsCard


def _line(line: DifficultyLine) -> str:
    return (
        f"• `{esc(line.question_id)}` labelled *{esc(line.label)}*, plays like *{esc(line.learned)}* "
        f"({line.first_correct}/{line.first_attempts} right first time)"
    )


def difficulty_blocks(card: DifficultyCard) -> list[Block]:
    """The disagreements, the widest gap first."""
    head = (
        f"*Label vs. answers* · {card.disagreeing} disagree\n{card.learned} question(s) have "
        f"{card.min_attempts}+ first attempts in this workspace."
    )
    blocks = [section(head)]
    if card.lines:
        blocks.append(section("\n".join(_line(line) for line in card.lines)))
    more = card.disagreeing - len(card.lines)
    if more > 0:
        blocks.append(section(f"…and {more} more (`rankzero questions stats --tenant`)"))
    return blocks


def insights_blocks(card: InsightsCard) -> list[Block]:
    """The weakest topics, the quiz to practise the weakest, and the top disagreements."""
    if card.weakest:
        weak = "\n".join(
            f"• *{esc(t.topic)}*: {t.accuracy:.0%} right first time ({t.first_correct}/{t.first_attempts})"
            for t in card.weakest
        )
    else:
        weak = f"No topic has {card.min_attempts}+ first attempts in the last {card.days} days yet."
    blocks = [section(f"*Team insights* · weakest topics, last {card.days} days\n{weak}")]
    if card.quiz_topic is not None:
        # Quoted as /rankzero's shlex split reads it back, so a topic with spaces stays one argument.
        command = f"/rankzero quiz {shlex.quote(card.quiz_topic)}"
        blocks.append(
            section(
                "Practise them: anyone can run `/rankzero quiz weakest` (these topics) or "
                f"`{esc(command)}` (the weakest): private, not ranked."
            )
        )
    gaps = "\n".join(_line(line) for line in card.difficulty.lines) or "None: the labels match the answers."
    blocks.append(section(f"*Label vs. answers* · {card.difficulty.disagreeing} disagree\n{gaps}"))
    return blocks
