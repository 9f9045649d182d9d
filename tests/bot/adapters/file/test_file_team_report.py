"""The file platform records the weekly team report (issue 30) as one line of JSON."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from bot.adapters.file.platform import FilePlatform
from bot.core.cards import HeatCell, MissedQuestion, Mover, TeamReportCard
from bot.core.models import ChannelRef


async def test_file_platform_records_the_team_report(tmp_path: Path) -> None:
    path = tmp_path / "posts.jsonl"
    card = TeamReportCard(
        "Weekly",
        dt.date(2026, 11, 16),
        (HeatCell("DDP", "advanced", 8, 2),),
        (MissedQuestion(7, "ddp-7", "DDP", 8, 2, "why"),),
        (Mover("Eve", 30, 1, None),),
    )

    await FilePlatform(path).post_team_report(ChannelRef("file", "local", "c1", "c1", "UTC"), card)

    [line] = [json.loads(x) for x in path.read_text().splitlines()]
    assert line["kind"] == "team_report" and line["channel"] == "c1"
    assert line["week_start"] == "2026-11-16" and line["missed"] == [7]
    assert line["cells"] == [["DDP", "advanced", 8, 2]] and line["movers"] == [["Eve", 1, None]]
