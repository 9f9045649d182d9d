"""SQLAlchemy 2.0 typed models. Constraints carry the game's invariants (see ARCHITECTURE.md)."""

from __future__ import annotations

import datetime as dt
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    Date,
    DateTime,
    Double,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    TypeDecorator,
    UniqueConstraint,
    false,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class UtcDateTime(TypeDecorator[dt.datetime]):
    """Timezone-aware UTC datetimes on every backend (SQLite stores naive text; we re-attach UTC)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: dt.datetime | None, dialect: Dialect) -> dt.datetime | None:
        """Store in UTC; refuse naive datetimes (they are always a bug here)."""
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to the database; use timezone-aware UTC")
        return value.astimezone(dt.UTC)

    def process_result_value(self, value: dt.datetime | None, dialect: Dialect) -> dt.datetime | None:
        """Read back as aware UTC."""
        if value is None:
            return None
        return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)


class Base(DeclarativeBase):
    """Declarative base with the constraint naming convention (stable names for migrations)."""

    metadata = MetaData(naming_convention=NAMING)
    type_annotation_map: ClassVar[dict[Any, Any]] = {dt.datetime: UtcDateTime, dict[str, Any]: JSON}


class ChannelRow(Base):
    """A chat channel that gets challenges."""

    __tablename__ = "channels"
    __table_args__ = (UniqueConstraint("platform", "workspace_id", "channel_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    platform: Mapped[str] = mapped_column(String(32))
    workspace_id: Mapped[str] = mapped_column(String(64))
    channel_id: Mapped[str] = mapped_column(String(64))
    name: Mapped[str | None] = mapped_column(String(200))
    timezone: Mapped[str] = mapped_column(String(64), default="UTC")
    created_at: Mapped[dt.datetime]


class PlayerRow(Base):
    """A person, as one platform knows them."""

    __tablename__ = "players"
    __table_args__ = (UniqueConstraint("platform", "user_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    platform: Mapped[str] = mapped_column(String(32))
    user_id: Mapped[str] = mapped_column(String(64))
    display_name: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[dt.datetime]


#: A tenant's stored key, ``<platform>:<workspace id>`` (bot.core.models.Tenant).
TENANT_KEY = String(140)


class QuestionRow(Base):
    """A question's identity; its content lives in immutable versions.

    ``owner_tenant`` NULL: the operator's shared bank (every tenant plays it, only the operator changes it);
    set: a question a tenant's admin added, seen and played by that tenant only.
    ``retired_at`` is the operator's retirement (for everyone); a tenant retires through
    ``question_retirements``.
    """

    __tablename__ = "questions"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    created_at: Mapped[dt.datetime]
    retired_at: Mapped[dt.datetime | None]
    owner_tenant: Mapped[str | None] = mapped_column(TENANT_KEY, index=True)


class QuestionRetirementRow(Base):
    """A tenant retired a question for itself only (an overlay on the shared bank)."""

    __tablename__ = "question_retirements"
    __table_args__ = (
        UniqueConstraint("tenant", "question_id"),
        CheckConstraint("tenant <> ''", name="tenant_not_empty"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    tenant: Mapped[str] = mapped_column(TENANT_KEY)
    question_id: Mapped[str] = mapped_column(ForeignKey("questions.id", ondelete="CASCADE"), index=True)
    retired_at: Mapped[dt.datetime]


class QuestionVersionRow(Base):
    """One immutable version of a question; attempts point at the version that was asked."""

    __tablename__ = "question_versions"
    __table_args__ = (
        UniqueConstraint("question_id", "version"),
        UniqueConstraint("question_id", "content_hash"),
        CheckConstraint("version >= 1", name="version_positive"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    question_id: Mapped[str] = mapped_column(ForeignKey("questions.id", ondelete="RESTRICT"), index=True)
    version: Mapped[int] = mapped_column(Integer)
    #: NULL: a version of the shared (or owning tenant's) question; set: a tenant's correction, which only
    #: that tenant sees (the others keep the version before it).
    tenant: Mapped[str | None] = mapped_column(TENANT_KEY)
    content_hash: Mapped[str] = mapped_column(String(64))
    kind: Mapped[str] = mapped_column(String(32))
    topic: Mapped[str] = mapped_column(String(80))
    difficulty: Mapped[str] = mapped_column(String(16))
    spec: Mapped[dict[str, Any]]
    created_at: Mapped[dt.datetime]


class QuestionDifficultyRow(Base):
    """A question's difficulty learned from one tenant's first attempts (bot/core/difficulty.py): the
    posterior mean ``rating`` (logit scale) and precision ``information``, updated when a challenge that
    asked it closes, in the close's transaction. ``label`` is the bank's label of the version last asked
    (the prior, and what "disagree" compares with). A team's answers are its own: keyed by tenant.
    """

    __tablename__ = "question_difficulty"
    __table_args__ = (
        CheckConstraint("tenant <> ''", name="tenant_not_empty"),
        CheckConstraint("first_correct >= 0 AND first_correct <= first_attempts", name="counts_valid"),
        CheckConstraint("information > 0", name="information_positive"),
        CheckConstraint("rating >= -6 AND rating <= 6", name="rating_in_range"),
        # Not an enumeration of today's labels: a bank with a new level must not fail a challenge's close.
        CheckConstraint("label <> ''", name="label_not_empty"),
    )

    tenant: Mapped[str] = mapped_column(TENANT_KEY, primary_key=True)
    question_id: Mapped[str] = mapped_column(
        ForeignKey("questions.id", ondelete="CASCADE"), primary_key=True, index=True
    )
    label: Mapped[str] = mapped_column(String(16))
    rating: Mapped[float] = mapped_column(Double)
    information: Mapped[float] = mapped_column(Double)
    first_attempts: Mapped[int] = mapped_column(Integer, default=0)
    first_correct: Mapped[int] = mapped_column(Integer, default=0)
    updated_at: Mapped[dt.datetime]


class ChallengeRow(Base):
    """A channel's challenge of one day (unique per channel and date)."""

    __tablename__ = "challenges"
    __table_args__ = (
        UniqueConstraint("channel_pk", "day"),
        CheckConstraint("status IN ('open', 'closed')", name="status_valid"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    channel_pk: Mapped[int] = mapped_column(ForeignKey("channels.id", ondelete="CASCADE"))
    day: Mapped[dt.date] = mapped_column(Date)
    title: Mapped[str] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(8), default="open")
    opened_at: Mapped[dt.datetime]
    closes_at: Mapped[dt.datetime | None]
    closed_at: Mapped[dt.datetime | None]
    message_ref: Mapped[str | None] = mapped_column(String(200))
    # A schedule's overrides of each question's own time limit and attempts (NULL: the question's).
    time_limit_s: Mapped[int | None] = mapped_column(Integer)
    attempts: Mapped[int | None] = mapped_column(Integer)


class ProblemRow(Base):
    """A question version placed at a position of a challenge."""

    __tablename__ = "problems"
    __table_args__ = (
        UniqueConstraint("challenge_id", "position"),
        CheckConstraint("position >= 1", name="position_positive"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    challenge_id: Mapped[int] = mapped_column(ForeignKey("challenges.id", ondelete="CASCADE"))
    position: Mapped[int] = mapped_column(Integer)
    question_version_id: Mapped[int] = mapped_column(
        ForeignKey("question_versions.id", ondelete="RESTRICT"), index=True
    )


class PlaySessionRow(Base):
    """A player's play of one problem; the deadline is stored, so time-up never depends on a timer."""

    __tablename__ = "play_sessions"
    __table_args__ = (
        UniqueConstraint("problem_id", "player_pk"),
        CheckConstraint(
            "outcome IS NULL OR outcome IN ('correct', 'wrong', 'timeout')", name="outcome_valid"
        ),
        CheckConstraint("deadline > started_at", name="deadline_after_start"),
        Index("ix_play_sessions_player_pk", "player_pk"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    problem_id: Mapped[int] = mapped_column(ForeignKey("problems.id", ondelete="CASCADE"))
    player_pk: Mapped[int] = mapped_column(ForeignKey("players.id", ondelete="CASCADE"))
    started_at: Mapped[dt.datetime]
    deadline: Mapped[dt.datetime]
    hint_used_at: Mapped[dt.datetime | None]
    finished_at: Mapped[dt.datetime | None]
    outcome: Mapped[str | None] = mapped_column(String(8))
    points: Mapped[int] = mapped_column(Integer, default=0)


class AttemptRow(Base):
    """One answer. (session, attempt_no) is unique, so concurrent clicks cannot exceed the limit."""

    __tablename__ = "attempts"
    __table_args__ = (
        UniqueConstraint("session_id", "attempt_no"),
        UniqueConstraint("idempotency_key"),
        CheckConstraint("attempt_no >= 1", name="attempt_no_positive"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    session_id: Mapped[int] = mapped_column(ForeignKey("play_sessions.id", ondelete="CASCADE"))
    question_version_id: Mapped[int] = mapped_column(ForeignKey("question_versions.id", ondelete="RESTRICT"))
    attempt_no: Mapped[int] = mapped_column(Integer)
    letter: Mapped[str] = mapped_column(String(1))
    correct: Mapped[bool] = mapped_column(Boolean)
    answered_at: Mapped[dt.datetime]
    elapsed_ms: Mapped[int] = mapped_column(Integer)
    idempotency_key: Mapped[str | None] = mapped_column(String(200))


class StandingRowModel(Base):
    """Points per (scope, period, player), maintained on every solve so leaderboards never scan attempts.

    scope: ``ch:<channel pk>`` or ``ws:<platform>:<workspace id>``;
    period: ``all``, ``d:YYYY-MM-DD`` or ``w:YYYY-Www`` (the challenge's local date).
    """

    __tablename__ = "standings"
    # player_pk completes the index so rank counts are index-only scans (benchmarks/engine.py: PostgreSQL
    # leaderboard p95 38.7 -> 20.9 ms with 10,000 ranked players).
    __table_args__ = (Index("ix_standings_rank", "scope", "period", "points", "answer_ms", "player_pk"),)

    scope: Mapped[str] = mapped_column(String(100), primary_key=True)
    period: Mapped[str] = mapped_column(String(16), primary_key=True)
    player_pk: Mapped[int] = mapped_column(ForeignKey("players.id", ondelete="CASCADE"), primary_key=True)
    points: Mapped[int] = mapped_column(Integer, default=0)
    correct: Mapped[int] = mapped_column(Integer, default=0)
    answer_ms: Mapped[int] = mapped_column(BigInteger, default=0)


class CompletionRowModel(Base):
    """A player finished every problem of a challenge (drives streaks and badges)."""

    __tablename__ = "completions"
    __table_args__ = (
        UniqueConstraint("challenge_id", "player_pk"),
        Index("ix_completions_player", "player_pk"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    challenge_id: Mapped[int] = mapped_column(ForeignKey("challenges.id", ondelete="CASCADE"))
    player_pk: Mapped[int] = mapped_column(ForeignKey("players.id", ondelete="CASCADE"))
    channel_pk: Mapped[int] = mapped_column(ForeignKey("channels.id", ondelete="CASCADE"))
    day: Mapped[dt.date] = mapped_column(Date)
    problems: Mapped[int] = mapped_column(Integer)
    correct: Mapped[int] = mapped_column(Integer)
    hints_used: Mapped[int] = mapped_column(Integer)
    max_answer_ms: Mapped[int] = mapped_column(Integer)
    points: Mapped[int] = mapped_column(Integer)
    completed_at: Mapped[dt.datetime]


class BadgeRow(Base):
    """A badge earned; (player, badge, scope key) is unique, so awarding is idempotent."""

    __tablename__ = "badges"
    __table_args__ = (UniqueConstraint("player_pk", "badge", "scope_key"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    player_pk: Mapped[int] = mapped_column(ForeignKey("players.id", ondelete="CASCADE"))
    badge: Mapped[str] = mapped_column(String(32))
    scope_key: Mapped[str] = mapped_column(String(32))
    challenge_id: Mapped[int | None] = mapped_column(ForeignKey("challenges.id", ondelete="SET NULL"))
    awarded_at: Mapped[dt.datetime]


class ScheduleRow(Base):
    """A channel's posting schedule (one per channel); the scheduler rebuilds its jobs from these rows."""

    __tablename__ = "schedules"
    __table_args__ = (
        UniqueConstraint("channel_pk"),
        CheckConstraint("post_hour BETWEEN 0 AND 23", name="post_hour_valid"),
        CheckConstraint("post_minute BETWEEN 0 AND 59", name="post_minute_valid"),
        CheckConstraint("problems BETWEEN 1 AND 10", name="problems_valid"),
        CheckConstraint("days <> ''", name="days_not_empty"),
        CheckConstraint("window_minutes IS NULL OR window_minutes > 0", name="window_positive"),
        CheckConstraint("reminder_minutes IS NULL OR reminder_minutes > 0", name="reminder_positive"),
        CheckConstraint("version > 0", name="version_positive"),
        # The team report is posted with the weekly summary (its day and time): none without one.
        CheckConstraint("NOT team_report OR summary_day IS NOT NULL", name="team_report_needs_summary"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    channel_pk: Mapped[int] = mapped_column(ForeignKey("channels.id", ondelete="CASCADE"))
    post_hour: Mapped[int] = mapped_column(Integer)
    post_minute: Mapped[int] = mapped_column(Integer)
    timezone: Mapped[str] = mapped_column(String(64))
    #: ISO weekdays as digits, Monday=1: "12345" is Monday to Friday.
    days: Mapped[str] = mapped_column(String(7))
    problems: Mapped[int] = mapped_column(Integer)
    time_limit_s: Mapped[int | None] = mapped_column(Integer)
    attempts: Mapped[int | None] = mapped_column(Integer)
    #: NULL: the window lasts until the next scheduled post.
    window_minutes: Mapped[int | None] = mapped_column(Integer)
    reminder_minutes: Mapped[int | None] = mapped_column(Integer)
    #: ISO weekday of the weekly summary post (NULL: none).
    summary_day: Mapped[int | None] = mapped_column(Integer)
    paused: Mapped[bool] = mapped_column(Boolean, default=False)
    updated_at: Mapped[dt.datetime]
    #: Bumped by every save; a save names the version it read (optimistic concurrency, migration 0011).
    version: Mapped[int] = mapped_column(Integer, default=1, server_default="1")
    #: The channel's opt-in to the weekly team report (migration 0018; off by default).
    team_report: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())


class SchedulerClaimRow(Base):
    """Exactly-once side effects of the scheduler (reminders, weekly summaries): the first insert wins."""

    __tablename__ = "scheduler_claims"
    __table_args__ = (UniqueConstraint("kind", "key"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))
    key: Mapped[str] = mapped_column(String(100))
    claimed_at: Mapped[dt.datetime]


# ---------------------------------------------------------------- disputes (issue 7)
class DisputeRowModel(Base):
    """A run of a question's code (or a player's variant of it) asked for by a player.

    Also the rate limiter's ledger: a player's recent rows are counted before a new run is allowed.
    """

    __tablename__ = "disputes"
    __table_args__ = (
        CheckConstraint(
            "verification IN ('confirmed', 'contradicted', 'cannot_check')", name="verification_valid"
        ),
        Index("ix_disputes_player_created", "player_pk", "created_at"),
        Index("ix_disputes_tenant_created", "tenant", "created_at"),
        CheckConstraint("tenant <> ''", name="tenant_not_empty"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    #: Where the dispute was asked (the problem's challenge's tenant).
    tenant: Mapped[str] = mapped_column(TENANT_KEY)
    player_pk: Mapped[int] = mapped_column(ForeignKey("players.id", ondelete="CASCADE"))
    question_version_id: Mapped[int] = mapped_column(
        ForeignKey("question_versions.id", ondelete="RESTRICT"), index=True
    )
    problem_id: Mapped[int | None] = mapped_column(ForeignKey("problems.id", ondelete="SET NULL"))
    variant: Mapped[bool] = mapped_column(Boolean, default=False)
    code_sha256: Mapped[str] = mapped_column(String(64))
    verdict_status: Mapped[str] = mapped_column(String(16))
    verification: Mapped[str] = mapped_column(String(16))
    matched_letter: Mapped[str | None] = mapped_column(String(1))
    official_letter: Mapped[str | None] = mapped_column(String(1))
    explanation: Mapped[str] = mapped_column(String(4000))
    verdict: Mapped[dict[str, Any]]
    created_at: Mapped[dt.datetime]


class QuestionFlagRow(Base):
    """A question version whose official answer the runner contradicted; one flag per version."""

    __tablename__ = "question_flags"
    __table_args__ = (
        UniqueConstraint("tenant", "question_version_id"),
        CheckConstraint("status IN ('open', 'resolved')", name="status_valid"),
        CheckConstraint("tenant <> ''", name="tenant_not_empty"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    #: The tenant whose dispute raised it: its admins see it and resolve it by correcting.
    tenant: Mapped[str] = mapped_column(TENANT_KEY)
    question_id: Mapped[str] = mapped_column(ForeignKey("questions.id", ondelete="CASCADE"), index=True)
    question_version_id: Mapped[int] = mapped_column(ForeignKey("question_versions.id", ondelete="CASCADE"))
    dispute_id: Mapped[int | None] = mapped_column(ForeignKey("disputes.id", ondelete="SET NULL"))
    official_letter: Mapped[str | None] = mapped_column(String(1))
    matched_letter: Mapped[str | None] = mapped_column(String(1))
    explanation: Mapped[str] = mapped_column(String(4000))
    status: Mapped[str] = mapped_column(String(8), default="open")
    created_at: Mapped[dt.datetime]
    resolved_at: Mapped[dt.datetime | None]


class AnswerCorrectionRow(Base):
    """An admin fixed a question's answer: the new version, and how much re-scoring moved."""

    __tablename__ = "answer_corrections"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    #: NULL: the operator corrected the shared bank (every tenant re-scored); set: one tenant's correction.
    tenant: Mapped[str | None] = mapped_column(TENANT_KEY, index=True)
    question_id: Mapped[str] = mapped_column(ForeignKey("questions.id", ondelete="CASCADE"), index=True)
    from_version_id: Mapped[int] = mapped_column(ForeignKey("question_versions.id", ondelete="RESTRICT"))
    to_version_id: Mapped[int] = mapped_column(ForeignKey("question_versions.id", ondelete="RESTRICT"))
    old_letter: Mapped[str | None] = mapped_column(String(1))
    new_letter: Mapped[str] = mapped_column(String(1))
    corrected_by: Mapped[str] = mapped_column(String(200))
    corrected_at: Mapped[dt.datetime]
    sessions_rescored: Mapped[int] = mapped_column(Integer, default=0)
    points_delta: Mapped[int] = mapped_column(Integer, default=0)


class CorrectionNoteRow(Base):
    """A correction's note for one channel, shown once in that channel's next results post."""

    __tablename__ = "correction_notes"
    __table_args__ = (UniqueConstraint("correction_id", "channel_pk"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    correction_id: Mapped[int] = mapped_column(ForeignKey("answer_corrections.id", ondelete="CASCADE"))
    channel_pk: Mapped[int] = mapped_column(ForeignKey("channels.id", ondelete="CASCADE"), index=True)
    text: Mapped[str] = mapped_column(String(2000))
    announced_at: Mapped[dt.datetime | None]


# ---------------------------------------------------------------- practice (issue 8): never read by standings
class PracticeQuizRow(Base):
    """A practice quiz: untimed multiple-choice questions, scored apart from the leaderboard."""

    __tablename__ = "practice_quizzes"
    __table_args__ = (
        CheckConstraint("size >= 1", name="size_positive"),
        CheckConstraint("correct IS NULL OR (correct >= 0 AND correct <= size)", name="correct_in_range"),
        Index("ix_practice_quizzes_player", "player_pk"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    player_pk: Mapped[int] = mapped_column(ForeignKey("players.id", ondelete="CASCADE"))
    topic: Mapped[str | None] = mapped_column(String(80))
    size: Mapped[int] = mapped_column(Integer)
    correct: Mapped[int | None] = mapped_column(Integer)
    started_at: Mapped[dt.datetime]
    finished_at: Mapped[dt.datetime | None]


class PracticeQuizItemRow(Base):
    """A question of a quiz and the one answer given to it ((quiz, position) is unique)."""

    __tablename__ = "practice_quiz_items"
    __table_args__ = (
        UniqueConstraint("quiz_id", "position"),
        CheckConstraint("position >= 1", name="position_positive"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    quiz_id: Mapped[int] = mapped_column(ForeignKey("practice_quizzes.id", ondelete="CASCADE"))
    position: Mapped[int] = mapped_column(Integer)
    question_version_id: Mapped[int] = mapped_column(
        ForeignKey("question_versions.id", ondelete="RESTRICT"), index=True
    )
    letter: Mapped[str | None] = mapped_column(String(1))
    correct: Mapped[bool | None] = mapped_column(Boolean)
    answered_at: Mapped[dt.datetime | None]


class ReviewCardModel(Base):
    """A player's flashcard and its FSRS state; one per (player, question), due dates stored.

    ``phase`` is FSRS's state plus ``new`` (Learning, never reviewed); ``stability`` (days) and
    ``difficulty`` (1-10) are FSRS's memory state, NULL until the first review.
    """

    __tablename__ = "review_cards"
    __table_args__ = (
        UniqueConstraint("player_pk", "question_id"),
        CheckConstraint("source IN ('bank', 'mistake')", name="source_valid"),
        CheckConstraint("phase IN ('new', 'learning', 'review', 'relearning')", name="phase_valid"),
        CheckConstraint("interval_days >= 0 AND step >= 0 AND reps >= 0 AND lapses >= 0", name="counts"),
        CheckConstraint("stability IS NULL OR stability > 0", name="stability_positive"),
        CheckConstraint(
            "difficulty IS NULL OR (difficulty >= 1 AND difficulty <= 10)", name="difficulty_range"
        ),
        Index("ix_review_cards_due", "player_pk", "due_at"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    player_pk: Mapped[int] = mapped_column(ForeignKey("players.id", ondelete="CASCADE"))
    question_id: Mapped[str] = mapped_column(ForeignKey("questions.id", ondelete="CASCADE"))
    source: Mapped[str] = mapped_column(String(8))
    phase: Mapped[str] = mapped_column(String(12))
    step: Mapped[int] = mapped_column(Integer)
    stability: Mapped[float | None] = mapped_column(Double)
    difficulty: Mapped[float | None] = mapped_column(Double)
    interval_days: Mapped[int] = mapped_column(Integer)
    due_at: Mapped[dt.datetime]
    reps: Mapped[int] = mapped_column(Integer)
    lapses: Mapped[int] = mapped_column(Integer)
    last_reviewed_at: Mapped[dt.datetime | None]
    created_at: Mapped[dt.datetime]
    #: When the card was first reviewed (it stopped being new): the new-cards-per-day limit counts these.
    introduced_at: Mapped[dt.datetime | None]


class CardReviewRow(Base):
    """One self-grade of a card (the review log the FSRS optimizer learns from), with the schedule it
    produced. ``ease`` is set on reviews logged under SM-2 (before FSRS), ``stability``/``difficulty``
    on reviews scheduled by FSRS.
    """

    __tablename__ = "card_reviews"
    __table_args__ = (
        CheckConstraint("grade IN ('again', 'hard', 'good', 'easy')", name="grade_valid"),
        Index("ix_card_reviews_card", "card_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    card_id: Mapped[int] = mapped_column(ForeignKey("review_cards.id", ondelete="CASCADE"))
    grade: Mapped[str] = mapped_column(String(5))
    reviewed_at: Mapped[dt.datetime]
    phase: Mapped[str] = mapped_column(String(12))
    interval_days: Mapped[int] = mapped_column(Integer)
    ease: Mapped[int | None] = mapped_column(Integer)
    stability: Mapped[float | None] = mapped_column(Double)
    difficulty: Mapped[float | None] = mapped_column(Double)
    due_at: Mapped[dt.datetime]


class PracticeSettingsRow(Base):
    """A player's practice settings: the daily nudge opt-in, their optimised FSRS parameters, how many new
    cards a day they study, and their day (an IANA timezone; NULL: UTC).
    """

    __tablename__ = "practice_settings"
    __table_args__ = (
        CheckConstraint("parameters_reviews IS NULL OR parameters_reviews >= 0", name="reviews_counted"),
        CheckConstraint("new_per_day >= 0 AND new_per_day <= 200", name="new_per_day_range"),
        CheckConstraint("timezone IS NULL OR timezone <> ''", name="timezone_not_empty"),
    )

    player_pk: Mapped[int] = mapped_column(ForeignKey("players.id", ondelete="CASCADE"), primary_key=True)
    daily_nudge: Mapped[bool] = mapped_column(Boolean, default=False)
    #: FSRS's 21 parameters fitted to this player's reviews (NULL: the defaults).
    fsrs_parameters: Mapped[list[Any] | None] = mapped_column(JSON)
    parameters_reviews: Mapped[int | None] = mapped_column(Integer)
    parameters_at: Mapped[dt.datetime | None]
    updated_at: Mapped[dt.datetime]
    new_per_day: Mapped[int] = mapped_column(Integer, default=10, server_default="10")
    timezone: Mapped[str | None] = mapped_column(String(64))


class PracticeTeamParametersRow(Base):
    """FSRS parameters fitted to the pooled reviews of one tenant's players (a team): what a player of
    that team is scheduled with until their own history is long enough to fit their own.
    """

    __tablename__ = "practice_team_parameters"
    __table_args__ = (
        CheckConstraint("reviews >= 0 AND players >= 1", name="counts"),
        CheckConstraint("tenant <> ''", name="tenant_not_empty"),
    )

    tenant: Mapped[str] = mapped_column(TENANT_KEY, primary_key=True)
    fsrs_parameters: Mapped[list[Any]] = mapped_column(JSON)
    reviews: Mapped[int] = mapped_column(Integer)
    players: Mapped[int] = mapped_column(Integer)
    fitted_at: Mapped[dt.datetime]


class PracticeNudgeRow(Base):
    """The claim of one player's daily reminder: unique per player and day (the player's own day, in their
    timezone, starting at the day cutoff), taken before sending.
    """

    __tablename__ = "practice_nudges"
    __table_args__ = (
        UniqueConstraint("player_pk", "day"),
        CheckConstraint("due >= 1", name="due_positive"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    player_pk: Mapped[int] = mapped_column(ForeignKey("players.id", ondelete="CASCADE"))
    day: Mapped[dt.date] = mapped_column(Date)
    due: Mapped[int] = mapped_column(Integer)
    claimed_at: Mapped[dt.datetime]


class ExplainAttemptRow(Base):
    """A graded free-text answer to an explain prompt."""

    __tablename__ = "explain_attempts"
    __table_args__ = (
        CheckConstraint("covered >= 0 AND covered <= total", name="covered_in_range"),
        Index("ix_explain_attempts_player", "player_pk"),
        Index("ix_explain_attempts_player_version", "player_pk", "question_version_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    player_pk: Mapped[int] = mapped_column(ForeignKey("players.id", ondelete="CASCADE"))
    question_version_id: Mapped[int] = mapped_column(
        ForeignKey("question_versions.id", ondelete="RESTRICT"), index=True
    )
    answer: Mapped[str] = mapped_column(String(5000))
    covered: Mapped[int] = mapped_column(Integer)
    total: Mapped[int] = mapped_column(Integer)
    concepts: Mapped[list[Any]] = mapped_column(JSON)
    #: The verdict (issue 28): a failed prompt is offered again. NULL: graded before verdicts were kept.
    passed: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    created_at: Mapped[dt.datetime]


# ---------------------------------------------------------------- chat forms (issue 15)
class QuestionDraftRow(Base):
    """An admin's question from a chat form, waiting for Save (kept across restarts and processes), or
    the outcome of a closed one (so a late second Save says "already added").
    """

    __tablename__ = "question_drafts"

    key: Mapped[str] = mapped_column(String(32), primary_key=True)
    owner_id: Mapped[str] = mapped_column(String(200))
    spec: Mapped[dict[str, Any]]
    created_at: Mapped[dt.datetime] = mapped_column(index=True)
    #: Set when the draft was saved or cancelled (the spec is then kept only for its outcome).
    outcome: Mapped[str | None] = mapped_column(String(500))
    closed_at: Mapped[dt.datetime | None]


class FormDraftRow(Base):
    """What an admin typed into a question form (bot/core/repositories/form_drafts.py), kept a day so a
    form lost to a timeout or a restart can be reopened filled in. Tenant- and owner-scoped.
    """

    __tablename__ = "form_drafts"
    __table_args__ = (
        CheckConstraint("tenant <> ''", name="tenant_not_empty"),
        CheckConstraint("owner_id <> ''", name="owner_not_empty"),
        CheckConstraint("nonce <> ''", name="nonce_not_empty"),
        CheckConstraint("expires_at > updated_at", name="expires_after_update"),
        # An error is the outcome of a submission: a form only opened has none.
        CheckConstraint("error IS NULL OR submitted_at IS NOT NULL", name="error_needs_submission"),
        Index("ix_form_drafts_tenant_owner_id_updated_at", "tenant", "owner_id", "updated_at"),
    )

    #: The random part of the form's custom id (``rz:qform:<nonce>``).
    nonce: Mapped[str] = mapped_column(String(32), primary_key=True)
    tenant: Mapped[str] = mapped_column(TENANT_KEY)
    owner_id: Mapped[str] = mapped_column(String(64))
    question_id: Mapped[str] = mapped_column(String(64))
    kind: Mapped[str] = mapped_column(String(32))
    topic: Mapped[str] = mapped_column(String(80))
    difficulty: Mapped[str] = mapped_column(String(32))
    #: The five text fields by name ({} until the first submission).
    inputs: Mapped[dict[str, Any]]
    error: Mapped[str | None] = mapped_column(String(2000))
    submitted_at: Mapped[dt.datetime | None]
    updated_at: Mapped[dt.datetime]
    expires_at: Mapped[dt.datetime] = mapped_column(index=True)


class DeliveredEventRow(Base):
    """A chat platform event already handled (its delivery id), so a redelivery reaching any process is
    dropped; rows older than an hour are purged (platforms retry within minutes).
    """

    __tablename__ = "delivered_events"

    key: Mapped[str] = mapped_column(String(200), primary_key=True)
    seen_at: Mapped[dt.datetime] = mapped_column(index=True)


# ---------------------------------------------------------------- the outbox (issue 25)
#: What the outbox delivers (bot/core/outbox.py).
OUTBOX_KINDS = ("challenge", "reminder", "results", "summary", "notice", "team_report")
#: pending: to deliver; sent: the platform accepted it; failed: given up (the admins were told).
OUTBOX_STATES = ("pending", "sent", "failed")


class OutboxRow(Base):
    """An outgoing post, written in the transaction of the state change that causes it (a challenge
    created, a reminder claimed, a challenge closed) and marked sent only once the platform accepted it.

    The row is the claim: a sender takes it with ``UPDATE ... WHERE claimed_until < now`` (one winner on
    PostgreSQL and SQLite alike) for a lease; a sender that dies mid-send leaves it pending, and the next
    one takes it when the lease ends. One row per (kind, key): a post is queued once.
    """

    __tablename__ = "outbox"
    __table_args__ = (
        UniqueConstraint("kind", "key"),
        CheckConstraint(
            "kind IN ('challenge', 'reminder', 'results', 'summary', 'notice', 'team_report')",
            name="kind_valid",
        ),
        CheckConstraint("status IN ('pending', 'sent', 'failed')", name="status_valid"),
        CheckConstraint("tenant <> ''", name="tenant_not_empty"),
        CheckConstraint("attempts >= 0", name="attempts_not_negative"),
        CheckConstraint("parts_sent >= 0", name="parts_sent_not_negative"),
        Index("ix_outbox_status_next_attempt_at", "status", "next_attempt_at"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    #: The tenant of the channel it goes to (``<platform>:<workspace id>``).
    tenant: Mapped[str] = mapped_column(TENANT_KEY, index=True)
    channel_pk: Mapped[int] = mapped_column(ForeignKey("channels.id", ondelete="CASCADE"))
    #: The challenge it belongs to; NULL for a weekly summary (a channel's week, no one challenge).
    challenge_id: Mapped[int | None] = mapped_column(
        ForeignKey("challenges.id", ondelete="CASCADE"), index=True
    )
    kind: Mapped[str] = mapped_column(String(16))
    key: Mapped[str] = mapped_column(String(120))
    #: What the post needs beyond the stored challenge (the results' correction notes).
    payload: Mapped[dict[str, Any]]
    status: Mapped[str] = mapped_column(String(8), default="pending")
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[dt.datetime]
    #: A sender holds it until then (NULL: nobody).
    claimed_until: Mapped[dt.datetime | None]
    last_error: Mapped[str | None] = mapped_column(String(500))
    #: The cause the admins were last told of (each cause is told once).
    told: Mapped[str | None] = mapped_column(String(200))
    message_ref: Mapped[str | None] = mapped_column(String(200))
    #: How many messages of a post in several parts the platform accepted (a retry sends the rest).
    parts_sent: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    created_at: Mapped[dt.datetime]
    sent_at: Mapped[dt.datetime | None]


# ---------------------------------------------------------------- Slack OAuth installs (issue 17)
# slack_sdk's AsyncSQLAlchemyInstallationStore and AsyncSQLAlchemyOAuthStateStore read and write these three
# tables through their own Table objects (built by their public build_*_table class methods); the tables
# are declared here so that a migration creates them and `alembic check` keeps them in step.
# tests/bot/adapters/slack/test_slack_oauth.py compares these declarations with slack_sdk's, column by
# column. Their datetimes
# are naive UTC, as slack_sdk writes them (slack_sdk.oauth.sqlalchemy_utils.normalize_datetime_for_db).
# One difference (migration 0009, issue 24): the token columns are wider than slack_sdk's 200, since they
# hold the tokens encrypted (bot/secret_box.py: a 200-character token takes about 370).
SEALED_TOKEN_LENGTH = 1000


class SlackInstallationRow(Base):
    """One OAuth install of the Slack app: by a user in a workspace, or org-wide on Enterprise Grid
    (``is_enterprise_install``, ``enterprise_id`` set and ``team_id`` maybe empty). The latest row per
    (client, enterprise, team) is the current one; slack_sdk keeps the history.
    """

    __tablename__ = "slack_installations"
    __table_args__ = (
        Index("slack_installations_idx", "client_id", "enterprise_id", "team_id", "user_id", "installed_at"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    client_id: Mapped[str] = mapped_column(String(32))
    app_id: Mapped[str] = mapped_column(String(32))
    enterprise_id: Mapped[str | None] = mapped_column(String(32))
    enterprise_name: Mapped[str | None] = mapped_column(String(200))
    enterprise_url: Mapped[str | None] = mapped_column(String(200))
    team_id: Mapped[str | None] = mapped_column(String(32))
    team_name: Mapped[str | None] = mapped_column(String(200))
    bot_token: Mapped[str | None] = mapped_column(String(SEALED_TOKEN_LENGTH))
    bot_id: Mapped[str | None] = mapped_column(String(32))
    bot_user_id: Mapped[str | None] = mapped_column(String(32))
    bot_scopes: Mapped[str | None] = mapped_column(String(1000))
    bot_refresh_token: Mapped[str | None] = mapped_column(String(SEALED_TOKEN_LENGTH))
    bot_token_expires_at: Mapped[dt.datetime | None] = mapped_column(DateTime)
    user_id: Mapped[str] = mapped_column(String(32))
    user_token: Mapped[str | None] = mapped_column(String(SEALED_TOKEN_LENGTH))
    user_scopes: Mapped[str | None] = mapped_column(String(1000))
    user_refresh_token: Mapped[str | None] = mapped_column(String(SEALED_TOKEN_LENGTH))
    user_token_expires_at: Mapped[dt.datetime | None] = mapped_column(DateTime)
    incoming_webhook_url: Mapped[str | None] = mapped_column(String(200))
    incoming_webhook_channel: Mapped[str | None] = mapped_column(String(200))
    incoming_webhook_channel_id: Mapped[str | None] = mapped_column(String(200))
    incoming_webhook_configuration_url: Mapped[str | None] = mapped_column(String(200))
    is_enterprise_install: Mapped[bool] = mapped_column(Boolean, default=False)
    token_type: Mapped[str | None] = mapped_column(String(32))
    installed_at: Mapped[dt.datetime] = mapped_column(DateTime)


class SlackBotRow(Base):
    """The bot token of one workspace (or Grid org) install: what posts there. Deleted on uninstall."""

    __tablename__ = "slack_bots"
    __table_args__ = (Index("slack_bots_idx", "client_id", "enterprise_id", "team_id", "installed_at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    client_id: Mapped[str] = mapped_column(String(32))
    app_id: Mapped[str] = mapped_column(String(32))
    enterprise_id: Mapped[str | None] = mapped_column(String(32))
    enterprise_name: Mapped[str | None] = mapped_column(String(200))
    team_id: Mapped[str | None] = mapped_column(String(32))
    team_name: Mapped[str | None] = mapped_column(String(200))
    bot_token: Mapped[str | None] = mapped_column(String(SEALED_TOKEN_LENGTH))
    bot_id: Mapped[str | None] = mapped_column(String(32))
    bot_user_id: Mapped[str | None] = mapped_column(String(32))
    bot_scopes: Mapped[str | None] = mapped_column(String(1000))
    bot_refresh_token: Mapped[str | None] = mapped_column(String(SEALED_TOKEN_LENGTH))
    bot_token_expires_at: Mapped[dt.datetime | None] = mapped_column(DateTime)
    is_enterprise_install: Mapped[bool] = mapped_column(Boolean, default=False)
    installed_at: Mapped[dt.datetime] = mapped_column(DateTime)


class SlackOAuthStateRow(Base):
    """An OAuth ``state`` handed to an installer's browser: good once, until ``expire_at`` (naive UTC)."""

    __tablename__ = "slack_oauth_states"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    state: Mapped[str] = mapped_column(String(200))
    expire_at: Mapped[dt.datetime] = mapped_column(DateTime)
