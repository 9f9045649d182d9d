"""SqlPlayerRepository: players and channels, the platform identities every other row hangs off."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import select, update

from bot.core.models import ChannelRef, PlayerRef
from bot.storage.models import ChannelRow, PlayerRow
from bot.storage.sql import INSERT_OR_NOTHING, SqlRepository, upsert_sql

_PLAYER_COLUMNS = ("platform", "user_id", "display_name", "created_at")


class SqlPlayerRepository(SqlRepository):
    """The PlayerRepository port (bot/core/repositories/players.py) over one unit of work."""

    async def ensure_channel(self, ref: ChannelRef) -> int:
        """The channel's primary key, creating the row if needed."""
        key = (ChannelRow.platform == ref.platform) & (ChannelRow.workspace_id == ref.workspace_id)
        key &= ChannelRow.channel_id == ref.channel_id
        pk = await self.s.scalar(select(ChannelRow.id).where(key))
        if pk is not None:
            return pk
        stmt = self._db.insert(ChannelRow).values(
            platform=ref.platform,
            workspace_id=ref.workspace_id,
            channel_id=ref.channel_id,
            name=ref.name,
            timezone=ref.timezone,
            created_at=dt.datetime.now(dt.UTC),
        )
        await self.s.execute(stmt.on_conflict_do_nothing())
        pk = await self.s.scalar(select(ChannelRow.id).where(key))
        assert pk is not None
        return int(pk)

    async def ensure_player(self, ref: PlayerRef, *, likely_new: bool = False) -> int:
        """The player's primary key, creating it or refreshing the display name.

        ``likely_new``: the caller just read that the player does not exist (the start path's context),
        so try the INSERT first and skip the lookup.
        """
        key = (PlayerRow.platform == ref.platform) & (PlayerRow.user_id == ref.user_id)
        if not likely_new:
            row = (await self.s.execute(select(PlayerRow.id, PlayerRow.display_name).where(key))).first()
            if row is not None:
                if row.display_name != ref.display_name:
                    await self.s.execute(
                        update(PlayerRow).where(PlayerRow.id == row.id).values(display_name=ref.display_name)
                    )
                return int(row.id)
        stmt = self._db.cached(
            "insert_player", lambda _: upsert_sql(PlayerRow.__table__, _PLAYER_COLUMNS, INSERT_OR_NOTHING)
        )
        params = {
            "platform": ref.platform,
            "user_id": ref.user_id,
            "display_name": ref.display_name,
            "created_at": dt.datetime.now(dt.UTC),
        }
        pk = (await self._db.core(stmt, params)).scalar()
        if pk is None:  # created concurrently (or it existed after all): read it
            return await self.ensure_player(ref)
        return int(pk)

    async def player_name(self, player_pk: int) -> str:
        """A player's display name."""
        return (await self.s.scalar(select(PlayerRow.display_name).where(PlayerRow.id == player_pk))) or "?"
