"""Question drafts in the database (table ``question_drafts``): what bot/adapters/drafts.py keeps in memory,
written through so that a restart, a timed-out modal or another process loses no admin's question.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.engine import CursorResult
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker

from bot.storage.models import QuestionDraftRow


@dataclass(frozen=True)
class StoredDraft:
    """One row: an open draft (``outcome`` None) or what became of a closed one."""

    key: str
    owner_id: str
    spec: dict[str, Any]
    created_at: dt.datetime
    outcome: str | None


def _stored(row: QuestionDraftRow) -> StoredDraft:
    return StoredDraft(row.key, row.owner_id, dict(row.spec), row.created_at, row.outcome)


class SqlDraftRepository:
    """Reads and writes drafts, one short transaction per call."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._sessions = async_sessionmaker(engine, expire_on_commit=False)

    async def save(self, key: str, owner_id: str, spec: dict[str, Any], created_at: dt.datetime) -> None:
        """Keep a new draft."""
        async with self._sessions() as s, s.begin():
            s.add(QuestionDraftRow(key=key, owner_id=owner_id, spec=spec, created_at=created_at))

    async def close(self, key: str, outcome: str, at: dt.datetime) -> None:
        """Record what became of a draft (saved, cancelled): its outcome is kept for late clicks."""
        async with self._sessions() as s, s.begin():
            await s.execute(
                update(QuestionDraftRow)
                .where(QuestionDraftRow.key == key)
                .values(outcome=outcome, closed_at=at)
            )

    async def drop(self, key: str) -> None:
        """Forget a draft."""
        async with self._sessions() as s, s.begin():
            await s.execute(delete(QuestionDraftRow).where(QuestionDraftRow.key == key))

    async def find(self, key: str) -> StoredDraft | None:
        """One draft by key (open or closed)."""
        async with self._sessions() as s:
            row = await s.scalar(select(QuestionDraftRow).where(QuestionDraftRow.key == key))
            return _stored(row) if row is not None else None

    async def since(self, created_after: dt.datetime, limit: int) -> list[StoredDraft]:
        """The newest drafts created after ``created_after`` (oldest first), at most ``limit``."""
        async with self._sessions() as s:
            rows = await s.scalars(
                select(QuestionDraftRow)
                .where(QuestionDraftRow.created_at > created_after)
                .order_by(QuestionDraftRow.created_at.desc())
                .limit(limit)
            )
            return [_stored(r) for r in reversed(list(rows))]

    async def purge(self, created_before: dt.datetime) -> int:
        """Delete drafts older than ``created_before`` (expired); returns how many."""
        async with self._sessions() as s, s.begin():
            result = await s.execute(
                delete(QuestionDraftRow).where(QuestionDraftRow.created_at < created_before)
            )
            return result.rowcount if isinstance(result, CursorResult) else 0
