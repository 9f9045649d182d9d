"""Delivered chat events in the database (table ``delivered_events``): the first process to record an
event's delivery id handles it; a redelivery (Slack's X-Slack-Retry-Num) reaching this or another
process finds the row and is dropped.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import delete
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker

from bot.storage.models import DeliveredEventRow

#: How long a delivery id is remembered (Slack retries three times within minutes).
KEEP = dt.timedelta(hours=1)
#: Old rows are purged on every this many recorded deliveries.
PURGE_EVERY = 200


class SqlDeliveryLog:
    """Records delivery ids; ``first`` says whether this delivery is the first one anywhere."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._sessions = async_sessionmaker(engine, expire_on_commit=False)
        self._recorded = 0

    async def first(self, key: str, now: dt.datetime) -> bool:
        """Record ``key``; False when it was already recorded (a redelivery: drop it)."""
        try:
            async with self._sessions() as s, s.begin():
                s.add(DeliveredEventRow(key=key[:200], seen_at=now))
        except IntegrityError:
            return False
        self._recorded += 1
        if self._recorded % PURGE_EVERY == 0:
            async with self._sessions() as s, s.begin():
                await s.execute(delete(DeliveredEventRow).where(DeliveredEventRow.seen_at < now - KEEP))
        return True
