"""Question drafts waiting for an admin's Save, kept in this process (both chat adapters use it).

A draft is a validated question spec an admin has submitted from a chat form but not saved yet (the runner's
preview is shown first). It lives in memory under a random key, which fits a Discord custom id or Slack's
private_metadata, for an hour at most; the oldest are dropped past a limit. A restart drops them all: the
admin is told to submit the form again. Closed drafts remember their outcome, so a late second click on
Save says "already added" rather than "expired".
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

#: How long a draft waits for Save or Cancel, and how many are kept at most (oldest dropped first).
DRAFT_TTL_S = 3600.0
MAX_DRAFTS = 200
#: Outcomes remembered for late clicks.
MAX_OUTCOMES = 500


@dataclass(frozen=True)
class Draft:
    """A validated question waiting for Save, and the admin who may save it."""

    owner_id: str
    spec: dict[str, Any]
    created: float

    @property
    def question_id(self) -> str:
        """The draft question's id."""
        return str(self.spec.get("id", "?"))


class DraftStore:
    """Drafts in memory under random keys, expiring after ``ttl_s``; the last outcomes of closed ones."""

    def __init__(self, limit: int = MAX_DRAFTS, ttl_s: float = DRAFT_TTL_S) -> None:
        self._drafts: OrderedDict[str, Draft] = OrderedDict()
        self._outcomes: OrderedDict[str, str] = OrderedDict()
        self._busy: set[str] = set()
        self._limit = limit
        self._ttl = ttl_s

    def put(self, spec: dict[str, Any], owner_id: str = "") -> str:
        """Keep ``spec`` (for ``owner_id``, who alone may save it); return its URL-safe key."""
        key = secrets.token_urlsafe(12)
        self._drafts[key] = Draft(owner_id, spec, time.monotonic())
        while len(self._drafts) > self._limit:
            self._drafts.popitem(last=False)
        return key

    def get(self, key: str) -> Draft | None:
        """The draft under ``key``, unless closed, dropped or expired."""
        draft = self._drafts.get(key)
        if draft is not None and time.monotonic() - draft.created > self._ttl:
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

    def drop(self, key: str) -> None:
        """Forget a draft without remembering an outcome."""
        self._drafts.pop(key, None)
        self._busy.discard(key)

    def outcome(self, key: str) -> str | None:
        """What became of a closed draft (None: never closed here)."""
        return self._outcomes.get(key)

    def __len__(self) -> int:
        return len(self._drafts)
