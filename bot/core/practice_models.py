"""Practice modes as data: what to show (cards) and what the practice use cases need from storage (port).

Practice (quiz, flashcard review, explain) lives beside the competitive challenge and never touches
standings, points or badges; its results are stored in their own tables and reported separately.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from bot.core.grading import ConceptResult
from bot.core.models import Choice, PlayerRef, Question, QuestionCandidate
from bot.core.ports import UnitOfWork
from bot.core.srs import CardState, Grade, Phase

CardSource = Literal["bank", "mistake"]


# ---------------------------------------------------------------------------------------------- cards
@dataclass(frozen=True)
class QuizQuestionCard:
    """One untimed multiple-choice question of a practice quiz."""

    quiz_id: int
    position: int
    total: int
    question_id: str
    topic: str
    difficulty: str
    prompt: str
    code: str | None
    choices: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class QuizFeedback:
    """Immediate feedback on a quiz answer."""

    quiz_id: int
    position: int
    total: int
    letter: str
    correct: bool
    correct_letter: str
    choices: tuple[Choice, ...]
    explanation: str | None
    score: int
    answered: int
    finished: bool
    duplicate: bool = False


@dataclass(frozen=True)
class QuizItemResult:
    """One question's line in a quiz result."""

    position: int
    question_id: str
    topic: str
    letter: str | None
    correct: bool


@dataclass(frozen=True)
class QuizResultCard:
    """The end of a quiz: "You got 4/5"."""

    quiz_id: int
    topic: str | None
    correct: int
    total: int
    items: tuple[QuizItemResult, ...]


@dataclass(frozen=True)
class FlashcardCard:
    """A card to review: the front first, the back once revealed, and what each grade would schedule."""

    card_id: int
    question_id: str
    source: CardSource
    topic: str
    front: str
    code: str | None
    back: str
    explanation: str | None
    phase: Phase
    lapses: int
    next_intervals: tuple[tuple[Grade, str], ...]
    remaining: int
    showing: int = 0


@dataclass(frozen=True)
class ReviewOutcome:
    """What a self-grade did to a card."""

    card_id: int
    grade: Grade
    phase: Phase
    interval_days: int
    due: dt.datetime
    next_in: str
    lapses: int
    is_leech: bool
    duplicate: bool = False


@dataclass(frozen=True)
class ReviewSummary:
    """A player's deck: how many cards, how many due now, when the next one is due."""

    cards: int
    due_now: int
    new_cards: int
    added: int
    next_due: dt.datetime | None


@dataclass(frozen=True)
class ExplainPromptCard:
    """An explain prompt to answer in free text."""

    question_id: str
    version_id: int
    topic: str
    difficulty: str
    prompt: str
    hint: str | None
    concepts: int


@dataclass(frozen=True)
class ExplainResultCard:
    """The grade of an explain answer: "You got 3/5 concepts", the misses and the model answer."""

    attempt_id: int
    question_id: str
    covered: int
    total: int
    concepts: tuple[ConceptResult, ...]
    model_answer: str
    explanation: str | None

    @property
    def missed(self) -> tuple[str, ...]:
        """Names of the concepts the answer missed."""
        return tuple(c.name for c in self.concepts if not c.covered)


@dataclass(frozen=True)
class PracticeStatsCard:
    """A player's practice record, kept apart from the competitive stats and leaderboards."""

    display_name: str
    quizzes: int
    quiz_answers: int
    quiz_correct: int
    cards: int
    cards_due: int
    reviews: int
    explain_attempts: int
    concepts_covered: int
    concepts_total: int


@dataclass(frozen=True)
class DueNudge:
    """A player who has cards due (for a daily reminder)."""

    player: PlayerRef
    due: int


@dataclass(frozen=True)
class NudgeReport:
    """What one nudge run did: players reminded, skipped (already reminded today), failed to reach."""

    sent: tuple[PlayerRef, ...]
    failed: tuple[PlayerRef, ...]


