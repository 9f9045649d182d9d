"""Ports: what the core needs from the outside world, as Protocols.

Implementations are named by technology (SqlUnitOfWork, ConsolePlatform...), fakes ``Fake*`` in tests. The
storage repositories the unit of work hands out are in bot/core/repositories/.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from types import TracebackType
from typing import Protocol

from bot.core.cards import (
    ChallengeCard,
    DeliveryNotice,
    LeaderboardCard,
    PracticeNudgeCard,
    ReminderCard,
    ResultsCard,
    TeamReportCard,
)
from bot.core.disputes import AdminNotice
from bot.core.models import ChannelRef, PlayerRef
from bot.core.repositories import (
    ChallengeRepository,
    CorrectionRepository,
    DifficultyRepository,
    DisputeRepository,
    OutboxRepository,
    PlayerRepository,
    PlayRepository,
    PracticeRepository,
    PracticeSettingsRepository,
    QuestionRepository,
    ScheduleRepository,
    StandingRepository,
)
from bot.core.verdicts import RunnerHealth, RunSpec, RunVerdict


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


class Telemetry(Protocol):
    """What the use cases report to the process's metrics (bot/metrics.py's BotMetrics implements it)."""

    def answer_recorded(self, platform: str, correct: bool) -> None:
        """An answer was stored (a redelivered one is not reported)."""
        ...


class NoTelemetry:
    """Reports nowhere: the default of a service built without metrics (tests, one-shot commands)."""

    def answer_recorded(self, platform: str, correct: bool) -> None:
        """Do nothing."""


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

    async def post_team_report(self, channel: ChannelRef, card: TeamReportCard) -> None:
        """Post the channel's weekly team report (channels that opted in): a heatmap image with alt text,
        the most-missed problems with their explanations one click away, and the movers.
        """
        ...

    async def post_admin_notice(self, notice: AdminNotice, channel: ChannelRef | None = None) -> None:
        """Tell the configured admin channel something needs a human (e.g. a contradicted answer).
        ``channel``: where it arose (a router sends it to that channel's platform only; None: every one).
        """
        ...

    async def post_delivery_notice(self, channel: ChannelRef, notice: DeliveryNotice) -> None:
        """Tell the admins of ``channel``'s tenant that a post of it keeps failing or was given up on
        (the admin channel; the log when there is none). Never raises for a refusal of its own.
        """
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


class TransientConflictError(Exception):
    """Storage-level: the database aborted the transaction to resolve a conflict with a concurrent one (a
    deadlock, a serialization failure). Nothing was kept; running the use case again is safe.
    """


class AttemptConflictError(Exception):
    """Storage-level: this attempt number (or idempotency key) was taken by a concurrent transaction."""


class AlreadyExistsError(Exception):
    """Storage-level: a unique row (e.g. the day's challenge of a channel) already exists."""


class UnitOfWork(Protocol):
    """One transaction, and the repositories that work inside it (bot/core/repositories/).

    ``async with uow:`` commits on success and rolls back on an exception; ``uow.challenges``,
    ``uow.plays``... read and write in that transaction and never commit on their own.
    """

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
    def players(self) -> PlayerRepository:
        """Players and channels."""
        ...

    @property
    def questions(self) -> QuestionRepository:
        """The question bank."""
        ...

    @property
    def challenges(self) -> ChallengeRepository:
        """Daily challenges and their problems."""
        ...

    @property
    def schedules(self) -> ScheduleRepository:
        """Channel schedules and the scheduler's claims."""
        ...

    @property
    def plays(self) -> PlayRepository:
        """Sessions and attempts."""
        ...

    @property
    def standings(self) -> StandingRepository:
        """Leaderboards, completions and badges."""
        ...

    @property
    def disputes(self) -> DisputeRepository:
        """Disputes and question flags."""
        ...

    @property
    def corrections(self) -> CorrectionRepository:
        """Answer corrections and re-scoring."""
        ...

    @property
    def practice(self) -> PracticeRepository:
        """Quizzes, flashcards and explain answers."""
        ...

    @property
    def practice_settings(self) -> PracticeSettingsRepository:
        """Each player's FSRS parameters and daily-nudge setting."""
        ...

    @property
    def outbox(self) -> OutboxRepository:
        """Outgoing posts queued until the platform accepts them."""
        ...

    @property
    def difficulty(self) -> DifficultyRepository:
        """Each tenant's learned question difficulty."""
        ...
