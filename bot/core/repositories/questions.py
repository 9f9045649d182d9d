"""The ``uow.questions`` storage port; its SQL implementation is bot/storage/repositories/questions.py."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from bot.core.models import Question, QuestionCandidate, Tenant


@dataclass(frozen=True)
class SyncReport:
    """What a question import changed."""

    added: tuple[str, ...]
    updated: tuple[str, ...]
    unchanged: tuple[str, ...]
    #: The operator's import took an id a tenant's own question had: ``(tenant key, old id, new id)``
    #: for each such question, renamed within its tenant (the shared bank is never refused for it).
    moved_aside: tuple[tuple[str, str, str], ...] = ()


@dataclass(frozen=True)
class QuestionRow:
    """A question as listed for admins."""

    id: str
    version: int
    kind: str
    topic: str
    difficulty: str
    retired: bool


class QuestionRepository(Protocol):
    """The question bank (``uow.questions``). Editing a question adds a version; none is rewritten.

    Every read and change takes a *view*: a :class:`Tenant` (the shared bank plus that tenant's own
    questions, retirements and corrected versions) or None (the operator's shared bank alone). No method
    shows a tenant another tenant's questions or versions.
    """

    async def sync_questions(
        self, owner: Tenant | None, specs: Sequence[dict[str, Any]], now: dt.datetime
    ) -> SyncReport:
        """Insert new questions and new versions of changed ones into ``owner``'s questions (None: the
        shared bank); never rewrite a version. QuestionBankError (nothing written) when an id is
        already used outside ``owner``'s own questions.
        """
        ...

    async def retire_question(self, view: Tenant | None, question_id: str, now: dt.datetime) -> bool:
        """Retire a question for ``view`` (None: for everyone); False if ``view`` does not see it."""
        ...

    async def list_questions(self, view: Tenant | None, include_retired: bool) -> list[QuestionRow]:
        """Every question ``view`` sees with its latest version's metadata."""
        ...

    async def latest_question(self, view: Tenant | None, question_id: str) -> Question | None:
        """The latest version of a question as ``view`` sees it (None: it does not see it)."""
        ...

    async def latest_specs(self, view: Tenant | None, include_retired: bool) -> list[dict[str, Any]]:
        """The latest version of every question ``view`` sees, as the spec dict it was imported from."""
        ...

    async def question_candidates(
        self, tenant: Tenant, channel_pk: int, kinds: Sequence[str]
    ) -> list[QuestionCandidate]:
        """Questions of these kinds the tenant plays (not retired for it) with how often each was used in
        this channel.
        """
        ...

    async def question_version(self, version_id: int) -> Question | None:
        """A stored question version (ids come from rows already scoped: a problem, an attempt)."""
        ...

    async def version_seen_by(self, view: Tenant, version_id: int) -> bool:
        """Whether the tenant ``view`` sees the stored version ``version_id`` (a shared or its own question,
        a shared version or its own correction); False for another tenant's, or no such version.
        """
        ...

    async def version_spec(self, version_id: int) -> dict[str, Any] | None:
        """The spec dict a question version was stored from."""
        ...

    async def add_corrected_version(
        self, view: Tenant | None, question_id: str, spec: dict[str, Any], now: dt.datetime
    ) -> int:
        """Store ``spec`` as the question's next version, seen by ``view`` only (None: by everyone), even
        if an older version had that content; return its version id.
        """
        ...
