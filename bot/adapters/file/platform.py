"""FilePlatform: the ChatPlatform port writing one JSON line per post to a file.

Selected by ``RANKZERO_RECORD_FILE``; it serves channels whose platform is ``file``. Each line is written
with a single ``write`` on a file opened in append mode, so lines from several processes never interleave
(POSIX appends of a small buffer are atomic), which lets tests count posts across ``rankzero serve``
processes. Useful too for a dry run of a schedule without any chat token.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

from bot.core.cards import (
    ChallengeCard,
    LeaderboardCard,
    PracticeNudgeCard,
    ReminderCard,
    ResultsCard,
    TeamReportCard,
)
from bot.core.models import ChannelRef, PlayerRef

#: The channel platform name this adapter serves.
PLATFORM = "file"


class FilePlatform:
    """Appends ``{"kind": ..., "pid": ..., "channel": ..., ...}`` lines to ``path``."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _append(self, kind: str, channel: ChannelRef, **data: Any) -> None:
        line = json.dumps({"kind": kind, "pid": os.getpid(), "channel": channel.channel_id, **data}) + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)

    async def _write(self, kind: str, channel: ChannelRef, **data: Any) -> None:
        await asyncio.to_thread(self._append, kind, channel, **data)

    async def post_challenge(self, channel: ChannelRef, card: ChallengeCard) -> str | None:
        """Record the daily post."""
        closes = card.closes_at.isoformat() if card.closes_at else None
        await self._write(
            "post",
            channel,
            challenge_id=card.challenge_id,
            day=card.day.isoformat(),
            closes_at=closes,
            problems=len(card.problems),
        )
        return f"file:{card.challenge_id}"

    async def post_results(self, channel: ChannelRef, card: ResultsCard, message_ref: str | None) -> None:
        """Record the results post."""
        await self._write(
            "results",
            channel,
            challenge_id=card.challenge_id,
            day=card.day.isoformat(),
            players=card.players,
            winners=[w.display_name for w in card.winners],
            message_ref=message_ref,
        )

    async def post_reminder(self, channel: ChannelRef, card: ReminderCard, message_ref: str | None) -> None:
        """Record the closing reminder."""
        await self._write(
            "reminder", channel, challenge_id=card.challenge_id, closes_at=card.closes_at.isoformat()
        )

    async def post_team_report(self, channel: ChannelRef, card: TeamReportCard) -> None:
        """Record the weekly team report (its data: this adapter records posts, it draws nothing)."""
        await self._write(
            "team_report",
            channel,
            title=card.title,
            week_start=card.week_start.isoformat(),
            cells=[(c.topic, c.difficulty, c.first_attempts, c.first_correct) for c in card.cells],
            missed=[m.problem_id for m in card.missed],
            movers=[(m.display_name, m.rank, m.previous_rank) for m in card.movers],
        )

    async def post_weekly_summary(self, channel: ChannelRef, card: LeaderboardCard) -> None:
        """Record the weekly summary."""
        await self._write(
            "summary", channel, title=card.title, rows=[(r.display_name, r.points) for r in card.rows]
        )

    async def send_practice_nudge(self, player: PlayerRef, card: PracticeNudgeCard) -> None:
        """Record the player's daily reminder of due flashcards."""
        record = {"kind": "nudge", "pid": os.getpid(), "user_id": player.user_id, "due": card.due}
        await asyncio.to_thread(self._append_raw, record | {"day": card.day.isoformat()})

    def __getattr__(self, name: str) -> Any:
        # Outbound calls added to the port later (e.g. admin notices) are recorded generically.
        if not name.startswith("post_"):
            raise AttributeError(name)

        async def record(*args: Any, **kwargs: Any) -> None:
            await asyncio.to_thread(
                self._append_raw, {"kind": name[5:], "pid": os.getpid(), "args": [repr(a) for a in args]}
            )

        return record

    def _append_raw(self, data: dict[str, Any]) -> None:
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(data) + "\n")


def read_records(path: Path) -> list[dict[str, Any]]:
    """Every record of a file written by FilePlatform (for tests and dry runs)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
