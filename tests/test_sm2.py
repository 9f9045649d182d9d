"""SM-2 with Anki's defaults against tables of known values, worked out by hand from the algorithm.

Each row is a sequence of (days since the previous answer, grade) and the expected (phase, interval in
days, ease in thousandths, lapses, delay until due) after the last answer.
"""

from __future__ import annotations

import datetime as dt
from fractions import Fraction

import pytest

from bot.core.sm2 import (
    ANKI_DEFAULTS,
    CardState,
    Grade,
    Sm2Config,
    new_card,
    review_intervals,
    schedule,
)

T0 = dt.datetime(2026, 1, 1, 9, 0, tzinfo=dt.UTC)
M = dt.timedelta(minutes=1)
D = dt.timedelta(days=1)


def _run(
    answers: list[tuple[dt.timedelta, Grade]], config: Sm2Config = ANKI_DEFAULTS
) -> tuple[CardState, dt.datetime]:
    state, now = new_card(config), T0
    for wait, grade in answers:
        now += wait
        state = schedule(state, grade, now, config)
    return state, now


def _review_card(interval: int, ease: int, lapses: int = 0) -> CardState:
    return CardState(phase="review", ease=ease, interval_days=interval, due=T0, reps=5, lapses=lapses)


# (answers, phase, interval_days, ease, lapses, due after the last answer)
LEARNING = [
    # A new card: the first step is 1 minute, Good moves to 10 minutes, Good again graduates (1 day).
    ([(0 * M, "again")], "learning", 0, 2500, 0, 1 * M),
    ([(0 * M, "hard")], "learning", 0, 2500, 0, 5.5 * M),  # first step: average of 1m and 10m
    ([(0 * M, "good")], "learning", 0, 2500, 0, 10 * M),
    ([(0 * M, "easy")], "review", 4, 2500, 0, 4 * D),  # easy interval
    ([(0 * M, "good"), (10 * M, "hard")], "learning", 0, 2500, 0, 10 * M),  # hard repeats the step
    ([(0 * M, "good"), (10 * M, "again")], "learning", 0, 2500, 0, 1 * M),  # back to the first step
    ([(0 * M, "good"), (10 * M, "good")], "review", 1, 2500, 0, 1 * D),  # graduating interval
    ([(0 * M, "good"), (10 * M, "easy")], "review", 4, 2500, 0, 4 * D),
]

# Good every time, on time, after graduating: 1, 3, 7, 17, 42, 105 days (trunc(I x 2.5), >= hard + 1).
GOOD_CHAIN = [(0, 1), (1, 3), (2, 7), (3, 17), (4, 42), (5, 105)]


@pytest.mark.parametrize(("answers", "phase", "interval", "ease", "lapses", "due_in"), LEARNING)
def test_learning_steps(
    answers: list[tuple[dt.timedelta, Grade]],
    phase: str,
    interval: int,
    ease: int,
    lapses: int,
    due_in: dt.timedelta,
) -> None:
    state, now = _run(answers)
    assert (state.phase, state.interval_days, state.ease, state.lapses) == (phase, interval, ease, lapses)
    assert state.due == now + due_in


@pytest.mark.parametrize(("reviews", "interval"), GOOD_CHAIN)
def test_good_every_time(reviews: int, interval: int) -> None:
    state, now = _run([(0 * M, "good"), (10 * M, "good")])
    for _ in range(reviews):
        assert state.due is not None
        now = state.due
        state = schedule(state, "good", now)
    assert (state.interval_days, state.ease, state.phase) == (interval, 2500, "review")
    assert state.due == now + interval * D


