"""The storage port of disputes, flags and answer corrections (reached as ``uow.disputes``)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from bot.core.models import ChannelRef, PlaySession, Question


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


class DisputeStore(Protocol):
    """Disputes, flags, corrections and the re-scoring primitives, inside the caller's transaction."""

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
        question_id: str,
        version_id: int,
        dispute_id: int | None,
        official_letter: str | None,
        matched_letter: str | None,
        explanation: str,
        now: dt.datetime,
    ) -> tuple[int, bool]:
        """Flag a version (once): (flag id, True if this call created it)."""
        ...

    async def flags(self, status: str | None) -> list[QuestionFlag]:
        """Flags, newest first (``status`` 'open' or 'resolved', or None for all)."""
        ...

    async def resolve_flags(self, question_id: str, now: dt.datetime) -> int:
        """Resolve every open flag of a question; return how many."""
        ...

    async def version_spec(self, version_id: int) -> dict[str, Any] | None:
        """The spec dict a question version was stored from."""
        ...

    async def add_corrected_version(self, question_id: str, spec: dict[str, Any], now: dt.datetime) -> int:
        """Store ``spec`` as the question's next version (even if an older version had that content)."""
        ...

    async def question_plays(self, question_id: str) -> list[QuestionPlay]:
        """Every session on a problem that asked any version of the question."""
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
        self,
        scopes: Sequence[str],
        periods: Sequence[str],
        player_pk: int,
        points: int,
        correct: int,
        answer_ms: int,
    ) -> None:
        """Add (possibly negative) deltas to every (scope, period) standing of the player."""
        ...

    async def adjust_completion(self, challenge_id: int, player_pk: int, correct: int, points: int) -> None:
        """Add deltas to a completed challenge's correct count and points (no-op if not completed)."""
        ...

    async def repoint_problems(self, question_id: str, to_version_id: int) -> int:
        """Make every problem that asked the question show version ``to_version_id``; return how many."""
        ...

    async def add_correction(
        self,
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
        """Record an answer correction; return its id."""
        ...

    async def add_correction_note(self, correction_id: int, channel_pk: int, text: str) -> None:
        """Queue a note for a channel's next results post."""
        ...

    async def take_correction_notes(self, channel_pk: int, now: dt.datetime) -> list[str]:
        """The channel's notes not yet announced, marked announced now."""
        ...
