"""Fair use of the runner between tenants (issue 24): a tenant's disputes and question previews share one
quota, jobs started per hour and jobs running at once, so that one large tenant cannot starve the others.

The count is kept by the process that runs the jobs (one per Discord shard; Slack requests reach any
replica, so with N replicas a Slack workspace can start up to N times the quota), on the services'
clock; a player's own hourly limit (``RANKZERO_DISPUTES_PER_HOUR``) is kept in the database as before.
"""

from __future__ import annotations

import collections
import contextlib
import datetime as dt
import math
from collections.abc import AsyncIterator

from bot.core.errors import ConfigurationError, RateLimitedError
from bot.core.models import Tenant
from bot.core.ports import Clock

HOUR = dt.timedelta(hours=1)


class RunnerQuota:
    """At most ``per_hour`` runner jobs started in any hour, and ``concurrent`` at once, per tenant."""

    def __init__(self, clock: Clock, *, per_hour: int = 60, concurrent: int = 2) -> None:
        if per_hour < 1 or concurrent < 1:
            raise ConfigurationError(
                "the runner quota per tenant must allow at least 1 job (per hour, at once)"
            )
        self._clock = clock
        self.per_hour = per_hour
        self.concurrent = concurrent
        self._running: collections.Counter[str] = collections.Counter()
        self._started: dict[str, collections.deque[dt.datetime]] = collections.defaultdict(collections.deque)

    def running(self, tenant: Tenant) -> int:
        """How many of the tenant's jobs run now."""
        return self._running[tenant.key]

    @contextlib.asynccontextmanager
    async def job(self, tenant: Tenant) -> AsyncIterator[None]:
        """Hold one of ``tenant``'s job slots for the body; RateLimitedError (nothing run) when the tenant
        has ``concurrent`` jobs running or started ``per_hour`` in the last hour.
        """
        now = self._clock.now()
        started = self._started[tenant.key]
        while started and now - started[0] >= HOUR:
            started.popleft()
        if self._running[tenant.key] >= self.concurrent:
            raise RateLimitedError(
                f"this server/workspace already has {self.concurrent} runner job(s) running: "
                "try again when one has finished"
            )
        if len(started) >= self.per_hour:
            wait = max(1, math.ceil((started[0] + HOUR - now).total_seconds() / 60))
            raise RateLimitedError(
                f"this server/workspace has used its {self.per_hour} runner jobs for this hour: "
                f"try again in about {wait} minute(s)"
            )
        started.append(now)
        self._running[tenant.key] += 1
        try:
            yield
        finally:
            self._running[tenant.key] -= 1
