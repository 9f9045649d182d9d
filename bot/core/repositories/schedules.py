"""The ``uow.schedules`` storage port; its SQL implementation is bot/storage/repositories/schedules.py."""

from __future__ import annotations

import datetime as dt
from typing import Protocol

from bot.core.schedule import Schedule, ScheduleConfig


class ScheduleRepository(Protocol):
    """Channel schedules and the scheduler's one-time claims (``uow.schedules``)."""

    async def get_schedule(self, channel_pk: int) -> Schedule | None:
        """A channel's schedule."""
        ...

    async def list_schedules(self) -> list[Schedule]:
        """Every stored schedule (paused ones included)."""
        ...

    async def save_schedule(
        self,
        channel_pk: int,
        config: ScheduleConfig,
        now: dt.datetime,
        expected_version: int | None = None,
    ) -> Schedule:
        """Insert or replace a channel's schedule; the channel takes the schedule's timezone.

        ``expected_version``: the version the caller read (0: none); another stored version raises
        ScheduleConflictError and writes nothing. None: save over whatever is stored.
        """
        ...

    async def claim(self, kind: str, key: str, now: dt.datetime) -> bool:
        """Claim a one-time side effect (unique (kind, key)); True only for the first claimer."""
        ...

    async def claimed_at(self, kind: str, key: str) -> dt.datetime | None:
        """When the claim (kind, key) was made (aware UTC); None when there is none."""
        ...

    async def release(self, kind: str, key: str) -> bool:
        """Remove a claim; True only for the caller that removed it (a later claim of it succeeds again)."""
        ...
