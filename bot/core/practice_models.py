"""Practice modes as data: what to show (cards) and the rows practice storage returns (its port is
bot/core/repositories/practice.py: PracticeRepository).

Practice (quiz, flashcard review, explain) lives beside the competitive challenge and never touches
standings, points or badges; its results are stored in their own tables and reported separately.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Literal

from bot.core.grading import ConceptResult
from bot.core.models import Choice, PlayerRef, Question
from bot.core.srs import CardState, Grade, Phase

CardSource = Literal["bank", "mistake"]
#: New cards a player studies a day unless they choose otherwise (Anki's default is 20; a bank card
#: here is a whole question, so fewer).
DEFAULT_NEW_PER_DAY = 10
#: The most new cards a day a player may choose (the column's CHECK says the same).
MAX_NEW_PER_DAY = 200


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
class TopicCount:
    """One topic of a player's deck: its active cards, studied ones due today, and new ones."""

    topic: str
    cards: int
    due: int
    new: int


@dataclass(frozen=True)
class DaySettings:
    """A player's day: new cards a day and IANA timezone (None: UTC)."""

    new_per_day: int = DEFAULT_NEW_PER_DAY
    timezone: str | None = None


@dataclass(frozen=True)
class ReviewSummary:
    """A player's deck: how many cards, how many due today (studied ones, plus the new cards left for
    today), when the next one is due, and the same per topic.
    """

    cards: int
    due_now: int
    new_cards: int
    added: int
    next_due: dt.datetime | None
    new_today: int = 0
    suspended: int = 0
    topics: tuple[TopicCount, ...] = ()


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
    #: The player's latest answer to this prompt failed: it is offered again (said on every surface).
    retry: bool = False

    @property
    def retry_note(self) -> str | None:
        """What every surface says above a prompt offered again, or None for a prompt not failed."""
        if not self.retry:
            return None
        return "Your last answer to this one did not pass: here it is again, to answer from memory."


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
    #: Whether the answer passed: enough concepts, no false claim, prose (bot/core/grading.py).
    passed: bool = False
    #: Concepts an answer must cover to pass.
    required: int = 0
    #: The prompt's version (a retry answers the same one) and its hint, shown after a failed answer.
    version_id: int = 0
    hint: str | None = None

    @property
    def verdict(self) -> str:
        """The verdict every surface shows under "You got k/n concepts": pass or not, and why."""
        if self.passed:
            return f"Passed ({self.required} of {self.total} concepts needed)."
        if self.misconceptions:
            why = "a false claim fails the answer, however many concepts it covers"
        elif self.note:
            why = "it lists keywords instead of explaining"
        else:
            why = f"{self.required} of {self.total} concepts are needed"
        return f"Not passed yet: {why}. Try again in your own words."

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
    #: Consecutive days (the player's own, cutoff to cutoff) with at least one review.
    review_streak: int = 0
    new_per_day: int = DEFAULT_NEW_PER_DAY
    timezone: str | None = None
    topics: tuple[TopicCount, ...] = ()


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
    #: "player", or the tenant key of a team fitted from its players' pooled reviews.
    scope: str = "player"


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
    #: Its question is retired: the card is kept but not shown.
    suspended: bool = False


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
    suspended: int = 0
