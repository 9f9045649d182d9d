"""Dropping redelivered events, the same for every platform.

A platform that did not see our answer in time delivers the event again (Slack: ``X-Slack-Retry-Num``),
possibly to another process behind the same URL. :class:`Redeliveries` keeps the delivery keys it saw in
this process (a bounded memory: the fast path) and, for durable keys, records them in the database
(``delivered_events``, through a :class:`DeliveryLog`): the first process to record a key handles the
event, every other delivery of it, here or elsewhere, before or after a restart, is dropped.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections import OrderedDict
from typing import Protocol

from bot.core.ports import Clock

log = logging.getLogger(__name__)

#: How many delivery keys a process remembers.
REMEMBER = 10_000


class DeliveryLog(Protocol):
    """Delivery keys recorded where every process sees them (bot/storage/repositories/deliveries.py)."""

    async def first(self, key: str, now: dt.datetime) -> bool:
        """Record ``key``; False when some process recorded it before."""
        ...


class Redeliveries:
    """Says whether a delivery is the first one of its event (and remembers it)."""

    def __init__(
        self, clock: Clock, delivery_log: DeliveryLog | None = None, *, remember: int = REMEMBER
    ) -> None:
        self.clock = clock
        #: The shared record (None until the adapter starts, or where no database is wired).
        self.log = delivery_log
        self._remember = remember
        self._seen: OrderedDict[str, None] = OrderedDict()

    def first_here(self, key: str) -> bool:
        """True the first time this process sees ``key`` (later calls: a redelivery to drop)."""
        if key in self._seen:
            return False
        self._seen[key] = None
        while len(self._seen) > self._remember:
            self._seen.popitem(last=False)
        return True

    async def first(self, key: str) -> bool:
        """True when no process handled ``key`` yet (recording it now, here and in the database).

        When the database cannot be asked the event is handled: a duplicate Home tab is harmless, a lost
        event is not.
        """
        if not self.first_here(key):
            return False
        if self.log is None:
            return True
        try:
            return await self.log.first(key, self.clock.now())
        except Exception:
            log.exception("the delivery log failed; handling %s anyway", key)
            return True

    def forget_local(self) -> None:
        """Drop this process's memory of deliveries (what a restart does; the database keeps them)."""
        self._seen.clear()
