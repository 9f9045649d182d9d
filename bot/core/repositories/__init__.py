"""Storage ports: one small repository per area, reached through the unit of work (``uow.challenges``...).

Every repository works inside the transaction of the unit of work that handed it out; none commits.
One module per port here, mirrored by its implementation in bot/storage/repositories/ (``Sql*Repository``):

=================  ==========================================================================
``players``        players and channels: the platform identities every other row hangs off
``questions``      the question bank: imports, versions, retirement, candidates to pick from
``challenges``     daily challenges and their problems: create, find, post, close
``schedules``      channel schedules and the scheduler's one-time claims
``plays``          a player's sessions and attempts on problems (the start and answer paths)
``standings``      leaderboards, completions, badges and a player's record; on its base
                   (``ReportRepository``) what a channel's weekly team report reads
``disputes``       disputes (runner checks of an answer) and the flags they raise
``corrections``    answer corrections: re-judging stored plays and moving their points
``practice``       quizzes, flashcard reviews and explain answers (never in standings)
``practice_settings`` each player's fitted FSRS parameters and daily-nudge opt-in and claims
``outbox``         outgoing posts queued with the state change that causes them, until sent
``difficulty``     each tenant's learned question difficulty and the first attempts it comes from
``drafts``         admins' question drafts (written through by bot/adapters/drafts.py, not via the uow)
=================  ==========================================================================
"""

from __future__ import annotations

from bot.core.repositories.challenges import ChallengeRepository
from bot.core.repositories.corrections import CorrectionRepository, QuestionPlay
from bot.core.repositories.difficulty import (
    AskedAttempt,
    DifficultyRepository,
    LearnedDifficulty,
    TopicAccuracy,
)
from bot.core.repositories.disputes import DisputeRecord, DisputeRepository, QuestionFlag
from bot.core.repositories.drafts import DraftRepository, StoredDraftLike
from bot.core.repositories.outbox import OutboxItem, OutboxKind, OutboxRepository
from bot.core.repositories.players import PlayerRepository
from bot.core.repositories.plays import AnswerWrite, PlayRepository, ProblemTally
from bot.core.repositories.practice import (
    DeckRepository,
    PracticeRepository,
    PracticeSettingsRepository,
    TeamParametersRepository,
)
from bot.core.repositories.questions import QuestionRepository, QuestionRow, SyncReport
from bot.core.repositories.reports import ProblemFirstTries, ReportRepository
from bot.core.repositories.schedules import ScheduleRepository
from bot.core.repositories.standings import CompletionRow, StandingRepository

__all__ = [
    "AnswerWrite",
    "AskedAttempt",
    "ChallengeRepository",
    "CompletionRow",
    "CorrectionRepository",
    "DeckRepository",
    "DifficultyRepository",
    "DisputeRecord",
    "DisputeRepository",
    "DraftRepository",
    "LearnedDifficulty",
    "OutboxItem",
    "OutboxKind",
    "OutboxRepository",
    "PlayRepository",
    "PlayerRepository",
    "PracticeRepository",
    "PracticeSettingsRepository",
    "ProblemFirstTries",
    "ProblemTally",
    "QuestionFlag",
    "QuestionPlay",
    "QuestionRepository",
    "QuestionRow",
    "ReportRepository",
    "ScheduleRepository",
    "StandingRepository",
    "StoredDraftLike",
    "SyncReport",
    "TeamParametersRepository",
    "TopicAccuracy",
]
