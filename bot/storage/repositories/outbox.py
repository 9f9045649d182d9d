"""SqlOutboxRepository: outgoing posts queued with the state change that causes them (table ``outbox``).

Claiming is one conditional ``UPDATE`` (``status = 'pending' AND next_attempt_at <= now AND (claimed_until
IS NULL OR claimed_until <= now)``): on PostgreSQL a second claimer's UPDATE waits for the first one's
commit and re-checks the condition, on SQLite writers are serialized, so exactly one claimer sees a row
count of 1 on either backend. No ``SELECT ... FOR UPDATE SKIP LOCKED`` (SQLite has none), and no lock is
held while the platform call runs: the lease (``claimed_until``) is what keeps others off meanwhile.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, cast

from sqlalchemy import ColumnElement, delete, or_, select, true, update
from sqlalchemy.engine import CursorResult
from sqlalchemy.exc import IntegrityError

from bot.core.models import ChannelRef, Tenant
from bot.core.ports import AlreadyExistsError
from bot.core.repositories.outbox import OutboxItem, OutboxKind
from bot.storage.mapping import to_channel_ref
from bot.storage.models import ChannelRow, OutboxRow
from bot.storage.sql import SqlRepository


def _item(row: OutboxRow, channel: ChannelRef | None = None) -> OutboxItem:
    return OutboxItem(
        id=row.id,
        tenant=Tenant.from_key(row.tenant),
        channel_pk=row.channel_pk,
        challenge_id=row.challenge_id,
        kind=cast(OutboxKind, row.kind),
        key=row.key,
        payload=dict(row.payload),
        status=row.status,
        attempts=row.attempts,
        next_attempt_at=row.next_attempt_at,
        last_error=row.last_error,
        told=row.told,
        created_at=row.created_at,
        parts_sent=row.parts_sent,
        channel=channel,
    )


def _count(result: Any) -> int:
    return result.rowcount if isinstance(result, CursorResult) else 0


class SqlOutboxRepository(SqlRepository):
    """The OutboxRepository port (bot/core/repositories/outbox.py) over one unit of work."""

    async def add(
        self,
        tenant: Tenant,
        channel_pk: int,
        challenge_id: int | None,
        kind: OutboxKind,
        payload: dict[str, Any],
        now: dt.datetime,
        *,
        key: str | None = None,
    ) -> int:
        """Queue a post, due now."""
        row = OutboxRow(
            tenant=tenant.key,
            channel_pk=channel_pk,
            challenge_id=challenge_id,
            kind=kind,
            key=key if key is not None else str(challenge_id),
            payload=payload,
            status="pending",
            attempts=0,
            parts_sent=0,
            next_attempt_at=now,
            created_at=now,
        )
        try:
            # A savepoint: a duplicate must not abort the caller's transaction (PostgreSQL would).
            async with self.s.begin_nested():
                self.s.add(row)
                await self.s.flush()
        except IntegrityError:
            raise AlreadyExistsError(f"the {kind} {key or challenge_id} is queued already") from None
        return row.id

    async def find(
        self, challenge_id: int | None, kind: OutboxKind, *, key: str | None = None
    ) -> OutboxItem | None:
        """The queued post of that kind for a challenge (or under ``key``)."""
        wanted = key if key is not None else str(challenge_id)
        row = await self.s.scalar(select(OutboxRow).where(OutboxRow.kind == kind, OutboxRow.key == wanted))
        return _item(row) if row is not None else None

    async def due(self, now: dt.datetime, limit: int, offset: int = 0) -> list[tuple[int, ChannelRef]]:
        """Pending, due and unheld posts, oldest first, with their channels (a page)."""
        rows = await self.s.execute(
            select(OutboxRow.id, ChannelRow)
            .join(ChannelRow, ChannelRow.id == OutboxRow.channel_pk)
            .where(
                OutboxRow.status == "pending",
                OutboxRow.next_attempt_at <= now,
                or_(OutboxRow.claimed_until.is_(None), OutboxRow.claimed_until <= now),
            )
            .order_by(OutboxRow.next_attempt_at, OutboxRow.id)
            .limit(limit)
            .offset(offset)
        )
        return [(int(i), to_channel_ref(ch)) for i, ch in rows.tuples()]

    async def purge(self, before: dt.datetime, limit: int) -> int:
        """Finished posts queued before ``before``, at most ``limit`` per call (a bounded delete)."""
        done = (
            select(OutboxRow.id)
            .where(OutboxRow.status != "pending", OutboxRow.created_at < before)
            .order_by(OutboxRow.id)
            .limit(limit)
        )
        result = await self.s.execute(
            delete(OutboxRow).where(OutboxRow.id.in_(done)).execution_options(synchronize_session=False)
        )
        return _count(result)

    async def claim(
        self, item_id: int, now: dt.datetime, until: dt.datetime, *, any_time: bool = False
    ) -> OutboxItem | None:
        """The conditional UPDATE of the module doc; the claimed row, or None."""
        due = true() if any_time else OutboxRow.next_attempt_at <= now
        result = await self.s.execute(
            update(OutboxRow)
            .where(
                OutboxRow.id == item_id,
                OutboxRow.status == "pending",
                due,
                or_(OutboxRow.claimed_until.is_(None), OutboxRow.claimed_until <= now),
            )
            .values(claimed_until=until, attempts=OutboxRow.attempts + 1)
            .execution_options(synchronize_session=False)
        )
        if _count(result) != 1:
            return None
        row = await self.s.get(OutboxRow, item_id, populate_existing=True)
        if row is None:
            return None
        channel = await self.s.get(ChannelRow, row.channel_pk)
        return _item(row, to_channel_ref(channel) if channel is not None else None)

    async def mark_sent(
        self, item_id: int, now: dt.datetime, message_ref: str | None, *, attempt: int | None = None
    ) -> bool:
        """Sent: never claimed again (fenced by ``attempt``, see the port)."""
        result = await self.s.execute(
            update(OutboxRow)
            .where(OutboxRow.id == item_id, OutboxRow.status == "pending", *_fence(attempt))
            .values(status="sent", sent_at=now, message_ref=message_ref, claimed_until=None, last_error=None)
            .execution_options(synchronize_session=False)
        )
        return _count(result) == 1

    async def mark_parts(
        self, item_id: int, parts_sent: int, *, attempt: int, payload: dict[str, Any] | None = None
    ) -> bool:
        """The first ``parts_sent`` messages were accepted (fenced by ``attempt``, see the port)."""
        values: dict[str, Any] = {"parts_sent": parts_sent}
        if payload is not None:
            values["payload"] = payload
        result = await self.s.execute(
            update(OutboxRow)
            .where(OutboxRow.id == item_id, OutboxRow.status == "pending", *_fence(attempt))
            .values(**values)
            .execution_options(synchronize_session=False)
        )
        return _count(result) == 1

    async def mark_failed(
        self,
        item_id: int,
        error: str,
        told: str | None,
        retry_at: dt.datetime | None,
        *,
        attempt: int | None = None,
    ) -> None:
        """Released for a retry at ``retry_at``, or given up (``failed``) when None (fenced: ``attempt``)."""
        values: dict[str, Any] = {"last_error": error[:500], "told": told[:200] if told else None}
        values["claimed_until"] = None
        if retry_at is None:
            values["status"] = "failed"
        else:
            values["next_attempt_at"] = retry_at
        await self.s.execute(
            update(OutboxRow)
            .where(OutboxRow.id == item_id, OutboxRow.status == "pending", *_fence(attempt))
            .values(**values)
            .execution_options(synchronize_session=False)
        )


def _fence(attempt: int | None) -> list[ColumnElement[bool]]:
    """Only the latest claim may change the row: each claim counts one more attempt."""
    return [] if attempt is None else [OutboxRow.attempts == attempt]
