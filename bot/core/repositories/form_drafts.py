"""The port an admin's typed question form is kept through (bot/storage/repositories/form_drafts.py's
SqlFormDraftRepository implements it; :class:`MemoryFormDrafts` below serves a process without a database).

A form draft is what one admin of one tenant typed into the "Add a question" form: the command's options
(id, kind, topic, difficulty) from the moment the form opens, then the five text fields and the last
validation error from each submission, valid or not. It lives a day (``expires_at``) so an admin whose
form was lost (Discord's 15 minutes, a restart, a refusal) can reopen it filled in. Every read and write
names the tenant and the owner: one server's admin never reads another's draft, nor another admin's.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field, replace
from typing import Protocol

#: How long a form draft is kept after it was opened or last submitted.
FORM_DRAFT_TTL = dt.timedelta(hours=24)
#: Drafts kept per admin and tenant at most (the oldest go first): a bound on what one admin can store.
MAX_FORM_DRAFTS = 20
#: The five text fields of the form, in their order on screen.
FORM_FIELDS = ("prompt", "code", "choices", "correct", "notes")


@dataclass(frozen=True)
class FormDraft:
    """One admin's question form in one tenant (``tenant``: the Tenant key, ``<platform>:<workspace>``)."""

    nonce: str
    tenant: str
    owner_id: str
    question_id: str
    kind: str
    topic: str
    difficulty: str
    updated_at: dt.datetime
    expires_at: dt.datetime
    #: What was typed, by field name (FORM_FIELDS); empty until the first submission.
    inputs: dict[str, str] = field(default_factory=dict)
    #: Why the last submission was not added (None: not submitted yet, or nothing wrong was found).
    error: str | None = None
    #: When it was last submitted (None: opened only, nothing typed has reached the bot).
    submitted_at: dt.datetime | None = None

    def submitted(self, inputs: dict[str, str], error: str | None, now: dt.datetime) -> FormDraft:
        """The draft after a submission at ``now`` (kept another day from then)."""
        return replace(
            self,
            inputs=dict(inputs),
            error=error,
            submitted_at=now,
            updated_at=now,
            expires_at=now + FORM_DRAFT_TTL,
        )


class FormDraftRepository(Protocol):
    """Where form drafts are kept; every lookup is scoped to a tenant and an owner."""

    async def save(self, draft: FormDraft) -> None:
        """Insert or replace the draft under its nonce (same tenant and owner only); drop the owner's
        oldest drafts past :data:`MAX_FORM_DRAFTS` and every expired draft.
        """
        ...

    async def find(self, tenant: str, owner_id: str, nonce: str, now: dt.datetime) -> FormDraft | None:
        """The owner's unexpired draft under ``nonce`` in ``tenant`` (None: none, someone else's, expired)."""
        ...

    async def latest(self, tenant: str, owner_id: str, now: dt.datetime) -> FormDraft | None:
        """The owner's most recently submitted unexpired draft in ``tenant``."""
        ...

    async def discard(self, tenant: str, owner_id: str, question_id: str) -> int:
        """Delete the owner's drafts of ``question_id`` in ``tenant`` (it was added); how many."""
        ...


class MemoryFormDrafts:
    """A :class:`FormDraftRepository` in this process's memory (no database wired: tests, the console)."""

    def __init__(self) -> None:
        self._rows: dict[str, FormDraft] = {}

    async def save(self, draft: FormDraft) -> None:
        """Insert or replace (never across tenants or owners), then trim as the SQL one does."""
        old = self._rows.get(draft.nonce)
        if old is not None and (old.tenant, old.owner_id) != (draft.tenant, draft.owner_id):
            raise ValueError("a form draft's nonce belongs to another tenant or owner")
        self._rows[draft.nonce] = draft
        mine = sorted(
            (d for d in self._rows.values() if (d.tenant, d.owner_id) == (draft.tenant, draft.owner_id)),
            key=lambda d: d.updated_at,
        )
        for stale in mine[: max(0, len(mine) - MAX_FORM_DRAFTS)]:
            self._rows.pop(stale.nonce, None)
        for nonce in [n for n, d in self._rows.items() if d.expires_at <= draft.updated_at]:
            del self._rows[nonce]

    async def find(self, tenant: str, owner_id: str, nonce: str, now: dt.datetime) -> FormDraft | None:
        """The owner's unexpired draft under ``nonce``."""
        draft = self._rows.get(nonce)
        if draft is None or (draft.tenant, draft.owner_id) != (tenant, owner_id) or draft.expires_at <= now:
            return None
        return draft

    async def latest(self, tenant: str, owner_id: str, now: dt.datetime) -> FormDraft | None:
        """The owner's latest submitted unexpired draft."""
        mine = [
            d
            for d in self._rows.values()
            if (d.tenant, d.owner_id) == (tenant, owner_id) and d.expires_at > now and d.submitted_at
        ]
        return max(mine, key=lambda d: d.updated_at, default=None)

    async def discard(self, tenant: str, owner_id: str, question_id: str) -> int:
        """Delete the owner's drafts of ``question_id``."""
        gone = [
            n
            for n, d in self._rows.items()
            if (d.tenant, d.owner_id, d.question_id) == (tenant, owner_id, question_id)
        ]
        for nonce in gone:
            del self._rows[nonce]
        return len(gone)
