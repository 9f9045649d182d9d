"""How many pooled connections an engine has checked out, now and at most (the fan-out test and benchmark)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine


class PoolWatch:
    """Counts an engine's pool checkouts and checkins from the moment it is made."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.checked_out = 0
        self.peak = 0
        event.listen(engine.sync_engine, "checkout", self._out)
        event.listen(engine.sync_engine, "checkin", self._in)

    def _out(self, *_: Any) -> None:
        self.checked_out += 1
        self.peak = max(self.peak, self.checked_out)

    def _in(self, *_: Any) -> None:
        self.checked_out -= 1