@dataclass(frozen=True)
class OptimizeOutcome:
    """The result of optimising a player's FSRS parameters from their own review history."""

    reviews: int
    needed: int
    optimized: bool
    parameters: tuple[float, ...] | None
    reason: str


@dataclass(frozen=True)
class ReviewRecord:
    """One logged self-grade, as the FSRS optimizer reads it."""

    card_id: int
    grade: Grade
    reviewed_at: dt.datetime


# ---------------------------------------------------------------------------------------------- port rows
@dataclass(frozen=True)
class QuizItemRow:
    """A question placed in a quiz, and the answer if given."""

    position: int
    question: Question
    letter: str | None
    correct: bool | None


@dataclass(frozen=True)
class QuizRow:
    """A stored practice quiz."""

    id: int
    player_pk: int
    topic: str | None
    started_at: dt.datetime
    finished_at: dt.datetime | None
    items: tuple[QuizItemRow, ...]


@dataclass(frozen=True)
class ReviewCardRow:
    """A player's card and its scheduling state."""

    id: int
    player_pk: int
    question: Question
    source: CardSource
    state: CardState


@dataclass(frozen=True)
class PracticeTotals:
    """Aggregates of a player's practice."""

    quizzes: int
    quiz_answers: int
    quiz_correct: int
    cards: int
    cards_due: int
    new_cards: int
    reviews: int
    explain_attempts: int
    concepts_covered: int
    concepts_total: int
    next_due: dt.datetime | None


class PracticeUnitOfWork(UnitOfWork, Protocol):
    """The unit of work of practice use cases: the core's plus practice tables."""

    async def __aenter__(self) -> PracticeUnitOfWork: ...

    async def question_version(self, version_id: int) -> Question | None:
        """A stored question version."""
        ...

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

    async def practice_totals(self, player_pk: int, now: dt.datetime) -> PracticeTotals:
        """Counts of the player's quizzes, reviews, cards and explain attempts."""
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

    async def players_with_due_cards(self, now: dt.datetime) -> list[tuple[PlayerRef, int]]:
        """Players with at least one card due, and how many."""
        ...

    async def fsrs_parameters(self, player_pk: int) -> tuple[float, ...] | None:
        """The player's optimised FSRS parameters, or None (the defaults)."""
        ...

    async def save_fsrs_parameters(
        self, player_pk: int, parameters: Sequence[float], reviews: int, now: dt.datetime
    ) -> None:
        """Store the player's optimised parameters and how many reviews they came from."""
        ...

    async def review_history(self, player_pk: int) -> list[ReviewRecord]:
        """Every logged self-grade of the player's cards, oldest first."""
        ...

    async def optimization_candidates(self, min_reviews: int, stale_before: dt.datetime) -> list[PlayerRef]:
        """Players with at least ``min_reviews`` logged reviews whose parameters were never fitted, or
        fitted before ``stale_before``.
        """
        ...

    async def set_nudge(self, player_pk: int, enabled: bool, now: dt.datetime) -> None:
        """Turn the player's daily reminder of due cards on or off."""
        ...

    async def nudge_enabled(self, player_pk: int) -> bool:
        """Whether the player opted into the daily reminder."""
        ...

    async def nudge_candidates(self, now: dt.datetime, day: dt.date) -> list[tuple[int, PlayerRef, int]]:
        """Opted-in players with cards due at ``now`` and no reminder claimed for ``day``:
        (player_pk, player, cards due).
        """
        ...

    async def claim_nudge(self, player_pk: int, day: dt.date, due: int, now: dt.datetime) -> bool:
        """Claim the player's reminder of ``day`` (unique per player and day); False if already taken."""
        ...

    async def release_nudge(self, player_pk: int, day: dt.date) -> None:
        """Drop a claim whose message could not be delivered, so a later run tries again that day."""
        ...
