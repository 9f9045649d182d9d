"""The weekly team report on Discord (issue 30): one message with the heatmap attached (alt text as the
attachment's description), the movers and the three most-missed problems in an embed, and one persistent
"Explanation" button per missed problem.

A button's custom id is ``rz:miss:<problem id>`` (bot/core/ids.py), matched strictly (digits only, at most
18), so a click on a report posted before a restart is still answered. The answer is private, and only
for a problem of the clicking server's own challenges (the service checks the tenant: ids are sequential,
anyone can forge a click on any id).
"""

from __future__ import annotations

import logging
import re
from typing import Any

import discord

from bot.adapters import charts
from bot.adapters.chart_drawing import missing_note
from bot.adapters.discord import attachments
from bot.adapters.discord.failures import served_here, tell_failure
from bot.adapters.discord.play import actor_of
from bot.adapters.discord.render import BLUE, add_long_field, bank_text, error_text
from bot.adapters.discord.sanitize import (
    BUTTON_LABEL,
    code_span,
    fit_embed,
    no_mentions,
    plain,
    truncate,
)
from bot.commands.deadline import within
from bot.core import ids
from bot.core.cards import MissedExplanation, Mover, TeamReportCard
from bot.core.errors import RankZeroError

log = logging.getLogger(__name__)

#: The action of the explanation buttons (``rz:miss:<problem id>``).
MISS = "miss"
#: At most this many missed problems get a button (the report lists three).
MAX_MISSED = 3


def _mover_line(mover: Mover) -> str:
    return f"**{mover.rank}.** {plain(mover.display_name)} · {mover.points} pts ({mover.movement})"


def report_embed(card: TeamReportCard, *, image: str | None, note: str | None = None) -> discord.Embed:
    """The report's embed; ``image``: the attached heatmap's file name (None: sent without it)."""
    embed = discord.Embed(
        title=plain(card.title), description=f"Week of {card.week_start.isoformat()}", colour=BLUE
    )
    if note:
        embed.description = f"{embed.description}\n{note}"
    if image is not None:
        embed.set_image(url=f"attachment://{image}")
    movers = "\n".join(_mover_line(m) for m in card.movers) or "Nobody moved this week."
    embed.add_field(name="Movers", value=truncate(movers, 1024), inline=False)
    for i, miss in enumerate(card.missed[:MAX_MISSED], start=1):
        rate = f"{miss.first_correct}/{miss.first_attempts} right at the first try"
        value = f"{code_span(miss.question_id)} · {plain(miss.topic)} · {rate}"
        embed.add_field(name=f"Most missed #{i}", value=truncate(value, 1024), inline=False)
    if not card.missed:
        embed.add_field(name="Most missed", value="No problem was missed this week.", inline=False)
    return fit_embed(embed)


def report_view(card: TeamReportCard) -> discord.ui.View:
    """One "Explanation" button per missed problem (persistent: no timeout, routed by custom id)."""
    view = discord.ui.View(timeout=None)
    for i, miss in enumerate(card.missed[:MAX_MISSED], start=1):
        view.add_item(MissButton(miss.problem_id, label=f"Explanation #{i}"))
    return view


async def post_report(
    target: discord.abc.Messageable, card: TeamReportCard, marks: dict[str, Any] | None = None
) -> None:
    """Send the report to ``target``: with the heatmap when it can be drawn and fits Discord's limits,
    else without it and a line saying so. Discord's refusal (HTTPException) propagates for the outbox.
    ``marks``: ``send``'s outbox nonce (platform.nonced), so a try after a death is not posted twice.
    """
    heatmap, why = await attachments.drawn_file(charts.team_heatmap, card)
    note = None if heatmap is not None else missing_note(why or "unknown")
    kwargs: dict[str, Any] = {
        "embed": report_embed(card, image=heatmap.filename if heatmap else None, note=note),
        "allowed_mentions": no_mentions(),
    }
    if card.missed:
        kwargs["view"] = report_view(card)
    if heatmap is not None:
        try:
            await target.send(**kwargs, file=heatmap, **(marks or {}))
            return
        except discord.Forbidden as exc:
            if exc.code != attachments.MISSING_PERMISSIONS:
                raise
            # Most likely Attach Files (Send Messages or Embed Links refuse the text alone too, and that
            # refusal propagates): the report goes without its picture, saying what to grant.
            log.warning("team report's heatmap refused in %s: %s", getattr(target, "id", "?"), exc.text)
            note = missing_note(attachments.NEEDS_ATTACH_FILES)
            kwargs["embed"] = report_embed(card, image=None, note=note)
    await target.send(**kwargs, **(marks or {}))


def explanation_embed(shown: MissedExplanation) -> discord.Embed:
    """A missed problem's explanation, for the one who clicked."""
    embed = discord.Embed(title=truncate(f"Explanation · {plain(shown.question_id)}", 256), colour=BLUE)
    embed.description = plain(shown.topic)
    add_long_field(embed, "Why", bank_text(shown.explanation))
    return fit_embed(embed)


class MissButton(
    discord.ui.DynamicItem[discord.ui.Button[Any]],
    template=r"rz:miss:(?P<problem>[0-9]{1,18})",
):
    """A team report's "Explanation" button; its custom id carries the problem id and nothing else."""

    def __init__(self, problem_id: int, *, label: str = "Explanation") -> None:
        self.problem_id = problem_id
        super().__init__(
            discord.ui.Button(
                label=truncate(label, BUTTON_LABEL),
                style=discord.ButtonStyle.secondary,
                custom_id=ids.encode(MISS, problem_id),
            )
        )

    @classmethod
    async def from_custom_id(
        cls, interaction: discord.Interaction[Any], item: discord.ui.Item[Any], match: re.Match[str], /
    ) -> MissButton:
        """Rebuild from a clicked custom id (the template matched digits only)."""
        return cls(int(match["problem"]), label=getattr(item, "label", None) or "Explanation")

    async def interaction_check(self, interaction: discord.Interaction[Any], /) -> bool:
        """Allowed servers only (as every RankZero button)."""
        return await served_here(interaction, "button")

    async def callback(self, interaction: discord.Interaction[Any]) -> None:
        """Answer privately with the explanation, if the problem is this server's."""
        await interaction.response.defer(ephemeral=True, thinking=True)
        commands = getattr(interaction.client, "rankzero_commands", None)
        try:
            if commands is None:
                raise RuntimeError("RankZero is starting: the commands are not attached yet")
            deadline = getattr(interaction.client, "rankzero_deadline_s", None)
            shown = await within(
                deadline, commands.commands.missed_explanation(actor_of(interaction), self.problem_id)
            )
        except RankZeroError as exc:
            await interaction.followup.send(
                error_text(str(exc)), ephemeral=True, allowed_mentions=no_mentions()
            )
            return
        except Exception as exc:  # the player must get an answer; the cause goes to the log
            await tell_failure(interaction, exc, "explanation button")
            return
        await interaction.followup.send(
            embed=explanation_embed(shown), ephemeral=True, allowed_mentions=no_mentions()
        )
