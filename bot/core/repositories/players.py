"""The ``uow.players`` storage port; its SQL implementation is bot/storage/repositories/players.py."""

from __future__ import annotations

from typing import Protocol

from bot.core.models import ChannelRef, PlayerRef


class PlayerRepository(Protocol):
    """Players and channels (``uow.players``)."""

    async def ensure_channel(self, ref: ChannelRef) -> int:
        """The channel's primary key, creating the row if needed."""
        ...

    async def ensure_player(self, ref: PlayerRef, *, likely_new: bool = False) -> int:
        """The player's primary key, creating the row (or refreshing the display name) if needed.

        ``likely_new`` says the caller has just seen no such player: insert first, look up on conflict.
        """
        ...

    async def player_name(self, player_pk: int) -> str:
        """A player's display name."""
        ...
