"""The ``uow.standings`` storage port; its SQL implementation is bot/storage/repositories/standings.py."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from bot.core.models import Challenge, StandingRow, Tenant
from bot.core.repositories.reports import ReportRepository
from bot.core.standings import PeriodKey, ScopeKey


@dataclass(frozen=True)
class CompletionRow:
    """A player's completed challenge."""

    day: dt.date
    problems: int
    correct: int
    hints_used: int
    max_answer_s: float


class StandingRepository(ReportRepository, Protocol):
    """Leaderboards, completed challenges, badges and a player's record (``uow.standings``); the team
    report's reads are declared on its base.
    """

    async def leaderboard(
        self, scope: ScopeKey, period: PeriodKey, limit: int, player_pk: int | None
    ) -> tuple[list[StandingRow], StandingRow | None, int]:
        """Top ``limit`` rows, the player's own row (any rank) and the number of ranked players."""
        ...

    async def challenge_standings(self, challenge_id: int) -> list[StandingRow]:
        """Players of one challenge ranked by points then answer time."""
        ...

    async def record_completion(
        self, challenge: Challenge, player_pk: int, row: CompletionRow, points: int
    ) -> bool:
        """Record that a player finished every problem of a challenge; True the first time."""
        ...

    async def completions(
        self, player_pk: int, channel_pk: int | None, tenant: Tenant | None = None
    ) -> list[CompletionRow]:
        """A player's completed challenges (in one channel, or in ``tenant``'s channels, or everywhere)."""
        ...

    async def completion_days(self, channel_pk: int, player_pks: Sequence[int]) -> dict[int, list[dt.date]]:
        """The days each of these players completed a challenge in one channel (one query)."""
        ...

    async def award_badges(
        self, player_pk: int, challenge_id: int, awards: Sequence[tuple[str, str]], at: dt.datetime
    ) -> list[str]:
        """Award (code, scope key) badges; return the codes newly awarded (idempotent)."""
        ...

    async def badge_counts(self, player_pk: int, tenant: Tenant | None) -> dict[str, int]:
        """How many times the player earned each badge in ``tenant`` (None: everywhere)."""
        ...

    async def challenge_badges(self, challenge_id: int) -> list[tuple[int, str]]:
        """(player pk, badge code) awarded on a challenge."""
        ...

    async def player_points(self, player_pk: int, tenant: Tenant | None) -> int:
        """All points a player earned in ``tenant``'s challenges (None: everywhere)."""
        ...

    async def player_daily_points(
        self, player_pk: int, tenant: Tenant | None, since: dt.date
    ) -> dict[dt.date, int]:
        """Points a player earned per challenge day from ``since`` on, in ``tenant``'s challenges (None:
        everywhere); days without points are absent.
        """
        ...

    async def player_accuracy(
        self, player_pk: int, by: str, tenant: Tenant | None
    ) -> list[tuple[str, int, int]]:
        """(topic or kind, finished problems, solved) for a player in ``tenant`` (None: everywhere);
        ``by`` is 'topic' or 'kind'.
        """
        ...
