"""The ``uow.outbox`` storage port; its SQL implementation is bot/storage/repositories/outbox.py."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from bot.core.models import ChannelRef, Tenant

#: What the outbox delivers: a challenge's post, reminder and results; a channel's weekly summary and its
#: weekly team report (opt-in); an admin notice (a question a dispute flagged).
OutboxKind = Literal["challenge", "reminder", "results", "summary", "notice", "team_report"]


@dataclass(frozen=True)
class OutboxItem:
    """One queued post, as a sender that claimed it sees it."""

    id: int
    tenant: Tenant
    channel_pk: int
    #: None for a weekly summary or team report (the channel's week, not one challenge).
    challenge_id: int | None
    kind: OutboxKind
    key: str
    payload: dict[str, Any]
    status: str
    attempts: int
    next_attempt_at: dt.datetime
    last_error: str | None
    #: The cause the admins were last told of.
    told: str | None
    created_at: dt.datetime
    #: How many messages of a post in several parts the platform accepted already (skipped on a retry).
    parts_sent: int = 0
    #: The channel it goes to.
    channel: ChannelRef | None = None


class OutboxRepository(Protocol):
    """Outgoing posts, queued in the transaction that causes them (``uow.outbox``)."""

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
        """Queue a post (due now) and return its id; the key (default ``<challenge id>``) is unique per
        kind, so a post is queued once (a second add raises AlreadyExistsError).
        """
        ...

    async def find(
        self, challenge_id: int | None, kind: OutboxKind, *, key: str | None = None
    ) -> OutboxItem | None:
        """The queued post of that kind for a challenge (or under ``key``), whatever its state."""
        ...

    async def due(self, now: dt.datetime, limit: int, offset: int = 0) -> list[tuple[int, ChannelRef]]:
        """(id, channel) of pending posts due by ``now`` that nobody holds, oldest first (a page of
        ``limit`` from ``offset``).
        """
        ...

    async def purge(self, before: dt.datetime, limit: int) -> int:
        """Delete up to ``limit`` finished (sent or given-up) posts queued before ``before``; how many."""
        ...

    async def claim(
        self, item_id: int, now: dt.datetime, until: dt.datetime, *, any_time: bool = False
    ) -> OutboxItem | None:
        """Take a pending, due, unheld post until ``until`` (one taker wins, on every backend); None when
        it was sent, given up, not due yet (``any_time``: due or not) or held by another sender.
        """
        ...

    async def mark_sent(
        self, item_id: int, now: dt.datetime, message_ref: str | None, *, attempt: int | None = None
    ) -> bool:
        """The platform accepted it; False when it was not pending (nothing changes then). ``attempt``: the
        claim's try number; the row changes only while that claim is the latest (a fence: a sender whose
        lease ran out and was taken over changes nothing).
        """
        ...

    async def mark_parts(
        self, item_id: int, parts_sent: int, *, attempt: int, payload: dict[str, Any] | None = None
    ) -> bool:
        """The platform accepted the first ``parts_sent`` messages of a post in several parts; False (and
        nothing changes) unless the claim of try ``attempt`` still holds the pending row (the fence of
        :meth:`mark_sent`): a sender taken over must stop sending. ``payload``, when given, replaces the
        row's payload in the same write (the split's digest goes with its count).
        """
        ...

    async def mark_failed(
        self,
        item_id: int,
        error: str,
        told: str | None,
        retry_at: dt.datetime | None,
        *,
        attempt: int | None = None,
    ) -> None:
        """Record a failed try: due again at ``retry_at`` (released), or given up when None. ``attempt``:
        the fence of :meth:`mark_sent`.
        """
        ...
