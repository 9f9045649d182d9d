"""SM-2 spaced repetition as Anki schedules it, with Anki's default deck options. Pure functions.

Anki's scheduler (the "V2"/"V3" SM-2 family, before FSRS) is SuperMemo's SM-2 with learning steps,
four answer buttons and lapse handling. We implement it with Anki's defaults:

=====================  ==========  ==========================================================
option                 default     what it does here
=====================  ==========  ==========================================================
learning steps         1m 10m      a new card is shown again after 1 minute, then 10 minutes
graduating interval    1 day       Good on the last learning step makes it a review card due in 1 day
easy interval          4 days      Easy on a new/learning card graduates it at once, due in 4 days
starting ease          2.50        ease given to every card (the interval multiplier for Good)
easy bonus             1.30        extra multiplier for Easy on a review card
hard interval          1.20        Hard on a review card multiplies the interval by 1.2
interval modifier      1.00        applied to every review interval
maximum interval       36500 days  cap on any interval
relearning steps       10m         a lapsed card is shown again after 10 minutes
new interval           0.00        a lapsed card's interval is multiplied by this ...
minimum interval       1 day       ... but never below this
leech threshold        8 lapses    the card is reported as a leech (Anki's "tag only" action)
=====================  ==========  ==========================================================

Ease changes (not deck options in Anki): Again −0.20 (review cards only), Hard −0.15, Good ±0, Easy +0.15,
never below 1.30. Learning cards keep their ease.

Review answers, for a card with interval ``I`` days, ease ``E`` (before this answer's change) and ``d``
days overdue (``constrain(x, prev) = min(max_ivl, max(trunc(x × modifier), prev + 1, 1))``, as Anki's
``_constrainedIvl``: fractions of a day are dropped, and each button gives at least a day more than the
one before it):

- Hard: ``constrain(I × 1.2, I)``
- Good: ``constrain((I + d // 2) × E, hard)``
- Easy: ``constrain((I + d) × E × 1.3, good)``
- Again: a lapse: ``lapses += 1``, the interval becomes ``max(minimum, trunc(I × new interval))`` and
  the card relearns through the relearning steps, then returns to review with that interval (Easy in
  relearning adds a day, as Anki's V3 does).

Learning and relearning steps: Again goes back to the first step; Hard repeats the current step (on the
first step: the average of the first two steps, or 1.5 × the only step, capped at the step + 1 day); Good
moves to the next step or graduates; Easy graduates at once.

What we leave out, on purpose: the random "fuzz" on intervals (we want deterministic, testable
schedules), the 4 a.m. day rollover (due times are exact timestamps), load balancing and FSRS.
Arithmetic is exact (ease in thousandths and :class:`fractions.Fraction`), so the table tests in
tests/test_sm2.py hold on every platform.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Literal

Grade = Literal["again", "hard", "good", "easy"]
GRADES: tuple[Grade, ...] = ("again", "hard", "good", "easy")
Phase = Literal["new", "learning", "review", "relearning"]

_MIN = dt.timedelta(minutes=1)
_DAY = dt.timedelta(days=1)


@dataclass(frozen=True)
class Sm2Config:
    """Deck options; the defaults are Anki's. Ease values are in thousandths (2500 = 2.50)."""

    learning_steps: tuple[dt.timedelta, ...] = (1 * _MIN, 10 * _MIN)
    graduating_interval_days: int = 1
    easy_interval_days: int = 4
    starting_ease: int = 2500
    easy_bonus: Fraction = Fraction(130, 100)
    hard_interval: Fraction = Fraction(120, 100)
    interval_modifier: Fraction = Fraction(1)
    maximum_interval_days: int = 36500
    relearning_steps: tuple[dt.timedelta, ...] = (10 * _MIN,)
    new_interval: Fraction = Fraction(0)
    minimum_interval_days: int = 1
    leech_threshold: int = 8
    ease_again: int = -200
    ease_hard: int = -150
    ease_easy: int = 150
    minimum_ease: int = 1300


ANKI_DEFAULTS = Sm2Config()


@dataclass(frozen=True)
class CardState:
    """Where a card stands for one player: its phase, step, ease, interval and due time."""

    phase: Phase = "new"
    step: int = 0
    ease: int = ANKI_DEFAULTS.starting_ease
    interval_days: int = 0
    due: dt.datetime | None = None
    reps: int = 0
    lapses: int = 0

    @property
    def is_leech(self) -> bool:
        """True once the card lapsed as often as Anki's leech threshold (8)."""
        return self.lapses >= ANKI_DEFAULTS.leech_threshold


