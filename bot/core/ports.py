"""Ports: what the core needs from the outside world, as Protocols.

Implementations are named by technology (SqlUnitOfWork, ConsolePlatform...), fakes ``Fake*`` in tests.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol

from bot.core.cards import ChallengeCard, LeaderboardCard, PracticeNudgeCard, ReminderCard, ResultsCard
from bot.core.dispute_ports import DisputeStore
from bot.core.disputes import AdminNotice
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
from bot.core.verdicts import RunnerHealth, RunSpec, RunVerdict

if TYPE_CHECKING:  # schedule.py builds on service.py, which imports this module
    from bot.core.schedule import Schedule, ScheduleConfig


class Clock(Protocol):
    """The source of 'now' (timezone-aware UTC), and of waiting for a moment on that same time line."""

    def now(self) -> dt.datetime:
        """Current time, timezone-aware."""
        ...

    async def sleep_until(self, when: dt.datetime) -> None:
        """Return once ``now() >= when`` (at once when it already is). Timers wait with this, never by
        polling ``now()``: a test clock wakes its sleepers when it is moved.
        """
        ...


class SystemClock:
    """The real clock."""

    def now(self) -> dt.datetime:
        """Current UTC time."""
        return dt.datetime.now(dt.UTC)

    async def sleep_until(self, when: dt.datetime) -> None:
        """Sleep on the event loop until the wall clock reaches ``when``."""
        # asyncio sleeps on the monotonic clock; if the wall clock was set back meanwhile, sleep the
        # remainder (usually the loop body runs once).
        while (left := (when - self.now()).total_seconds()) > 0:  # noqa: ASYNC110 - not a busy wait
            await asyncio.sleep(left)


class ChatPlatform(Protocol):
    """Outbound calls a platform implements (console, Discord, Slack)."""

    async def post_challenge(self, channel: ChannelRef, card: ChallengeCard) -> str | None:
        """Post the daily challenge; return a message reference to edit it later."""
        ...

    async def post_results(self, channel: ChannelRef, card: ResultsCard, message_ref: str | None) -> None:
        """Post a closed challenge's results (and mark the original post closed)."""
        ...

    async def post_reminder(self, channel: ChannelRef, card: ReminderCard, message_ref: str | None) -> None:
        """Remind the channel that the challenge closes soon (scheduled channels with a reminder)."""
        ...

    async def post_weekly_summary(self, channel: ChannelRef, card: LeaderboardCard) -> None:
        """Post the week's leaderboard of the channel (scheduled channels with a weekly summary)."""
        ...

    async def post_admin_notice(self, notice: AdminNotice) -> None:
        """Tell the configured admin channel something needs a human (e.g. a contradicted answer)."""
        ...

    async def send_practice_nudge(self, player: PlayerRef, card: PracticeNudgeCard) -> None:
        """Tell a player privately (a DM) that flashcards are due; only players who opted in get it.
        Raise when it cannot be delivered (DMs closed, unknown user): the day's claim is then released.
        """
        ...


