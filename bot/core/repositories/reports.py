"""What a channel's weekly team report reads (issue 30), a base of the ``uow.standings`` port (the unit
of work stays narrow); its SQL implementation is bot/storage/repositories/reports.py.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Protocol

from bot.core.cards import Mover
from bot.core.models import Tenant
from bot.core.standings import PeriodKey


@dataclass(frozen=True)
class ProblemFirstTries:
    """The first attempts of a channel's players on one problem of a week."""

    problem_id: int
    question_id: str
    topic: str
    difficulty: str
    #: Players whose first attempt was recorded, and those of them right at once.
    first_attempts: int
    first_correct: int
    #: The explanation of the question version the problem asked (None: it has none).
    explanation: str | None


class ReportRepository(Protocol):
    """What a channel's weekly team report reads (``uow.standings``); every read is kept to ``tenant``: a
    channel of another tenant reads as empty.
    """

    async def first_tries(
        self, tenant: Tenant, channel_pk: int, first_day: dt.date, last_day: dt.date, limit: int
    ) -> list[ProblemFirstTries]:
        """Per problem of the channel's challenges dated ``first_day``..``last_day`` (local dates, both
        included) with at least one first attempt: its first attempts and how many were right, by problem
        id; at most ``limit`` problems.
        """
        ...

    async def movers(
        self, tenant: Tenant, channel_pk: int, week: PeriodKey, previous: PeriodKey, limit: int
    ) -> tuple[list[Mover], list[Mover]]:
        """The channel's weekly leaderboard of ``week`` against ``previous``'s (ranks as the leaderboard
        ranks: points, then less answer time, then player): up to ``limit`` risers (most places gained
        first, then best rank) and up to ``limit`` newcomers (ranked in ``week`` only, best rank first).
        """
        ...