def new_card(config: Sm2Config = ANKI_DEFAULTS) -> CardState:
    """A card never studied: new, with the starting ease, due at once."""
    return CardState(ease=config.starting_ease)


def schedule(
    state: CardState, grade: Grade, now: dt.datetime, config: Sm2Config = ANKI_DEFAULTS
) -> CardState:
    """The card's next state after the player answered ``grade`` at ``now``."""
    if grade not in GRADES:
        raise ValueError(f"unknown grade {grade!r}: use one of {', '.join(GRADES)}")
    state = replace(state, reps=state.reps + 1)
    if state.phase in ("new", "learning"):
        return _learning(state, grade, now, config)
    if state.phase == "relearning":
        return _relearning(state, grade, now, config)
    return _review(state, grade, now, config)


def _step_delay(steps: tuple[dt.timedelta, ...], step: int, grade: Grade) -> dt.timedelta:
    """Delay before showing a (re)learning card again after Again or Hard on ``step``."""
    if grade == "again":
        return steps[0]
    if step == 0:
        if len(steps) >= 2:
            return (steps[0] + steps[1]) / 2
        return min(steps[0] * 3 / 2, steps[0] + _DAY)
    return steps[step]


def _graduate(state: CardState, days: int, now: dt.datetime) -> CardState:
    return replace(state, phase="review", step=0, interval_days=days, due=now + days * _DAY)


def _learning(state: CardState, grade: Grade, now: dt.datetime, config: Sm2Config) -> CardState:
    steps = config.learning_steps
    step = min(state.step, len(steps) - 1) if steps else 0
    if grade == "easy" or not steps:
        days = config.easy_interval_days if grade == "easy" else config.graduating_interval_days
        return _graduate(state, days, now)
    if grade in ("again", "hard"):
        step = 0 if grade == "again" else step
        return replace(state, phase="learning", step=step, due=now + _step_delay(steps, step, grade))
    if step + 1 < len(steps):
        return replace(state, phase="learning", step=step + 1, due=now + steps[step + 1])
    return _graduate(state, config.graduating_interval_days, now)


def _relearning(state: CardState, grade: Grade, now: dt.datetime, config: Sm2Config) -> CardState:
    steps = config.relearning_steps
    step = min(state.step, len(steps) - 1) if steps else 0
    if grade == "easy" or not steps:
        return _graduate(state, state.interval_days + (1 if grade == "easy" else 0), now)
    if grade in ("again", "hard"):
        step = 0 if grade == "again" else step
        return replace(state, step=step, due=now + _step_delay(steps, step, grade))
    if step + 1 < len(steps):
        return replace(state, step=step + 1, due=now + steps[step + 1])
    return _graduate(state, state.interval_days, now)


def _constrain(value: Fraction, previous: int, config: Sm2Config) -> int:
    days = int(value * config.interval_modifier)  # int() drops the fraction, as Anki's V2 does
    return min(config.maximum_interval_days, max(days, previous + 1, 1))


def review_intervals(
    interval_days: int, ease: int, days_late: int, config: Sm2Config = ANKI_DEFAULTS
) -> tuple[int, int, int]:
    """The (hard, good, easy) intervals in days of a review card (``ease`` in thousandths)."""
    factor = Fraction(ease, 1000)
    hard = _constrain(interval_days * config.hard_interval, interval_days, config)
    good = _constrain((interval_days + days_late // 2) * factor, hard, config)
    easy = _constrain((interval_days + days_late) * factor * config.easy_bonus, good, config)
    return hard, good, easy


def _review(state: CardState, grade: Grade, now: dt.datetime, config: Sm2Config) -> CardState:
    if grade == "again":
        ease = max(config.minimum_ease, state.ease + config.ease_again)
        lapse_days = max(config.minimum_interval_days, int(state.interval_days * config.new_interval))
        lapsed = replace(state, ease=ease, lapses=state.lapses + 1, interval_days=lapse_days)
        if not config.relearning_steps:
            return _graduate(lapsed, lapse_days, now)
        return replace(lapsed, phase="relearning", step=0, due=now + config.relearning_steps[0])
    late = max(0, (now - state.due).days) if state.due is not None else 0
    hard, good, easy = review_intervals(state.interval_days, state.ease, late, config)
    if grade == "hard":
        ease = max(config.minimum_ease, state.ease + config.ease_hard)
        return replace(_graduate(state, hard, now), ease=ease)
    if grade == "good":
        return _graduate(state, good, now)
    return replace(_graduate(state, easy, now), ease=state.ease + config.ease_easy)
