"""Admins' question forms in the database (table ``form_drafts``): the port is
bot/core/repositories/form_drafts.py. One short transaction per call; every query names the tenant and the
owner, so nothing of one server or one admin reaches another.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import and_, delete, select
from sqlalchemy.engine import CursorResult
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker

from bot.core.repositories.form_drafts import MAX_FORM_DRAFTS, FormDraft
from bot.storage.models import FormDraftRow


def _draft(row: FormDraftRow) -> FormDraft:
    return FormDraft(
        nonce=row.nonce,
        tenant=row.tenant,
        owner_id=row.owner_id,
        question_id=row.question_id,
        kind=row.kind,
        topic=row.topic,
        difficulty=row.difficulty,
        updated_at=row.updated_at,
        expires_at=row.expires_at,
        inputs={str(k): str(v) for k, v in dict(row.inputs).items()},
        error=row.error,
        submitted_at=row.submitted_at,
    )


def _copy(draft: FormDraft, row: FormDraftRow) -> None:
    row.question_id = draft.question_id
    row.kind = draft.kind
    row.topic = draft.topic
    row.difficulty = draft.difficulty
    row.inputs = dict(draft.inputs)
    row.error = draft.error
    row.submitted_at = draft.submitted_at
    row.updated_at = draft.updated_at
    row.expires_at = draft.expires_at


class SqlFormDraftRepository:
    """Reads and writes form drafts (implements FormDraftRepository)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._sessions = async_sessionmaker(engine, expire_on_commit=False)

    async def save(self, draft: FormDraft) -> None:
        """Insert or update the draft under its nonce; a nonce of another tenant or owner is refused
        (ValueError). Trims the owner's oldest past MAX_FORM_DRAFTS and drops every expired draft.
        """
        try:
            await self._save(draft)
        except IntegrityError:
            # Two submissions of one form raced to insert it: the row exists now, update it.
            await self._save(draft)

    async def _save(self, draft: FormDraft) -> None:
        async with self._sessions() as s, s.begin():
            row = await s.get(FormDraftRow, draft.nonce, with_for_update=True)
            if row is None:
                row = FormDraftRow(nonce=draft.nonce, tenant=draft.tenant, owner_id=draft.owner_id)
                _copy(draft, row)
                s.add(row)
            elif (row.tenant, row.owner_id) != (draft.tenant, draft.owner_id):
                raise ValueError("a form draft's nonce belongs to another tenant or owner")
            else:
                _copy(draft, row)
            await s.flush()
            surplus = await s.scalars(
                select(FormDraftRow.nonce)
                .where(FormDraftRow.tenant == draft.tenant, FormDraftRow.owner_id == draft.owner_id)
                .order_by(FormDraftRow.updated_at.desc(), FormDraftRow.nonce.desc())
                .offset(MAX_FORM_DRAFTS)
            )
            stale = list(surplus)
            if stale:
                await s.execute(delete(FormDraftRow).where(FormDraftRow.nonce.in_(stale)))
            await s.execute(delete(FormDraftRow).where(FormDraftRow.expires_at <= draft.updated_at))

    async def find(self, tenant: str, owner_id: str, nonce: str, now: dt.datetime) -> FormDraft | None:
        """The owner's unexpired draft under ``nonce`` in ``tenant``."""
        async with self._sessions() as s:
            row = await s.scalar(
                select(FormDraftRow).where(
                    FormDraftRow.nonce == nonce,
                    FormDraftRow.tenant == tenant,
                    FormDraftRow.owner_id == owner_id,
                    FormDraftRow.expires_at > now,
                )
            )
            return _draft(row) if row is not None else None

    async def latest(self, tenant: str, owner_id: str, now: dt.datetime) -> FormDraft | None:
        """The owner's most recently submitted unexpired draft in ``tenant``."""
        async with self._sessions() as s:
            row = await s.scalar(
                select(FormDraftRow)
                .where(
                    and_(
                        FormDraftRow.tenant == tenant,
                        FormDraftRow.owner_id == owner_id,
                        FormDraftRow.expires_at > now,
                        FormDraftRow.submitted_at.is_not(None),
                    )
                )
                .order_by(FormDraftRow.updated_at.desc(), FormDraftRow.nonce.desc())
                .limit(1)
            )
            return _draft(row) if row is not None else None

    async def discard(self, tenant: str, owner_id: str, question_id: str) -> int:
        """Delete the owner's drafts of ``question_id`` in ``tenant``; how many."""
        async with self._sessions() as s, s.begin():
            result = await s.execute(
                delete(FormDraftRow).where(
                    FormDraftRow.tenant == tenant,
                    FormDraftRow.owner_id == owner_id,
                    FormDraftRow.question_id == question_id,
                )
            )
            return result.rowcount if isinstance(result, CursorResult) else 0
