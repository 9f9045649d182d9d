"""The ``uow.practice`` storage port; its SQL implementation is bot/storage/repositories/practice.py."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Protocol

from bot.core.grading import ConceptResult
from bot.core.models import PlayerRef, QuestionCandidate
from bot.core.practice_models import PracticeTotals, QuizRow, ReviewCardRow
from bot.core.sm2 import CardState, Grade


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
