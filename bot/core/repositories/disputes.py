"""The ``uow.disputes`` storage port; its SQL implementation is bot/storage/repositories/disputes.py."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Protocol

from bot.core.models import Tenant


@dataclass(frozen=True)
class DisputeRecord:
    """What a dispute stores: who asked, what ran, and how it compared with the official answer."""

    player_pk: int
    question_version_id: int
    problem_id: int | None
    variant: bool
    code_sha256: str
    verdict_status: str
    verification: str
    matched_letter: str | None
    official_letter: str | None
    explanation: str
    verdict: dict[str, Any]
    created_at: dt.datetime
    #: Where it was asked: the tenant of the problem's channel.
    tenant: Tenant


@dataclass(frozen=True)
class QuestionFlag:
    """A question version whose official answer the runner contradicted."""

    id: int
    question_id: str
    question_version: int
    official_letter: str | None
    matched_letter: str | None
    explanation: str
    status: str
    created_at: dt.datetime


class DisputeRepository(Protocol):
    """Disputes and the flags they raise on a question version (``uow.disputes``)."""

    async def add_dispute(self, record: DisputeRecord) -> int:
        """Store a dispute; return its id."""
        ...

    async def complete_dispute(self, dispute_id: int, record: DisputeRecord) -> None:
        """Fill a reserved dispute with its outcome."""
        ...

    async def delete_dispute(self, dispute_id: int) -> None:
        """Drop a reservation whose run never happened (the runner could not answer)."""
        ...

    async def count_disputes_since(self, player_pk: int, since: dt.datetime) -> int:
        """How many runs a player asked for since ``since`` (the rate limit's count)."""
        ...

    async def flag_question(
        self,
        tenant: Tenant,
        question_id: str,
        version_id: int,
        dispute_id: int | None,
        official_letter: str | None,
        matched_letter: str | None,
        explanation: str,
        now: dt.datetime,
    ) -> tuple[int, bool]:
        """Flag a version for ``tenant`` (once per tenant): (flag id, True if this call created it)."""
        ...

    async def flags(self, tenant: Tenant | None, status: str | None) -> list[QuestionFlag]:
        """``tenant``'s flags (None: every tenant's, for the operator), newest first (``status`` 'open' or
        'resolved', or None for all).
        """
        ...

    async def resolve_flags(self, tenant: Tenant | None, question_id: str, now: dt.datetime) -> int:
        """Resolve the open flags of a question raised in ``tenant`` (None: in every tenant, when the
        operator corrected the shared question); return how many.
        """
        ...
