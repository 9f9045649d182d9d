"""Admin notices that repeat: a refused daily post is retried every minute or so (bot/scheduling.py) and
fails the same way until someone grants the permission, so its notice is told once per period, not once
per try. Shared by the Discord and Slack platforms.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class NoticeThrottle:
    """Whether a notice with a given key goes out now: once per ``every_s`` seconds per key.

    Keys older than the period are forgotten on each call, so the table stays as small as the number of
    distinct problems of the last period.
    """

    def __init__(self, every_s: float = 30 * 60, clock: Callable[[], float] = time.monotonic) -> None:
        self.every_s = every_s
        self._clock = clock
        self._told: dict[str, float] = {}

    def first(self, key: str) -> bool:
        """True when ``key`` was not told within the period (and records that it is told now)."""
        now = self._clock()
        self._told = {k: t for k, t in self._told.items() if now - t < self.every_s}
        if key in self._told:
            return False
        self._told[key] = now
        return True
