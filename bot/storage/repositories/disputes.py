"""SqlDisputeRepository: disputes (a runner check of an answer) and the flags they raise on a version."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import delete, func, select, update

from bot.core.models import Tenant
from bot.core.repositories import DisputeRecord, QuestionFlag
from bot.storage.models import DisputeRowModel, QuestionFlagRow, QuestionVersionRow
from bot.storage.sql import SqlRepository


class SqlDisputeRepository(SqlRepository):
    """The DisputeRepository port (bot/core/repositories/disputes.py) over one unit of work."""

    async def add_dispute(self, record: DisputeRecord) -> int:
        """Store a dispute; return its id."""
        row = DisputeRowModel(
            tenant=record.tenant.key,
            player_pk=record.player_pk,
            question_version_id=record.question_version_id,
            problem_id=record.problem_id,
            variant=record.variant,
            code_sha256=record.code_sha256,
            verdict_status=record.verdict_status,
            verification=record.verification,
            matched_letter=record.matched_letter,
            official_letter=record.official_letter,
            explanation=record.explanation[:4000],
            verdict=record.verdict,
            created_at=record.created_at,
        )
        self.s.add(row)
        await self.s.flush()
        return int(row.id)

    async def complete_dispute(self, dispute_id: int, record: DisputeRecord) -> None:
        """Fill a reserved dispute with its outcome."""
        await self.s.execute(
            update(DisputeRowModel)
            .where(DisputeRowModel.id == dispute_id)
            .values(
                verdict_status=record.verdict_status,
                verification=record.verification,
                matched_letter=record.matched_letter,
                official_letter=record.official_letter,
                explanation=record.explanation[:4000],
                verdict=record.verdict,
            )
        )

    async def delete_dispute(self, dispute_id: int) -> None:
        """Drop a reservation whose run never happened."""
        await self.s.execute(delete(DisputeRowModel).where(DisputeRowModel.id == dispute_id))

    async def count_disputes_since(self, player_pk: int, since: dt.datetime) -> int:
        """Runs a player asked for since ``since``."""
        d = DisputeRowModel
        n = await self.s.scalar(
            select(func.count()).select_from(d).where(d.player_pk == player_pk, d.created_at >= since)
        )
        return int(n or 0)

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
        """Flag a version once per tenant; (id, created)."""
        stmt = (
            self._db.insert(QuestionFlagRow)
            .values(
                tenant=tenant.key,
                question_id=question_id,
                question_version_id=version_id,
                dispute_id=dispute_id,
                official_letter=official_letter,
                matched_letter=matched_letter,
                explanation=explanation[:4000],
                status="open",
                created_at=now,
            )
            .on_conflict_do_nothing()
            .returning(QuestionFlagRow.id)
        )
        new_id = await self.s.scalar(stmt)
        if new_id is not None:
            return int(new_id), True
        existing = await self.s.scalar(
            select(QuestionFlagRow.id).where(
                QuestionFlagRow.tenant == tenant.key, QuestionFlagRow.question_version_id == version_id
            )
        )
        return int(existing or 0), False

    async def flags(self, tenant: Tenant | None, status: str | None) -> list[QuestionFlag]:
        """The tenant's flags (None: all), newest first."""
        f = QuestionFlagRow
        stmt = select(f, QuestionVersionRow.version).join(
            QuestionVersionRow, QuestionVersionRow.id == f.question_version_id
        )
        if tenant is not None:
            stmt = stmt.where(f.tenant == tenant.key)
        if status is not None:
            stmt = stmt.where(f.status == status)
        rows = (await self.s.execute(stmt.order_by(f.id.desc()))).tuples()
        return [
            QuestionFlag(
                r.id,
                r.question_id,
                int(v),
                r.official_letter,
                r.matched_letter,
                r.explanation,
                r.status,
                r.created_at,
            )
            for r, v in rows
        ]

    async def resolve_flags(self, tenant: Tenant | None, question_id: str, now: dt.datetime) -> int:
        """Resolve a question's open flags of the tenant (None: of every tenant)."""
        f = QuestionFlagRow
        stmt = update(f).where(f.question_id == question_id, f.status == "open")
        if tenant is not None:
            stmt = stmt.where(f.tenant == tenant.key)
        result = await self.s.execute(stmt.values(status="resolved", resolved_at=now))
        return int(result.rowcount or 0)  # type: ignore[attr-defined]
