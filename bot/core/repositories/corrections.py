"""The ``uow.corrections`` storage port; its SQL implementation is bot/storage/repositories/corrections.py."""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection
from dataclasses import dataclass
from typing import Protocol

from bot.core.models import ChannelRef, PlaySession, Question, Tenant
from bot.core.standings import StandingKeys


@dataclass(frozen=True)
class QuestionPlay:
    """A player's session on a problem that asked some version of a question, with its context."""

    session: PlaySession
    challenge_id: int
    channel_pk: int
    channel: ChannelRef
    day: dt.date
    question: Question
    hint_used_at: dt.datetime | None


class CorrectionRepository(Protocol):
    """Answer corrections and the re-scoring primitives they use (``uow.corrections``)."""

    async def question_plays(self, view: Tenant | None, question_id: str) -> list[QuestionPlay]:
        """Every session on a problem of ``view``'s channels (None: of every tenant's) that asked any
        version of the question.
        """
        ...

    async def problem_versions(self, view: Tenant | None, question_id: str) -> list[int]:
        """The distinct version ids that ``view``'s problems (None: every tenant's) asking the question
        were asked on.
        """
        ...

    async def repoint_problems(
        self,
        view: Tenant | None,
        question_id: str,
        to_version_id: int,
        from_version_ids: Collection[int] | None = None,
    ) -> int:
        """Make the problems of ``view``'s channels (None: every problem) that asked the question show
        version ``to_version_id``: only those asked on ``from_version_ids`` when given (None: all);
        return how many.
        """
        ...

    async def set_attempt_correct(self, session_id: int, attempt_no: int, correct: bool) -> None:
        """Re-judge one stored attempt."""
        ...

    async def set_session_result(
        self, session_id: int, outcome: str | None, points: int, finished_at: dt.datetime | None
    ) -> None:
        """Overwrite a session's outcome and points (re-scoring only)."""
        ...

    async def adjust_standings(
        self, keys: StandingKeys, player_pk: int, points: int, correct: int, answer_ms: int
    ) -> None:
        """Add (possibly negative) deltas to every (scope, period) standing of the player."""
        ...

    async def adjust_completion(self, challenge_id: int, player_pk: int, correct: int, points: int) -> None:
        """Add deltas to a completed challenge's correct count and points (no-op if not completed)."""
        ...

    async def add_correction(
        self,
        view: Tenant | None,
        question_id: str,
        from_version_id: int,
        to_version_id: int,
        old_letter: str | None,
        new_letter: str,
        corrected_by: str,
        now: dt.datetime,
        sessions_rescored: int,
        points_delta: int,
    ) -> int:
        """Record an answer correction made for ``view`` (None: the operator's); return its id."""
        ...

    async def add_correction_note(self, correction_id: int, channel_pk: int, text: str) -> None:
        """Queue a note for a channel's next results post."""
        ...

    async def take_correction_notes(self, channel_pk: int, now: dt.datetime) -> list[str]:
        """The channel's notes not yet announced, marked announced now."""
        ...
