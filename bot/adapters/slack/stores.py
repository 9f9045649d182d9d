"""slack_sdk's async SQLAlchemy OAuth stores, hardened for a public install page.

:class:`PurgingOAuthStateStore`: slack_sdk's state store expires a ``state`` (it is refused after
``expiration_seconds``) but never deletes one that was not used, and ``/slack/install`` writes one per
unauthenticated request. Each new state first deletes the expired ones, so the table holds at most what
was issued within one expiry period (and the HTTP server limits that per client).
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from slack_sdk.oauth.state_store.sqlalchemy import AsyncSQLAlchemyOAuthStateStore

log = logging.getLogger(__name__)


class PurgingOAuthStateStore(AsyncSQLAlchemyOAuthStateStore):
    """slack_sdk's async state store that deletes expired states whenever it issues a new one."""

    async def purge_expired(self) -> int:
        """Delete every state past its expiry; returns how many were deleted."""
        # slack_sdk stores expire_at as naive UTC (its own writes do the same conversion).
        now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
        table = self.oauth_states
        async with self.engine.begin() as conn:
            result = await conn.execute(table.delete().where(table.c.expire_at <= now))
        purged = int(result.rowcount or 0)
        if purged:
            log.info("deleted %d expired Slack OAuth states", purged)
        return purged

    async def async_issue(self, *args: Any, **kwargs: Any) -> str:
        """A new one-use state (after deleting the expired ones)."""
        await self.purge_expired()
        return str(await super().async_issue(*args, **kwargs))