# Review answers: (interval, ease, days late, grade) -> (new interval, new ease)
REVIEW = [
    (1, 2500, 0, "hard", 2, 2350),  # trunc(1.2) = 1, but at least I + 1
    (1, 2500, 0, "good", 3, 2500),  # trunc(2.5) = 2, but at least hard + 1
    (1, 2500, 0, "easy", 4, 2650),  # trunc(3.25) = 3, but at least good + 1
    (10, 2500, 0, "hard", 12, 2350),
    (10, 2500, 0, "good", 25, 2500),
    (10, 2500, 0, "easy", 32, 2650),  # trunc(10 x 2.5 x 1.3 = 32.5)
    (4, 2500, 0, "easy", 13, 2650),  # exactly 13: exact arithmetic, no float rounding down to 12
    (10, 2500, 4, "good", 30, 2500),  # 4 days late: (10 + 4 // 2) x 2.5
    (10, 2500, 4, "easy", 45, 2650),  # (10 + 4) x 2.5 x 1.3 = 45.5
    (10, 2500, 4, "hard", 12, 2350),  # lateness does not help Hard
    (100, 1300, 0, "hard", 120, 1300),  # ease floor: 1.30 - 0.15 stays at 1.30
    (100, 1300, 0, "good", 130, 1300),
    (100, 1400, 0, "hard", 120, 1300),  # 1.40 - 0.15 = 1.25, floored at 1.30
    (30000, 2500, 0, "good", 36500, 2500),  # maximum interval
]


@pytest.mark.parametrize(("interval", "ease", "late", "grade", "new_interval", "new_ease"), REVIEW)
def test_review_answers(
    interval: int, ease: int, late: int, grade: Grade, new_interval: int, new_ease: int
) -> None:
    now = T0 + late * D
    state = schedule(_review_card(interval, ease), grade, now)
    assert (state.phase, state.interval_days, state.ease) == ("review", new_interval, new_ease)
    assert state.due == now + new_interval * D


def test_review_intervals_preview_matches_schedule() -> None:
    assert review_intervals(10, 2500, 0) == (12, 25, 32)


LAPSES = [
    # Again on a review card: ease -0.20, lapse counted, interval x 0 (new interval) floored to 1 day,
    # relearning step of 10 minutes; Good then returns it to review with that interval.
    ([], "relearning", 1, 2300, 1, 10 * M),
    ([(10 * M, "good")], "review", 1, 2300, 1, 1 * D),
    ([(10 * M, "easy")], "review", 2, 2300, 1, 2 * D),  # easy in relearning: one day more
    ([(10 * M, "again")], "relearning", 1, 2300, 1, 10 * M),  # again: ease is not lowered twice
    ([(10 * M, "hard")], "relearning", 1, 2300, 1, 15 * M),  # only step: 1.5 x 10m
    ([(10 * M, "good"), (1 * D, "good")], "review", 3, 2300, 1, 3 * D),  # trunc(1 x 2.3) -> hard + 1
]


@pytest.mark.parametrize(("answers", "phase", "interval", "ease", "lapses", "due_in"), LAPSES)
def test_lapse_and_relearning(
    answers: list[tuple[dt.timedelta, Grade]],
    phase: str,
    interval: int,
    ease: int,
    lapses: int,
    due_in: dt.timedelta,
) -> None:
    now = T0
    state = schedule(_review_card(20, 2500), "again", now)
    for wait, grade in answers:
        now += wait
        state = schedule(state, grade, now)
    assert (state.phase, state.interval_days, state.ease, state.lapses) == (phase, interval, ease, lapses)
    assert state.due == now + due_in


def test_ease_floor_on_lapses_and_leech() -> None:
    state = _review_card(10, 1400, lapses=7)
    state = schedule(state, "again", T0)
    assert state.ease == 1300 and state.lapses == 8 and state.is_leech
    state = schedule(schedule(state, "good", T0 + 10 * M), "again", T0 + 2 * D)
    assert state.ease == 1300, "the ease never drops below 1.30"


def test_new_interval_option_keeps_part_of_the_interval() -> None:
    config = Sm2Config(new_interval=Fraction(1, 2), relearning_steps=())
    state = schedule(_review_card(20, 2500), "again", T0, config)
    assert (state.phase, state.interval_days, state.due) == ("review", 10, T0 + 10 * D)


def test_reps_count_every_answer_and_unknown_grades_fail() -> None:
    state, _ = _run([(0 * M, "good"), (10 * M, "good"), (1 * D, "good")])
    assert state.reps == 3
    with pytest.raises(ValueError, match="unknown grade"):
        schedule(state, "perfect", T0)  # type: ignore[arg-type]
