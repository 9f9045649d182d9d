"""Storage ports: one small repository per area, reached through the unit of work (``uow.challenges``...).

Every repository works inside the transaction of the unit of work that handed it out; none commits.
Implementations live in bot/storage/repositories/ (``Sql*Repository``), one module per port here:

=================  ==========================================================================
``players``        players and channels: the platform identities every other row hangs off
``questions``      the question bank: imports, versions, retirement, candidates to pick from
``challenges``     daily challenges and their problems: create, find, post, close
``schedules``      channel schedules and the scheduler's one-time claims
``plays``          a player's sessions and attempts on problems (the start and answer paths)
``standings``      leaderboards, completions, badges and a player's record
``disputes``       disputes (runner checks of an answer) and the flags they raise
``corrections``    answer corrections: re-judging stored plays and moving their points
``practice``       quizzes, flashcard reviews and explain answers (never in standings)
=================  ==========================================================================
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from bot.core.grading import ConceptResult
from bot.core.models import (
    Challenge,
    ChannelRef,
    PlayContext,
    PlayerRef,
    PlaySession,
    Question,
    QuestionCandidate,
    StandingRow,
)
from bot.core.practice_models import PracticeTotals, QuizRow, ReviewCardRow
from bot.core.schedule import Schedule, ScheduleConfig
from bot.core.sm2 import CardState, Grade
from bot.core.standings import PeriodKey, ScopeKey, StandingKeys


# ---------------------------------------------------------------------------------------------- records
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


@dataclass(frozen=True)
class ProblemTally:
    """How a problem went for everyone: choice counts per letter, players and solvers."""

    problem_id: int
    distribution: dict[str, int]
    players: int
    solved: int


@dataclass(frozen=True)
class CompletionRow:
    """A player's completed challenge."""

    day: dt.date
    problems: int
    correct: int
    hints_used: int
    max_answer_s: float


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


# ---------------------------------------------------------------------------------------------- ports
class PlayerRepository(Protocol):
    """Players and channels (``uow.players``)."""

    async def ensure_channel(self, ref: ChannelRef) -> int:
        """The channel's primary key, creating the row if needed."""
        ...

    async def ensure_player(self, ref: PlayerRef, *, likely_new: bool = False) -> int:
        """The player's primary key, creating the row (or refreshing the display name) if needed.

        ``likely_new`` says the caller has just seen no such player: insert first, look up on conflict.
        """
        ...

    async def player_name(self, player_pk: int) -> str:
        """A player's display name."""
        ...


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


class ChallengeRepository(Protocol):
    """Daily challenges and their problems (``uow.challenges``)."""

    async def get_challenge(self, channel_pk: int, day: dt.date) -> Challenge | None:
        """A channel's challenge of a day."""
        ...

    async def get_challenge_by_id(self, challenge_id: int) -> Challenge | None:
        """A challenge by id."""
        ...

    async def find_challenge(self, ref: ChannelRef, day: dt.date) -> Challenge | None:
        """A channel's challenge of a day, looked up by the channel's platform ids."""
        ...

    async def latest_challenge(self, channel_pk: int) -> Challenge | None:
        """The channel's most recent challenge."""
        ...

    async def create_challenge(
        self,
        channel_pk: int,
        day: dt.date,
        title: str,
        version_ids: Sequence[int],
        opened_at: dt.datetime,
        closes_at: dt.datetime | None,
        *,
        time_limit_s: int | None = None,
        attempts: int | None = None,
    ) -> Challenge:
        """Create the day's challenge; raise AlreadyExistsError if the channel has one for that day.

        ``time_limit_s`` / ``attempts`` override every question's own for this challenge.
        """
        ...

    async def close_challenge(self, challenge_id: int, now: dt.datetime) -> bool:
        """Close if open (``UPDATE ... WHERE status='open'``); True only for the call that closed it."""
        ...

    async def set_message_ref(self, challenge_id: int, message_ref: str) -> None:
        """Remember where the challenge was posted."""
        ...

    async def delete_unposted_challenge(self, challenge_id: int) -> bool:
        """Remove a challenge the platform refused to post (nobody saw it); False if posted or played."""
        ...

    async def open_windows(self) -> list[tuple[int, int, dt.datetime]]:
        """(challenge id, channel pk, closes_at) of every open challenge that has a closing time."""
        ...

    async def adopt_window(self, challenge_id: int, closes_at: dt.datetime) -> bool:
        """Give an open challenge that has no closing time this one; True only for the caller that did."""
        ...

    async def challenge_id_of_problem(self, problem_id: int) -> int | None:
        """The challenge a problem belongs to."""
        ...


class ScheduleRepository(Protocol):
    """Channel schedules and the scheduler's one-time claims (``uow.schedules``)."""

    async def get_schedule(self, channel_pk: int) -> Schedule | None:
        """A channel's schedule."""
        ...

    async def list_schedules(self) -> list[Schedule]:
        """Every stored schedule (paused ones included)."""
        ...

    async def save_schedule(self, channel_pk: int, config: ScheduleConfig, now: dt.datetime) -> Schedule:
        """Insert or replace a channel's schedule; the channel takes the schedule's timezone."""
        ...

    async def claim(self, kind: str, key: str, now: dt.datetime) -> bool:
        """Claim a one-time side effect (unique (kind, key)); True only for the first claimer."""
        ...


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


