"""FSRS scheduling (bot/core/srs.py over the fsrs package) against values worked out from FSRS-6's
formulas and default parameters, plus the properties the grade buttons rely on.

Replaces the SM-2 table tests: the scheduler is fsrs's now; what we own and test is the adaptation
(phases, steps, lapses, interval days, the previews the buttons show, no fuzz) and the optimizer's
threshold count.
"""

from __future__ import annotations

import datetime as dt
import math
import random
import time

import pytest
from fsrs import Scheduler
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.core.practice import OPTIMIZE_MIN_REVIEWS, optimizer_reviews
from bot.core.practice_models import ReviewRecord
from bot.core.srs import DEFAULT_SCHEDULER, GRADES, CardState, Grade, make_scheduler, previews, schedule
from bot.practice_optimizer import FsrsOptimizer, optimizer_available

T0 = dt.datetime(2026, 1, 1, 9, 0, tzinfo=dt.UTC)
M = dt.timedelta(minutes=1)
D = dt.timedelta(days=1)
W = Scheduler().parameters  # FSRS-6 defaults


def _run(answers: list[tuple[dt.timedelta, Grade]]) -> tuple[CardState, dt.datetime]:
    state, now = CardState(due=T0), T0
    for wait, grade in answers:
        now += wait
        state = schedule(state, grade, now)
    return state, now


def _due_in(state: CardState, now: dt.datetime) -> dt.timedelta:
    """How long after ``now`` the card is due (every card the scheduler returns has a due time)."""
    assert state.due is not None
    return state.due - now


def _recall_growth(stability: float, difficulty: float, rating: int) -> float:
    """FSRS's new stability after a recall at 90 % retrievability (the card reviewed on its due day)."""
    hard = W[15] if rating == 2 else 1
    easy = W[16] if rating == 4 else 1
    inc: float = math.exp(W[8]) * (11 - difficulty) * stability ** -W[9] * (math.exp(0.1 * W[10]) - 1)
    return stability * (1 + inc * hard * easy)


def test_a_new_card_shows_the_learning_steps_and_easy_graduates_at_the_initial_stability() -> None:
    shown = dict(previews(CardState(due=T0), T0))
    assert shown == {"again": 1 * M, "hard": 5.5 * M, "good": 10 * M, "easy": round(W[3]) * D}
    assert round(W[3]) == 8


LEARNING = [
    # (answers, phase, interval days, due after the last answer)
    ([(0 * M, "again")], "learning", 0, 1 * M),
    ([(0 * M, "hard")], "learning", 0, 5.5 * M),  # the first step: the mean of 1m and 10m
    ([(0 * M, "good")], "learning", 0, 10 * M),
    ([(0 * M, "easy")], "review", 8, 8 * D),  # stability w3 = 8.2956 days, rounded
    ([(0 * M, "good"), (10 * M, "hard")], "learning", 0, 10 * M),  # Hard repeats the step
    ([(0 * M, "good"), (10 * M, "again")], "learning", 0, 1 * M),  # Again back to the first step
    # Good on the last step graduates: same-day stability stays w2 = 2.3065 (its growth clamps at 1).
    ([(0 * M, "good"), (10 * M, "good")], "review", 2, 2 * D),
]


@pytest.mark.parametrize(("answers", "phase", "interval", "due"), LEARNING)
def test_learning_steps(
    answers: list[tuple[dt.timedelta, Grade]], phase: str, interval: int, due: dt.timedelta
) -> None:
    state, now = _run(answers)
    assert (state.phase, state.interval_days, _due_in(state, now)) == (phase, interval, due)
    assert state.reps == len(answers) and state.lapses == 0


@pytest.mark.parametrize(("grade", "rating"), [("hard", 2), ("good", 3), ("easy", 4)])
def test_a_review_card_recalled_on_its_due_day_grows_by_fsrs_recall_formula(
    grade: Grade, rating: int
) -> None:
    # A card with S = 10 days and D = 5 reviewed exactly 10 days after its last review (R = 0.9).
    card = CardState(
        phase="review", stability=10.0, difficulty=5.0, due=T0 + 10 * D, last_review=T0, interval_days=10
    )
    after = schedule(card, grade, T0 + 10 * D)
    expected = _recall_growth(10.0, 5.0, rating)
    assert after.stability == pytest.approx(expected)
    assert (after.phase, after.interval_days) == ("review", round(expected))
    assert {"hard": 23, "good": 32, "easy": 51}[grade] == round(expected)  # worked out by hand


