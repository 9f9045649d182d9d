"""The weekly team report in Block Kit (issue 30): the movers and the three most-missed problems, each with
an "Explanation" button (``rz:miss:<problem id>``) answered privately to whoever presses it; and that answer.

Everything players or admins typed (display names, topics, question ids) is escaped with :func:`bk.esc`;
explanations are the bank's Markdown, rendered as mrkdwn.
"""

from __future__ import annotations

from bot.adapters.slack import blocks as bk
from bot.core import ids
from bot.core.cards import MissedExplanation, Mover, TeamReportCard

#: The action of the explanation buttons.
MISS = "miss"
#: At most this many missed problems get a button (the report lists three).
MAX_MISSED = 3


def _mover_line(mover: Mover) -> str:
    return f"*{mover.rank}.* {bk.esc(mover.display_name)} · {mover.points} pts ({mover.movement})"


def report_blocks(card: TeamReportCard, note: str | None = None) -> list[bk.Block]:
    """The report's message: title, week, movers, most-missed problems with their buttons; ``note``
    (mrkdwn, escaped) under the title, e.g. that the heatmap is missing.
    """
    blocks: list[bk.Block] = [bk.header(card.title), bk.context(f"Week of {card.week_start.isoformat()}")]
    if note:
        blocks.append(bk.context(note))
    movers = "\n".join(_mover_line(m) for m in card.movers) or "Nobody moved this week."
    blocks.append(bk.section(f"*Movers*\n{movers}"))
    if not card.missed:
        blocks.append(bk.section("*Most missed*\nNo problem was missed this week."))
    for i, miss in enumerate(card.missed[:MAX_MISSED], start=1):
        rate = f"{miss.first_correct}/{miss.first_attempts} right at the first try"
        text = f"*Most missed #{i}* · `{bk.esc(miss.question_id)}` · {bk.esc(miss.topic)} · {rate}"
        section = bk.section(text)
        section["accessory"] = bk.button(f"Explanation #{i}", ids.encode(MISS, miss.problem_id))
        blocks.append(section)
    return blocks


def report_text(card: TeamReportCard) -> str:
    """The message's fallback text (notifications, screen readers)."""
    return bk.esc(card.title)


def explanation_blocks(shown: MissedExplanation) -> list[bk.Block]:
    """A missed problem's explanation, for the one who pressed its button."""
    head = f"*Explanation* · `{bk.esc(shown.question_id)}` · {bk.esc(shown.topic)}"
    return [bk.section(head), *bk.markdown_sections(shown.explanation)][: bk.MAX_MESSAGE_BLOCKS]
