"""Flashcard scheduling with FSRS (the ``fsrs`` package, the scheduler Anki uses since 23.10).

This module adapts our stored card state to ``fsrs.Card`` and back; FSRS itself (the memory model, the
learning steps, the intervals) is the library's. We keep py-fsrs's defaults: FSRS-6's default
parameters (or a player's optimised ones), desired retention 0.90, learning steps 1 m and 10 m,
relearning step 10 m, maximum interval 36 500 days.

Why core may import ``fsrs``: it is pure computation (no I/O, no clock of its own when every call passes
the review time, which we always do), like :mod:`fractions`; the layering rule keeps platform, storage
and network libraries out of core, not pure ones. Its optional optimizer (torch) is not imported here:
see :mod:`bot.practice_optimizer`.

Fuzz is off, always, not only in tests: py-fsrs draws it from the process-wide ``random`` at review
time, so the interval a grade button shows (computed before the click) would not be the one the click
schedules. Deterministic schedules keep the preview honest.

Our state has one phase more than FSRS: ``new`` is FSRS's Learning state before any review (no stability
yet), kept apart so a deck can say how many cards were never studied. ``lapses`` (Again on a review
card) is ours too: FSRS does not count them, Anki does, and 8 flag a leech as in Anki.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from fsrs import Card, Rating, Scheduler, State

Grade = Literal["again", "hard", "good", "easy"]
GRADES: tuple[Grade, ...] = ("again", "hard", "good", "easy")
Phase = Literal["new", "learning", "review", "relearning"]

#: Anki's leech threshold: a card that lapsed this often is reported as a leech.
LEECH_LAPSES = 8
RATINGS: dict[Grade, Rating] = {
    "again": Rating.Again,
    "hard": Rating.Hard,
    "good": Rating.Good,
    "easy": Rating.Easy,
}
_PHASES: dict[State, Phase] = {
    State.Learning: "learning",
    State.Review: "review",
    State.Relearning: "relearning",
}
_STATES: dict[Phase, State] = {
    "new": State.Learning,
    "learning": State.Learning,
    "review": State.Review,
    "relearning": State.Relearning,
}


@dataclass(frozen=True)
class CardState:
    """Where a card stands for one player: its FSRS memory state, (re)learning step and due time.

    ``stability`` (days until recall drops to 90 %) and ``difficulty`` (1-10) are None until the first
    review. ``interval_days`` is the whole days from the last review to ``due`` (0 while (re)learning).
    """

    phase: Phase = "new"
    step: int = 0
    stability: float | None = None
    difficulty: float | None = None
    due: dt.datetime | None = None
    last_review: dt.datetime | None = None
    interval_days: int = 0
    reps: int = 0
    lapses: int = 0

    @property
    def is_leech(self) -> bool:
        """True once the card lapsed as often as Anki's leech threshold (8)."""
        return self.lapses >= LEECH_LAPSES


def make_scheduler(parameters: Sequence[float] | None = None) -> Scheduler:
    """An FSRS scheduler with py-fsrs's defaults (or these optimised parameters), without fuzz.

    Raises ``ValueError`` (from fsrs) when ``parameters`` has the wrong length or a value out of bounds.
    """
    if parameters is None:
        return Scheduler(enable_fuzzing=False)
    return Scheduler(parameters=tuple(parameters), enable_fuzzing=False)


DEFAULT_SCHEDULER = make_scheduler()


def _utc(moment: dt.datetime) -> dt.datetime:
    # fsrs refuses any tzinfo other than datetime.timezone.utc (even an equal offset).
    if moment.tzinfo is None:
        raise ValueError("naive datetime given to the scheduler; use timezone-aware UTC")
    return moment.astimezone(dt.UTC)


def to_fsrs(state: CardState, card_id: int, now: dt.datetime) -> Card:
    """The ``fsrs.Card`` of a stored state (``card_id`` given: fsrs would otherwise read the clock)."""
    return Card(
        card_id=card_id,
        state=_STATES[state.phase],
        step=None if state.phase == "review" else state.step,
        stability=state.stability,
        difficulty=state.difficulty,
        due=_utc(state.due or now),
        last_review=_utc(state.last_review) if state.last_review else None,
    )


def schedule(
    state: CardState, grade: Grade, now: dt.datetime, scheduler: Scheduler = DEFAULT_SCHEDULER
) -> CardState:
    """The card's next state after the player answered ``grade`` at ``now``."""
    if grade not in RATINGS:
        raise ValueError(f"unknown grade {grade!r}: use one of {', '.join(GRADES)}")
    now = _utc(now)
    card, _log = scheduler.review_card(to_fsrs(state, 0, now), RATINGS[grade], now)
    phase = _PHASES[card.state]
    lapsed = state.phase == "review" and grade == "again"
    return CardState(
        phase=phase,
        step=card.step or 0,
        stability=card.stability,
        difficulty=card.difficulty,
        due=card.due,
        last_review=now,
        interval_days=(card.due - now).days if phase == "review" else 0,
        reps=state.reps + 1,
        lapses=state.lapses + (1 if lapsed else 0),
    )


def previews(
    state: CardState, now: dt.datetime, scheduler: Scheduler = DEFAULT_SCHEDULER
) -> tuple[tuple[Grade, dt.timedelta], ...]:
    """For each grade, the delay until the card would be due again (what the grade buttons show)."""
    out = []
    for grade in GRADES:
        after = schedule(state, grade, now, scheduler)
        assert after.due is not None
        out.append((grade, after.due - _utc(now)))
    return tuple(out)