class StandingRepository(Protocol):
    """Leaderboards, completed challenges, badges and a player's record (``uow.standings``)."""

    async def leaderboard(
        self, scope: ScopeKey, period: PeriodKey, limit: int, player_pk: int | None
    ) -> tuple[list[StandingRow], StandingRow | None, int]:
        """Top ``limit`` rows, the player's own row (any rank) and the number of ranked players."""
        ...

    async def challenge_standings(self, challenge_id: int) -> list[StandingRow]:
        """Players of one challenge ranked by points then answer time."""
        ...

    async def record_completion(
        self, challenge: Challenge, player_pk: int, row: CompletionRow, points: int
    ) -> bool:
        """Record that a player finished every problem of a challenge; True the first time."""
        ...

    async def completions(self, player_pk: int, channel_pk: int | None) -> list[CompletionRow]:
        """A player's completed challenges (in one channel, or everywhere)."""
        ...

    async def completion_days(self, channel_pk: int, player_pks: Sequence[int]) -> dict[int, list[dt.date]]:
        """The days each of these players completed a challenge in one channel (one query)."""
        ...

    async def award_badges(
        self, player_pk: int, challenge_id: int, awards: Sequence[tuple[str, str]], at: dt.datetime
    ) -> list[str]:
        """Award (code, scope key) badges; return the codes newly awarded (idempotent)."""
        ...

    async def badge_counts(self, player_pk: int) -> dict[str, int]:
        """How many times the player earned each badge."""
        ...

    async def challenge_badges(self, challenge_id: int) -> list[tuple[int, str]]:
        """(player pk, badge code) awarded on a challenge."""
        ...

    async def player_points(self, player_pk: int) -> int:
        """All points a player earned in challenges."""
        ...

    async def player_accuracy(self, player_pk: int, by: str) -> list[tuple[str, int, int]]:
        """(topic or kind, finished problems, solved) for a player; ``by`` is 'topic' or 'kind'."""
        ...


class DisputeRepository(Protocol):
    """Disputes and the flags they raise on a question version (``uow.disputes``)."""

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


class CorrectionRepository(Protocol):
    """Answer corrections and the re-scoring primitives they use (``uow.corrections``)."""

    async def question_plays(self, question_id: str) -> list[QuestionPlay]:
        """Every session on a problem that asked any version of the question."""
        ...

    async def repoint_problems(self, question_id: str, to_version_id: int) -> int:
        """Make every problem that asked the question show version ``to_version_id``; return how many."""
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


class PracticeRepository(Protocol):
    """Quizzes, flashcard reviews and explain answers (``uow.practice``); never joined into standings."""

    async def practice_candidates(self, player_pk: int, kinds: Sequence[str]) -> list[QuestionCandidate]:
        """Active questions of these kinds (latest version); ``uses`` = times this player practised it."""
        ...

    async def create_quiz(
        self, player_pk: int, topic: str | None, version_ids: Sequence[int], now: dt.datetime
    ) -> QuizRow:
        """Store a new quiz with its questions in order."""
        ...

    async def get_quiz(self, quiz_id: int) -> QuizRow | None:
        """A quiz with its items."""
        ...

    async def answer_quiz_item(
        self, quiz_id: int, position: int, letter: str, correct: bool, now: dt.datetime
    ) -> bool:
        """Record the answer to one quiz question once (``WHERE letter IS NULL``); True if recorded."""
        ...

    async def finish_quiz(self, quiz_id: int, correct: int, now: dt.datetime) -> bool:
        """Mark a quiz finished with its score once; True for the call that finished it."""
        ...

    async def ensure_review_cards(self, player_pk: int, now: dt.datetime) -> int:
        """Give the player a card for every active bank flashcard and every challenge question they got
        wrong or timed out on (idempotent: unique per player and question); return how many were added.
        """
        ...

    async def due_cards(
        self, player_pk: int, until: dt.datetime, limit: int, phases: Sequence[str] | None = None
    ) -> list[ReviewCardRow]:
        """The player's cards due by ``until`` (optionally of these phases), soonest first."""
        ...

    async def get_review_card(self, card_id: int) -> ReviewCardRow | None:
        """A card by id."""
        ...

    async def save_review(
        self, card_id: int, before: CardState, after: CardState, grade: Grade, now: dt.datetime
    ) -> bool:
        """Store a card's new state if it is still ``before`` (a second grade of the same showing is
        refused: False) and log the review.
        """
        ...

    async def players_with_due_cards(self, now: dt.datetime) -> list[tuple[PlayerRef, int]]:
        """Players with at least one card due, and how many."""
        ...

    async def add_explain_attempt(
        self,
        player_pk: int,
        version_id: int,
        answer: str,
        concepts: Sequence[ConceptResult],
        now: dt.datetime,
    ) -> int:
        """Store a graded explain answer; return its id."""
        ...

    async def practice_totals(self, player_pk: int, now: dt.datetime) -> PracticeTotals:
        """Counts of the player's quizzes, reviews, cards and explain attempts."""
        ...
