"""slack_sdk's async SQLAlchemy OAuth stores, hardened: a public install page, tokens encrypted at rest.

:class:`PurgingOAuthStateStore`: slack_sdk's state store expires a ``state`` (it is refused after
``expiration_seconds``) but never deletes one that was not used, and ``/slack/install`` writes one per
unauthenticated request. Each new state first deletes the expired ones, so the table holds at most what
was issued within one expiry period (and the HTTP server limits that per client).

:class:`EncryptedInstallationStore`: slack_sdk's installation store with every bot, user and refresh token
encrypted (bot/secret_box.py, ``RANKZERO_SECRET_KEY``); ``rankzero secrets rotate`` re-encrypts them.
"""

from __future__ import annotations

import copy
import datetime as dt
import logging
from collections.abc import Callable
from typing import Any, TypeVar

import sqlalchemy as sa
from slack_sdk.oauth.installation_store.models.bot import Bot
from slack_sdk.oauth.installation_store.models.installation import Installation
from slack_sdk.oauth.installation_store.sqlalchemy import AsyncSQLAlchemyInstallationStore
from slack_sdk.oauth.state_store.sqlalchemy import AsyncSQLAlchemyOAuthStateStore
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.secret_box import PREFIX, SecretBox

log = logging.getLogger(__name__)
T = TypeVar("T", Installation, Bot)


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


#: The token columns of slack_sdk's tables that are stored encrypted (table -> columns).
TOKEN_COLUMNS: dict[str, tuple[str, ...]] = {
    "slack_installations": ("bot_token", "bot_refresh_token", "user_token", "user_refresh_token"),
    "slack_bots": ("bot_token", "bot_refresh_token"),
}


def _with_tokens(entity: T, change: Callable[[str | None, str], str | None]) -> T:
    """A copy of an Installation or Bot with each token attribute it has passed through ``change``."""
    out = copy.copy(entity)
    for name in ("bot_token", "bot_refresh_token", "user_token", "user_refresh_token"):
        if hasattr(out, name):
            setattr(out, name, change(getattr(out, name), name))
    return out


class EncryptedInstallationStore(AsyncSQLAlchemyInstallationStore):
    """slack_sdk's async SQLAlchemy installation store whose token columns hold ciphertext.

    Everything goes through slack_sdk's own save and find (its queries, its "latest bot" rules); only the
    token attributes are sealed on the way in and opened on the way out. ``box.seal`` leaves an encrypted
    value alone, so slack_sdk's ``async_save`` calling ``async_save_bot`` with the already sealed
    installation does not encrypt twice; ``box.open`` returns a plaintext value (a row from before
    encryption) as it is, and ``rankzero secrets rotate`` encrypts those.
    """

    def __init__(self, *, client_id: str, engine: AsyncEngine, box: SecretBox) -> None:
        super().__init__(client_id=client_id, engine=engine)
        self.box = box

    def _seal(self, entity: T) -> T:
        return _with_tokens(entity, lambda value, _: self.box.seal(value))

    def _open(self, entity: T) -> T:
        return _with_tokens(entity, lambda value, name: self.box.open(value, f"a Slack {name}"))

    async def async_save(self, installation: Installation) -> None:
        """Save an install (tokens sealed)."""
        await super().async_save(self._seal(installation))

    async def async_save_bot(self, bot: Bot) -> None:
        """Save a bot (tokens sealed)."""
        await super().async_save_bot(self._seal(bot))

    async def async_find_bot(
        self, *, enterprise_id: str | None, team_id: str | None, is_enterprise_install: bool | None = False
    ) -> Bot | None:
        """The workspace's latest bot, tokens opened."""
        bot = await super().async_find_bot(
            enterprise_id=enterprise_id, team_id=team_id, is_enterprise_install=is_enterprise_install
        )
        return None if bot is None else self._open(bot)

    async def async_find_installation(
        self,
        *,
        enterprise_id: str | None,
        team_id: str | None,
        user_id: str | None = None,
        is_enterprise_install: bool | None = False,
    ) -> Installation | None:
        """The latest install, tokens opened."""
        found = await super().async_find_installation(
            enterprise_id=enterprise_id,
            team_id=team_id,
            user_id=user_id,
            is_enterprise_install=is_enterprise_install,
        )
        return None if found is None else self._open(found)

    def _tables(self) -> list[tuple[sa.Table, tuple[str, ...]]]:
        return [
            (self.installations, TOKEN_COLUMNS["slack_installations"]),
            (self.bots, TOKEN_COLUMNS["slack_bots"]),
        ]

    async def check_key(self) -> None:
        """:class:`SecretKeyError` unless the key opens the stored tokens (one sealed value per table is
        tried: a wrong key is found at start, not at the first post).
        """
        async with self.engine.connect() as conn:
            for table, _ in self._tables():
                row = (
                    await conn.execute(
                        sa.select(table.c.bot_token).where(table.c.bot_token.like(f"{PREFIX}%")).limit(1)
                    )
                ).first()
                if row is not None:
                    self.box.open(row[0], f"the Slack bot tokens in {table.name}")

    async def reseal_all(self) -> tuple[int, int]:
        """Re-encrypt every stored token with the first key, in one transaction (all or nothing).

        Every client id's rows, not only this one's. Returns (tokens re-encrypted, of which were
        plaintext before).
        """
        total = plaintext = 0
        async with self.engine.begin() as conn:
            for table, columns in self._tables():
                rows = (await conn.execute(sa.select(table.c.id, *(table.c[c] for c in columns)))).all()
                for row in rows:
                    values: dict[str, Any] = {}
                    for column, value in zip(columns, row[1:], strict=True):
                        if value is None:
                            continue
                        plaintext += not self.box.is_sealed(value)
                        values[column] = self.box.reseal(
                            value, f"the Slack {column} of {table.name} row {row[0]}"
                        )
                    if values:
                        total += len(values)
                        await conn.execute(table.update().where(table.c.id == row[0]).values(**values))
        return total, plaintext
