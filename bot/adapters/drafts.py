"""Question drafts waiting for an admin's Save (both chat adapters use it), kept in the database.

A draft is a validated question spec an admin has submitted from a chat form but not saved yet (the runner's
preview is shown first). It lives under a random key, which fits a Discord custom id or Slack's
private_metadata, for an hour at most; the oldest are dropped past a limit. Closed drafts remember their
outcome, so a late second click on Save says "already added" rather than "expired".

The store answers from memory (its interface is synchronous, as the adapters use it) and writes every
change through to a :class:`DraftRepository` (bot/storage/repositories/drafts.py) in order, in the
background. At start, :meth:`DraftStore.load` reads the recent drafts back, and :meth:`DraftStore.fetch`
finds a draft another process made or one this process has not loaded: a restart or a second process
loses no admin's question.
Without a repository (tests, the console) the store is memory only, as before.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import secrets
import time
from collections import OrderedDict
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any

from bot.core.repositories.drafts import DraftRepository, StoredDraftLike

log = logging.getLogger(__name__)

#: How long a draft waits for Save or Cancel, and how many are kept at most (oldest dropped first).
DRAFT_TTL_S = 3600.0
MAX_DRAFTS = 200
#: Outcomes remembered for late clicks.
MAX_OUTCOMES = 500


@dataclass(frozen=True)
class Draft:
    """A validated question waiting for Save, and the admin who may save it (``created``: epoch seconds)."""

    owner_id: str
    spec: dict[str, Any]
    created: float

    @property
    def question_id(self) -> str:
        """The draft question's id."""
        return str(self.spec.get("id", "?"))


def _utc(epoch: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(epoch, dt.UTC)


class DraftStore:
    """Drafts under random keys, expiring after ``ttl_s``; the last outcomes of closed ones; written through
    to ``repository`` when one is given.
    """

    def __init__(
        self, limit: int = MAX_DRAFTS, ttl_s: float = DRAFT_TTL_S, repository: DraftRepository | None = None
    ) -> None:
        self._drafts: OrderedDict[str, Draft] = OrderedDict()
        self._outcomes: OrderedDict[str, str] = OrderedDict()
        self._busy: set[str] = set()
        self._limit = limit
        self._ttl = ttl_s
        self._repository = repository
        self._writes: asyncio.Future[None] | None = None

    # ------------------------------------------------------------------ write-through
    def _write(self, make: Awaitable[Any]) -> None:
        """Run a repository write after the ones before it (ordered), logging a failure."""
        before = self._writes

        async def chained() -> None:
            if before is not None:
                await asyncio.wait({before})
            try:
                await make
            except Exception:  # memory still has the draft; only a restart could lose it now
                log.exception("writing a question draft to the database failed")

        self._writes = asyncio.ensure_future(chained())

    async def flush(self) -> None:
        """Wait until every change so far is in the database."""
        if self._writes is not None:
            await asyncio.wait({self._writes})

    async def load(self) -> int:
        """Read the recent drafts and outcomes back from the repository (at start); how many were read."""
        if self._repository is None:
            return 0
        cutoff = time.time() - self._ttl
        await self._repository.purge(_utc(cutoff))
        rows = await self._repository.since(_utc(cutoff), self._limit + MAX_OUTCOMES)
        for row in rows:
            self._remember(row)
        return len(rows)

    def _remember(self, row: StoredDraftLike) -> Draft | None:
        if row.outcome is not None:
            self._outcomes[row.key] = row.outcome
            return None
        draft = Draft(row.owner_id, dict(row.spec), row.created_at.timestamp())
        self._drafts[row.key] = draft
        return draft

    async def fetch(self, key: str) -> Draft | None:
        """Like :meth:`get`, looking in the database when this process does not hold the draft."""
        draft = self.get(key)
        if draft is not None or self._repository is None or key in self._outcomes:
            return draft
        await self.flush()
        row = await self._repository.find(key)
        if row is None:
            return None
        self._remember(row)
        return self.get(key)

    # ------------------------------------------------------------------ the synchronous interface
    def put(self, spec: dict[str, Any], owner_id: str = "") -> str:
        """Keep ``spec`` (for ``owner_id``, who alone may save it); return its URL-safe key."""
        key = secrets.token_urlsafe(12)
        draft = Draft(owner_id, spec, time.time())
        self._drafts[key] = draft
        while len(self._drafts) > self._limit:
            self._drafts.popitem(last=False)
        if self._repository is not None:
            self._write(self._repository.save(key, owner_id, spec, _utc(draft.created)))
        return key

    def get(self, key: str) -> Draft | None:
        """The draft under ``key``, unless closed, dropped or expired."""
        draft = self._drafts.get(key)
        if draft is not None and time.time() - draft.created > self._ttl:
            self._drafts.pop(key, None)
            return None
        return draft

    def claim(self, key: str) -> bool:
        """Mark ``key`` as being saved; False when another click already is (a double click)."""
        if key in self._busy:
            return False
        self._busy.add(key)
        return True

    def release(self, key: str) -> None:
        """End a claim (the save failed: the draft stays for another try)."""
        self._busy.discard(key)

    def close(self, key: str, outcome: str) -> None:
        """Forget the draft and remember what became of it."""
        self._drafts.pop(key, None)
        self._busy.discard(key)
        self._outcomes[key] = outcome
        while len(self._outcomes) > MAX_OUTCOMES:
            self._outcomes.popitem(last=False)
        if self._repository is not None:
            self._write(self._repository.close(key, outcome, _utc(time.time())))

    def drop(self, key: str) -> None:
        """Forget a draft without remembering an outcome."""
        self._drafts.pop(key, None)
        self._busy.discard(key)
        if self._repository is not None:
            self._write(self._repository.drop(key))

    def outcome(self, key: str) -> str | None:
        """What became of a closed draft (None: never closed here)."""
        return self._outcomes.get(key)

    def __len__(self) -> int:
        return len(self._drafts)
