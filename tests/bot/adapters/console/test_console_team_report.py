"""The weekly team report in the terminal (issue 30): the heatmap as a table, movers, and the explanations
inline; names that look like markup or terminal commands are shown, never obeyed.
"""

from __future__ import annotations

import datetime as dt
import io

from rich.console import Console

from bot.adapters.console.play import ConsolePlatform
from bot.core.cards import HeatCell, MissedQuestion, Mover, TeamReportCard
from bot.core.models import ChannelRef

CHANNEL = ChannelRef("console", "local", "terminal", "terminal", "UTC")


async def test_console_prints_the_report_with_its_explanations() -> None:
    out = io.StringIO()
    platform = ConsolePlatform(Console(file=out, width=120, force_terminal=False, color_system=None))
    card = TeamReportCard(
        title="Weekly [bold]report[/]",
        week_start=dt.date(2026, 11, 16),
        cells=(HeatCell("DDP [red]", "advanced", 8, 2),),
        missed=(MissedQuestion(7, "ddp-7", "DDP", 8, 2, "All-reduce **sums** the gradients."),),
        movers=(Mover("Eve\x1b[2J [blink]x[/]", 30, 1, 3),),
    )

    await platform.post_team_report(CHANNEL, card)

    text = out.getvalue()
    assert "Weekly [bold]report[/]" in text and "DDP [red]" in text  # markup shown, not applied
    assert "2/8 (25%)" in text and "from #3" in text
    assert "Eve\\x1b[2J [blink]x[/]" in text and "\x1b" not in text  # the ESC is shown, not sent
    assert "ddp-7" in text and "All-reduce sums the gradients." in text
