"""The ``uow.plays`` storage port; its SQL implementation is bot/storage/repositories/plays.py."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Protocol

from bot.core.models import PlayContext, PlayerRef, PlaySession
from bot.core.standings import StandingKeys


@dataclass(frozen=True)
class AnswerWrite:
    """What one answer writes: the attempt; with ``outcome``, the end of the session; with ``standings``,
    the points added to the player's standings when the session ends.
    """

    session_id: int
    player_pk: int
    question_version_id: int
    attempt_no: int
    letter: str
    correct: bool
    answered_at: dt.datetime
    elapsed_ms: int
    idempotency_key: str | None
    outcome: str | None = None
    points: int = 0
    standings: StandingKeys | None = None


@dataclass(frozen=True)
class ProblemTally:
    """How a problem went for everyone: choice counts per letter, players and solvers."""

    problem_id: int
    distribution: dict[str, int]
    players: int
    solved: int


class PlayRepository(Protocol):
    """Players' sessions and attempts on problems (``uow.plays``): the start and answer paths."""

    async def play_context(
        self,
        problem_id: int,
        player: PlayerRef,
        idempotency_key: str | None = None,
        *,
        for_answer: bool = False,
    ) -> PlayContext | None:
        """A problem with its challenge, the player's session and attempts; with ``for_answer``, also
        whether the idempotency key was seen and how many of the player's problems are over.
        """
        ...

    async def get_session(self, problem_id: int, player_pk: int) -> PlaySession | None:
        """A player's session on a problem, with its attempts."""
        ...

    async def create_session(
        self, problem_id: int, player_pk: int, started_at: dt.datetime, deadline: dt.datetime
    ) -> PlaySession:
        """Start a problem for a player; if already started, return the existing session unchanged."""
        ...

    async def sessions_in_challenge(self, challenge_id: int, player_pk: int) -> list[PlaySession]:
        """A player's sessions on a challenge's problems."""
        ...

    async def record_answer(self, write: AnswerWrite) -> bool:
        """Store an answer (see ``AnswerWrite``); AttemptConflictError if its attempt number or key is
        taken (then nothing is written). Returns whether this write ended the session (False when no end
        was asked for, or the session had already ended).
        """
        ...

    async def finish_session(
        self, session_id: int, outcome: str, points: int, finished_at: dt.datetime
    ) -> bool:
        """End a session once (``WHERE outcome IS NULL``); True only for the call that ended it."""
        ...

    async def mark_hint(self, session_id: int, at: dt.datetime) -> None:
        """Record that the hint was shown (first time only)."""
        ...

    async def expire_sessions(self, challenge_id: int, now: dt.datetime) -> list[tuple[int, int]]:
        """End every unfinished session of a challenge as timed out; return (session id, player pk)."""
        ...

    async def finished_count(self, challenge_id: int, player_pk: int) -> int:
        """How many of a challenge's problems are over for a player."""
        ...

    async def players_missing_completion(self, challenge_id: int, problem_count: int) -> list[int]:
        """Players with every problem of the challenge over but no completion recorded."""
        ...

    async def problem_tallies(self, challenge_id: int) -> list[ProblemTally]:
        """Per problem: final choice counts, players and solvers."""
        ...
