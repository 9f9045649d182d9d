"""A per-workspace budget of Slack Web API calls, kept on our side so a rush waits here instead of being
answered 429 by Slack (whose ``Retry-After`` outlives a 3-second trigger_id).

Slack limits most Web API methods "per API method per app per workspace" in tiers (Tier 2: 20+ calls a
minute, Tier 3: 50+, Tier 4: 100+, with bursts tolerated; https://api.slack.com/docs/rate-limits, also
https://docs.slack.dev/apis/web-api/rate-limits). The problem flow's methods, ``views.open``,
``views.update``, ``views.push`` and ``users.info``, are Tier 4. Slack does not publish its burst size, so
the budget is a token bucket whose rate and burst are settings (``RANKZERO_SLACK_TIER4_PER_MINUTE``,
default 100, Slack's documented floor; ``RANKZERO_SLACK_TIER4_BURST``, default 20): each method of each
workspace has its own bucket, as Slack counts them.

Two ways to spend it: :meth:`RequestBudget.try_take` never waits (Start decides with it whether a modal can
open within the trigger's 3 s), :meth:`RequestBudget.take` waits its turn, first come first served.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

#: Slack's documented floor for Tier 4 methods (calls a minute per method and workspace).
TIER4_PER_MINUTE = 100
#: How many calls may go at once before the rate applies (Slack: "generous burst behavior", unquantified).
TIER4_BURST = 20
#: What the budget covers (Tier 4 in Slack's method reference); other methods rely on 429 retries.
TIER4_METHODS = frozenset({"views.open", "views.update", "views.push", "users.info"})


@dataclass
class _Bucket:
    burst: float
    per_s: float
    tokens: float
    at: float
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def refill(self, now: float) -> float:
        self.tokens = min(self.burst, self.tokens + (now - self.at) * self.per_s)
        self.at = now
        return self.tokens


class RequestBudget:
    """Token buckets per (workspace, method) for the Tier 4 methods (see the module doc)."""

    def __init__(
        self,
        per_minute: float = TIER4_PER_MINUTE,
        burst: float = TIER4_BURST,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if per_minute <= 0 or burst < 1:
            raise ValueError(
                f"a Slack request budget needs a positive rate and a burst of at least 1 call "
                f"(got {per_minute} a minute, burst {burst}): check RANKZERO_SLACK_TIER4_PER_MINUTE "
                "and RANKZERO_SLACK_TIER4_BURST"
            )
        self.per_minute = per_minute
        self.burst = burst
        self._clock = clock
        self._buckets: dict[tuple[str, str], _Bucket] = {}

    def _bucket(self, workspace: str, method: str) -> _Bucket:
        key = (workspace, method)
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = _Bucket(self.burst, self.per_minute / 60, self.burst, self._clock())
        return bucket

    def available(self, workspace: str, method: str) -> float:
        """How many calls of ``method`` the workspace may make now."""
        return self._bucket(workspace, method).refill(self._clock())

    def try_take(self, workspace: str, method: str, *, keep: float = 0.0) -> bool:
        """Spend one call now if at least ``keep`` more would remain; never waits."""
        bucket = self._bucket(workspace, method)
        if bucket.lock.locked() or bucket.refill(self._clock()) < 1 + keep:
            return False  # someone is queued: do not overtake them
        bucket.tokens -= 1
        return True

    async def take(self, workspace: str, method: str) -> float:
        """Spend one call, waiting (in arrival order) until the budget allows it; returns the wait."""
        if method not in TIER4_METHODS:
            return 0.0
        bucket = self._bucket(workspace, method)
        waited = 0.0
        async with bucket.lock:
            while bucket.refill(self._clock()) < 1:
                pause = (1 - bucket.tokens) / bucket.per_s
                waited += pause
                await asyncio.sleep(pause)
            bucket.tokens -= 1
        return waited

    def queued(self, workspace: str, method: str) -> bool:
        """Whether a call of ``method`` is waiting for the workspace's budget now."""
        return self._bucket(workspace, method).lock.locked()
