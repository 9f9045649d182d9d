"""The port question drafts are written through (bot/adapters/drafts.py's DraftStore keeps them in memory;
bot/storage/repositories/drafts.py's SqlDraftRepository implements it).

It lives here, beside the other storage ports, so that bot/services.py can name it without importing an
adapter; drafts are reached directly by the store, not through the unit of work.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Protocol


class StoredDraftLike(Protocol):
    """What a repository returns for one draft (read-only, so a frozen dataclass fits)."""

    @property
    def key(self) -> str:
        """The draft's key."""
        ...

    @property
    def owner_id(self) -> str:
        """Who may save it."""
        ...

    @property
    def spec(self) -> dict[str, Any]:
        """The question spec."""
        ...

    @property
    def created_at(self) -> dt.datetime:
        """When it was made."""
        ...

    @property
    def outcome(self) -> str | None:
        """What became of it (None while open)."""
        ...


class DraftRepository(Protocol):
    """Where drafts are written through (bot/storage/repositories/drafts.py: SqlDraftRepository)."""

    async def save(self, key: str, owner_id: str, spec: dict[str, Any], created_at: dt.datetime) -> None:
        """Keep a new draft."""
        ...

    async def close(self, key: str, outcome: str, at: dt.datetime) -> None:
        """Record a draft's outcome."""
        ...

    async def drop(self, key: str) -> None:
        """Forget a draft."""
        ...

    async def find(self, key: str) -> StoredDraftLike | None:
        """One draft by key."""
        ...

    async def since(self, created_after: dt.datetime, limit: int) -> list[Any]:
        """Recent drafts, oldest first."""
        ...

    async def purge(self, created_before: dt.datetime) -> int:
        """Delete expired drafts."""
        ...
