"""Pure scoring rules."""

from __future__ import annotations

import datetime as dt
import random

from bot.core import scoring
from bot.core.models import QuestionCandidate


def test_points_formula() -> None:
    p = scoring.points_for
    assert (
        p(difficulty="expert", correct=True, attempt_no=1, elapsed_s=0, time_limit_s=120, hint_used=False)
        == 240
    )
    assert (
        p(difficulty="expert", correct=True, attempt_no=1, elapsed_s=120, time_limit_s=120, hint_used=False)
        == 200
    )
    assert (
        p(difficulty="expert", correct=True, attempt_no=2, elapsed_s=60, time_limit_s=120, hint_used=False)
        == 110
    )
    assert (
        p(difficulty="beginner", correct=True, attempt_no=2, elapsed_s=120, time_limit_s=120, hint_used=True)
        == 13
    )
    assert (
        p(difficulty="expert", correct=False, attempt_no=1, elapsed_s=1, time_limit_s=120, hint_used=False)
        == 0
    )


def test_speed_never_dominates_accuracy() -> None:
    for level in scoring.BASE_POINTS:
        fastest_second = scoring.points_for(
            difficulty=level, correct=True, attempt_no=2, elapsed_s=0, time_limit_s=120, hint_used=False
        )
        slowest_first = scoring.points_for(
            difficulty=level, correct=True, attempt_no=1, elapsed_s=120, time_limit_s=120, hint_used=False
        )
        assert slowest_first > fastest_second > 0


def test_streaks() -> None:
    d = dt.date(2026, 11, 21)
    days = [d - dt.timedelta(days=i) for i in (0, 1, 2, 4, 5)]
    assert scoring.current_streak(days, d) == 3
    assert scoring.current_streak(days[1:], d) == 2, "today not played yet keeps yesterday's streak"
    assert scoring.current_streak(days, d + dt.timedelta(days=2)) == 0
    assert scoring.longest_streak(days) == 3


def test_badges() -> None:
    day = dt.date(2026, 11, 20)  # a Friday
    perfect = scoring.ChallengeOutcome(day, 5, 5, 0, 12.0)
    week = [day - dt.timedelta(days=i) for i in range(5)]
    codes = {c for c, _ in scoring.badges_earned(perfect, week, week)}
    assert codes == {"multi-gpu-master", "no-hints-needed", "lightning", "perfect-week"}
    slow_hinted = scoring.ChallengeOutcome(day, 5, 5, 1, 90.0)
    assert {c for c, _ in scoring.badges_earned(slow_hinted, [day], [day])} == {"multi-gpu-master"}
    seven = [day - dt.timedelta(days=i) for i in range(7)]
    four = scoring.ChallengeOutcome(day, 5, 4, 0, 10.0)
    assert scoring.badges_earned(four, [], seven) == [("streak-7", "once")]


def test_ramp_and_picker() -> None:
    assert scoring.difficulty_ramp(5) == ["intermediate", "intermediate", "advanced", "advanced", "expert"]
    assert scoring.difficulty_ramp(3) == ["intermediate", "advanced", "expert"]
    cands = [
        QuestionCandidate(i, f"q{i}", f"t{i % 3}", lvl, "conceptual", 1 if i < 3 else 0)
        for i, lvl in enumerate(["intermediate", "advanced", "expert"] * 3)
    ]
    picked = scoring.pick_problems(cands, 5, random.Random(0))
    assert len(picked) == 5 and all(c.uses == 0 for c in picked), "least-used questions first"
