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
from bot.core.sm2 import CardState, Grade, Phase

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
    #: Why the whole answer earned nothing (it lists keywords instead of explaining), or None.
    note: str | None = None

    @property
    def missed(self) -> tuple[str, ...]:
        """Names of the concepts the answer missed."""
        return tuple(c.name for c in self.concepts if not c.covered)

    @property
    def misconceptions(self) -> tuple[ConceptResult, ...]:
        """Concepts failed by a false claim in the answer (each with its claim and correction)."""
        return tuple(c for c in self.concepts if c.misconception)


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
