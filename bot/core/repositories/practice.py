"""The ``uow.practice`` and ``uow.practice_settings`` ports (SQL: bot/storage/repositories/practice.py)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Protocol

from bot.core.grading import ConceptResult
from bot.core.models import PlayerRef, QuestionCandidate, Tenant
from bot.core.practice_models import (
    DaySettings,
    PracticeTotals,
    QuizRow,
    ReviewCardRow,
    ReviewRecord,
    TopicCount,
)
from bot.core.srs import CardState, Grade


class DeckRepository(Protocol):
    """Each player's flashcard deck (``uow.practice``): cards, their state and review history."""

    async def ensure_review_cards(self, player_pk: int, now: dt.datetime) -> int:
        """Give the player a card for every question of the deck (bot.core.deck) and every shared
        challenge question they got wrong or timed out on (idempotent: unique per player and question);
        return how many were added.
        """
        ...

    async def add_mistake_card(self, player_pk: int, question_id: str, now: dt.datetime) -> bool:
        """Put a shared-bank question the player got wrong in their deck once (a new card moves ahead of
        the bank's new cards); True when added or moved ahead.
        """
        ...

    async def due_cards(
        self,
        player_pk: int,
        until: dt.datetime,
        limit: int,
        phases: Sequence[str] | None = None,
        view: Tenant | None = None,
    ) -> list[ReviewCardRow]:
        """The player's studied (not new), active cards due by ``until`` (optionally of these phases).
        ``view``: the tenant reviewing (the versions shown are the ones it sees; None: the shared bank).
        """
        ...

    async def day_due_cards(
        self, player_pk: int, now: dt.datetime, day_end: dt.datetime, limit: int, view: Tenant | None = None
    ) -> list[ReviewCardRow]:
        """Studied active cards due for the player's day: (re)learning ones by ``now``, review ones
        before ``day_end``; soonest first. ``view``: as due_cards.
        """
        ...

    async def new_cards(self, player_pk: int, limit: int, view: Tenant | None = None) -> list[ReviewCardRow]:
        """The player's next active new cards: mistakes first, then the bank's in the deck's order.
        ``view``: as due_cards.
        """
        ...

    async def introduced_since(self, player_pk: int, since: dt.datetime) -> int:
        """How many of the player's cards were studied for the first time at or after ``since``."""
        ...

    async def deck_topics(self, player_pk: int, now: dt.datetime, day_end: dt.datetime) -> list[TopicCount]:
        """Per topic: the player's active cards, studied ones due for the day, new ones."""
        ...

    async def review_times(self, player_pk: int, since: dt.datetime) -> list[dt.datetime]:
        """When the player reviewed a card, since ``since``."""
        ...

    async def set_card_state(self, card_id: int, before: CardState, after: CardState) -> bool:
        """Replace a card's schedule (after new FSRS parameters) if it is still ``before``; no review
        is logged. False when the card was graded meanwhile.
        """
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

    async def review_history(self, player_pk: int) -> list[ReviewRecord]:
        """Every logged self-grade of the player's cards, oldest first (what FSRS's optimizer learns from)."""
        ...


class PracticeRepository(DeckRepository, Protocol):
    """Quizzes, flashcard reviews and explain answers (``uow.practice``); never joined into standings. The
    deck's members are :class:`DeckRepository`'s (split so that each port stays narrow).
    """

    async def practice_candidates(
        self, player_pk: int, kinds: Sequence[str], view: Tenant | None = None
    ) -> list[QuestionCandidate]:
        """Questions of these kinds as ``view`` plays them (latest version it sees, not retired for it, its
        own questions included; None: the shared bank alone); ``uses`` = times this player practised it.
        """
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

    async def add_explain_attempt(
        self,
        player_pk: int,
        version_id: int,
        answer: str,
        concepts: Sequence[ConceptResult],
        now: dt.datetime,
        *,
        passed: bool,
    ) -> int:
        """Store a graded explain answer with its verdict; return its id."""
        ...

    async def failed_explains(self, player_pk: int) -> dict[str, dt.datetime]:
        """Question id -> when, for the explain prompts whose latest attempt by this player failed (any
        version of the question counts: a reworded prompt is still the one they failed).
        """
        ...

    async def practice_totals(
        self, player_pk: int, now: dt.datetime, day_end: dt.datetime | None = None
    ) -> PracticeTotals:
        """Counts of the player's quizzes, reviews, cards and explain attempts; ``cards_due``: studied
        active cards due for the day ending at ``day_end`` (None: due now).
        """
        ...


class TeamParametersRepository(Protocol):
    """Teams (the tenant a player plays most) and their fitted FSRS parameters (``uow.practice_settings``)."""

    async def player_team(self, player_pk: int) -> str | None:
        """The tenant whose daily challenges the player played most, or None."""
        ...

    async def teams(self) -> list[str]:
        """Every tenant with a channel."""
        ...

    async def team_players(self, tenant: str) -> list[int]:
        """Players whose team is ``tenant`` and who reviewed a card."""
        ...

    async def reviewer_teams(self) -> dict[int, str]:
        """Every player who reviewed a card -> their team (as :meth:`player_team`), in one query."""
        ...

    async def team_parameters(self, tenant: str) -> tuple[float, ...] | None:
        """The team's fitted FSRS parameters, or None."""
        ...

    async def team_fitted_at(self, tenant: str) -> dt.datetime | None:
        """When the team's parameters were fitted, or None."""
        ...

    async def save_team_parameters(
        self, tenant: str, parameters: Sequence[float], reviews: int, players: int, now: dt.datetime
    ) -> None:
        """Store (or replace) the team's fitted parameters."""
        ...


class PracticeSettingsRepository(TeamParametersRepository, Protocol):
    """Each player's practice settings (``uow.practice_settings``): FSRS parameters, the daily nudge, the
    player's day; the team members are :class:`TeamParametersRepository`'s.
    """

    async def fsrs_parameters(self, player_pk: int) -> tuple[float, ...] | None:
        """The player's optimised FSRS parameters, or None (the defaults)."""
        ...

    async def save_fsrs_parameters(
        self, player_pk: int, parameters: Sequence[float], reviews: int, now: dt.datetime
    ) -> None:
        """Store the player's optimised parameters and how many reviews they came from."""
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

    async def nudge_candidates(self, now: dt.datetime) -> list[tuple[int, PlayerRef, str | None]]:
        """Opted-in players with an active card due at ``now``: (player_pk, player, timezone)."""
        ...

    async def nudge_claimed(self, player_pk: int, day: dt.date) -> bool:
        """Whether the player's reminder of ``day`` is already claimed."""
        ...

    async def day_settings(self, player_pk: int) -> DaySettings:
        """The player's new cards per day and timezone."""
        ...

    async def set_new_per_day(self, player_pk: int, count: int, now: dt.datetime) -> None:
        """Set how many new cards a day the player studies."""
        ...

    async def set_timezone(self, player_pk: int, timezone: str | None, now: dt.datetime) -> None:
        """Set the player's IANA timezone (None: UTC)."""
        ...

    async def claim_nudge(self, player_pk: int, day: dt.date, due: int, now: dt.datetime) -> bool:
        """Claim the player's reminder of ``day`` (unique per player and day); False if already taken."""
        ...

    async def release_nudge(self, player_pk: int, day: dt.date) -> None:
        """Drop a claim whose message could not be delivered, so a later run tries again that day."""
        ...