class RunnerClient(Protocol):
    """The runner service (runner/README.md): runs snippets in a sandbox and answers verdicts.

    Implementations raise RunnerUnavailableError when the runner cannot be reached or refuses the
    request; a snippet that fails is a verdict, never an exception.
    """

    async def health(self) -> RunnerHealth:
        """The runner's hardware, modes and limits."""
        ...

    async def run(self, spec: RunSpec) -> RunVerdict:
        """Run a snippet as ``spec`` says and return the verdict."""
        ...


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
    """What one answer writes: the attempt; with ``outcome``, the end of the session; with ``standings``
    (scope keys, period keys), the points added to the player's standings when the session ends.
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
    standings: tuple[Sequence[str], Sequence[str]] | None = None


class TransientConflictError(Exception):
    """Storage-level: the database aborted the transaction to resolve a conflict with a concurrent one (a
    deadlock, a serialization failure). Nothing was kept; running the use case again is safe.
    """


class AttemptConflictError(Exception):
    """Storage-level: this attempt number (or idempotency key) was taken by a concurrent transaction."""


class AlreadyExistsError(Exception):
    """Storage-level: a unique row (e.g. the day's challenge of a channel) already exists."""


class UnitOfWork(Protocol):
    """One transaction. ``async with uow:`` commits on success and rolls back on an exception."""

    async def __aenter__(self) -> UnitOfWork: ...

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None: ...

    async def commit(self) -> None:
        """Commit now (the context manager also commits on a clean exit)."""
        ...

    async def rollback(self) -> None:
        """Roll back now."""
        ...

    @property
    def disputes(self) -> DisputeStore:
        """Disputes, flags and answer corrections in this transaction."""
        ...

    # players and channels
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

    # questions
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

    # challenges
    async def get_challenge(self, channel_pk: int, day: dt.date) -> Challenge | None:
        """A channel's challenge of a day."""
        ...

    async def get_challenge_by_id(self, challenge_id: int) -> Challenge | None:
        """A challenge by id."""
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

    # schedules (bot/core/schedule_service.py)
    async def get_schedule(self, channel_pk: int) -> Schedule | None:
        """A channel's schedule."""
        ...

    async def list_schedules(self) -> list[Schedule]:
        """Every stored schedule (paused ones included)."""
        ...

    async def save_schedule(self, channel_pk: int, config: ScheduleConfig, now: dt.datetime) -> Schedule:
        """Insert or replace a channel's schedule; the channel takes the schedule's timezone."""
        ...

    async def open_windows(self) -> list[tuple[int, int, dt.datetime]]:
        """(challenge id, channel pk, closes_at) of every open challenge that has a closing time."""
        ...

    async def claim(self, kind: str, key: str, now: dt.datetime) -> bool:
        """Claim a one-time side effect (unique (kind, key)); True only for the first claimer."""
        ...

    async def set_message_ref(self, challenge_id: int, message_ref: str) -> None:
        """Remember where the challenge was posted."""
        ...

    async def delete_unposted_challenge(self, challenge_id: int) -> bool:
        """Remove a challenge the platform refused to post (nobody saw it); False if posted or played."""
        ...

    async def adopt_window(self, challenge_id: int, closes_at: dt.datetime) -> bool:
        """Give an open challenge that has no closing time this one; True only for the caller that did."""
        ...

    async def challenge_id_of_problem(self, problem_id: int) -> int | None:
        """The challenge a problem belongs to."""
        ...

    # plays
    async def find_challenge(self, ref: ChannelRef, day: dt.date) -> Challenge | None:
        """A channel's challenge of a day, looked up by the channel's platform ids."""
        ...

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

    async def finished_count(self, challenge_id: int, player_pk: int) -> int:
        """How many of a challenge's problems are over for a player."""
        ...

    async def record_answer(self, write: AnswerWrite) -> bool:
        """Store an answer (see ``AnswerWrite``); AttemptConflictError if its attempt number or key is
        taken (then nothing is written). Returns whether this write ended the session (False when no end
        was asked for, or the session had already ended).
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

    async def add_attempt(
        self,
        session_id: int,
        attempt_no: int,
        letter: str,
        correct: bool,
        answered_at: dt.datetime,
        elapsed_ms: int,
        idempotency_key: str | None,
        question_version_id: int,
    ) -> None:
        """Record an attempt; raise AttemptConflictError if the number or key is taken."""
        ...

    async def attempt_by_key(self, idempotency_key: str) -> tuple[int, int] | None:
        """(problem id, player pk) of the attempt recorded under this idempotency key, if any."""
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

    # standings, completions, badges
    async def add_to_standings(
        self, scopes: Sequence[str], periods: Sequence[str], player_pk: int, points: int, answer_ms: int
    ) -> None:
        """Add a solved problem's points to every (scope, period) standing of the player."""
        ...

    async def leaderboard(
        self, scope: str, period: str, limit: int, player_pk: int | None
    ) -> tuple[list[StandingRow], StandingRow | None, int]:
        """Top ``limit`` rows, the player's own row (any rank) and the number of ranked players."""
        ...

    async def players_missing_completion(self, challenge_id: int, problem_count: int) -> list[int]:
        """Players with every problem of the challenge over but no completion recorded."""
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

    async def problem_tallies(self, challenge_id: int) -> list[ProblemTally]:
        """Per problem: final choice counts, players and solvers."""
        ...

    async def challenge_standings(self, challenge_id: int) -> list[StandingRow]:
        """Players of one challenge ranked by points then answer time."""
        ...

    async def player_points(self, player_pk: int) -> int:
        """All points a player earned in challenges."""
        ...

    async def player_accuracy(self, player_pk: int, by: str) -> list[tuple[str, int, int]]:
        """(topic or kind, finished problems, solved) for a player; ``by`` is 'topic' or 'kind'."""
        ...
