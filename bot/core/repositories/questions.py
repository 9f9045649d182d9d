"""The ``uow.questions`` storage port; its SQL implementation is bot/storage/repositories/questions.py."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from bot.core.models import Question, QuestionCandidate


@dataclass(frozen=True)
class SyncReport:
    """What a question import changed."""

    added: tuple[str, ...]
    updated: tuple[str, ...]
    unchanged: tuple[str, ...]


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
    """The question bank (``uow.questions``). Editing a question adds a version; none is rewritten."""

    async def sync_questions(self, specs: Sequence[dict[str, Any]], now: dt.datetime) -> SyncReport:
        """Insert new questions and new versions of changed ones; never rewrite a version."""
        ...

    async def retire_question(self, question_id: str, now: dt.datetime) -> bool:
        """Retire a question (it is no longer picked); False if it does not exist."""
        ...

    async def list_questions(self, include_retired: bool) -> list[QuestionRow]:
        """Every question with its latest version's metadata."""
        ...

    async def latest_question(self, question_id: str) -> Question | None:
        """The latest version of a question."""
        ...

    async def latest_specs(self, include_retired: bool) -> list[dict[str, Any]]:
        """The latest version of every question as the spec dict it was imported from."""
        ...

    async def question_candidates(self, channel_pk: int, kinds: Sequence[str]) -> list[QuestionCandidate]:
        """Active questions of these kinds with how often each was used in this channel."""
        ...

    async def question_version(self, version_id: int) -> Question | None:
        """A stored question version."""
        ...

    async def version_spec(self, version_id: int) -> dict[str, Any] | None:
        """The spec dict a question version was stored from."""
        ...

    async def add_corrected_version(self, question_id: str, spec: dict[str, Any], now: dt.datetime) -> int:
        """Store ``spec`` as the question's next version (even if an older version had that content)."""
        ...