def test_again_on_a_review_card_is_a_lapse_that_relearns() -> None:
    card = CardState(
        phase="review",
        stability=10.0,
        difficulty=5.0,
        due=T0 + 10 * D,
        last_review=T0,
        interval_days=10,
        reps=4,
    )
    after = schedule(card, "again", T0 + 10 * D)
    assert (after.phase, after.step, after.lapses, after.reps, after.due) == (
        "relearning",
        0,
        1,
        5,
        T0 + 10 * D + 10 * M,
    )
    assert after.stability is not None and after.stability < 10.0
    back = schedule(after, "good", T0 + 10 * D + 10 * M)
    assert back.phase == "review" and back.lapses == 1 and back.interval_days >= 1
    assert CardState(lapses=8).is_leech and not CardState(lapses=7).is_leech


def test_no_fuzz_so_the_previews_are_what_grading_schedules() -> None:
    assert DEFAULT_SCHEDULER.enable_fuzzing is False
    card = CardState(
        phase="review", stability=40.0, difficulty=6.0, due=T0 + 40 * D, last_review=T0, interval_days=40
    )
    now = T0 + 45 * D
    for grade, delay in previews(card, now):
        assert [_due_in(schedule(card, grade, now), now) for _ in range(5)] == [delay] * 5


@settings(max_examples=200, deadline=None)
@given(
    stability=st.floats(min_value=0.1, max_value=3000),
    difficulty=st.floats(min_value=1, max_value=10),
    late_days=st.integers(min_value=0, max_value=400),
)
def test_a_later_grade_never_schedules_sooner(stability: float, difficulty: float, late_days: int) -> None:
    last = T0
    ivl = max(1, round(stability))
    card = CardState(
        phase="review",
        stability=stability,
        difficulty=difficulty,
        due=last + ivl * D,
        last_review=last,
        interval_days=ivl,
    )
    delays = [d for _, d in previews(card, last + (ivl + late_days) * D)]
    assert delays == sorted(delays) and delays[0] == 10 * M and delays[-1] <= 36500 * D


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown grade"):
        schedule(CardState(due=T0), "maybe", T0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="naive"):
        schedule(CardState(due=T0), "good", dt.datetime(2026, 1, 1))  # noqa: DTZ001
    with pytest.raises(ValueError, match="out of bounds"):
        make_scheduler([100.0] * 21)
    with pytest.raises(ValueError, match="Expected 21"):
        make_scheduler([1.0])


def test_optimizer_counts_what_fsrs_learns_from() -> None:
    logs = [ReviewRecord(1, "good", T0), ReviewRecord(1, "good", T0 + 10 * M)]  # same day: not counted
    logs += [ReviewRecord(1, "good", T0 + i * D) for i in range(1, 4)]
    logs += [ReviewRecord(2, "again", T0 + i * D) for i in range(100)]  # only the first 64 reviews
    # Card 1: T0+10m -> T0+1d is 23h50m, not a whole day, so only the last two count; card 2: 63 gaps.
    assert optimizer_reviews(logs) == 2 + 63
    assert OPTIMIZE_MIN_REVIEWS == 512


def simulated_history(cards: int, seed: int = 7) -> list[ReviewRecord]:
    """Reviews of a player who forgets faster than FSRS's defaults assume (recall 75 % when due)."""
    rng = random.Random(seed)
    out = []
    for card_id in range(1, cards + 1):
        state, now = CardState(due=T0), T0 + card_id * M
        for _ in range(12):
            grade: Grade = "good" if state.phase == "new" or rng.random() < 0.75 else "again"
            out.append(ReviewRecord(card_id, grade, now))
            state = schedule(state, grade, now)
            assert state.due is not None
            now = state.due
    return out


@pytest.mark.skipif(not optimizer_available(), reason="the optimizer extra (torch, pandas) is not installed")
def test_the_optimizer_fits_parameters_to_a_players_history() -> None:
    history = simulated_history(80)
    assert optimizer_reviews(history) >= OPTIMIZE_MIN_REVIEWS
    start = time.perf_counter()
    fitted = FsrsOptimizer().optimize(history)  # in a child process, as serve runs it
    print(f"optimised {len(history)} reviews in {time.perf_counter() - start:.1f} s (child process)")
    assert FsrsOptimizer(in_process=True).optimize(history) == fitted, "fsrs seeds its shuffle: deterministic"
    assert len(fitted) == 21 and fitted != W
    scheduler = make_scheduler(fitted)  # within fsrs's bounds
    card = CardState(
        phase="review", stability=10.0, difficulty=5.0, due=T0 + 10 * D, last_review=T0, interval_days=10
    )
    # A player who forgets faster gets shorter intervals than the defaults give.
    fitted_days = schedule(card, "good", T0 + 10 * D, scheduler).interval_days
    assert fitted_days < schedule(card, "good", T0 + 10 * D).interval_days == 32
    assert GRADES == ("again", "hard", "good", "easy")
