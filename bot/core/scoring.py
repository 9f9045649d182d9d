"""Pure scoring rules: points, streaks, badges, challenge selection. No I/O.

Points for a problem (documented in README.md, "Scoring"):

    base        = {beginner: 50, intermediate: 100, advanced: 150, expert: 200}[difficulty]
    factor      = 1.0 on the first attempt, 0.5 on the second (and later)
    speed bonus = round(0.2 * base * time_left / time_limit)        (at most +20 %)
    hint cost   = round(0.25 * base) when the hint was shown
    points      = max(0, round(factor * (base + speed bonus)) - hint cost)   if correct, else 0

The speed bonus never dominates accuracy: the fastest possible correct answer earns 1.2 x base, while any
correct answer earns at least 0.5 x base - hint cost, and a wrong answer earns nothing.
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from bot.core.models import QuestionCandidate
from bot.core.vocabulary import Difficulty, Kind

#: Base points by difficulty, keyed by the members (all of them: tests/test_vocabulary.py checks it) and
#: read with the plain strings questions carry (a member hashes as its value: no conversion per answer).
BASE_POINTS: dict[str, int] = {
    Difficulty.BEGINNER: 50,
    Difficulty.INTERMEDIATE: 100,
    Difficulty.ADVANCED: 150,
    Difficulty.EXPERT: 200,
}
SPEED_BONUS_SHARE = 0.2
HINT_COST_SHARE = 0.25
SECOND_ATTEMPT_FACTOR = 0.5


def hint_cost(difficulty: str) -> int:
    """Points a shown hint takes off a correct answer."""
    return round(HINT_COST_SHARE * BASE_POINTS[difficulty])


def points_for(
    *, difficulty: str, correct: bool, attempt_no: int, elapsed_s: float, time_limit_s: int, hint_used: bool
) -> int:
    """Points earned by an answer (see the module docstring for the formula)."""
    if not correct:
        return 0
    base = BASE_POINTS[difficulty]
    left = min(max(time_limit_s - elapsed_s, 0.0), float(time_limit_s))
    bonus = SPEED_BONUS_SHARE * base * left / time_limit_s
    factor = 1.0 if attempt_no <= 1 else SECOND_ATTEMPT_FACTOR
    earned = round(factor * (base + bonus)) - (hint_cost(difficulty) if hint_used else 0)
    return max(0, earned)


def current_streak(days: Iterable[dt.date], today: dt.date) -> int:
    """Consecutive days with a completed challenge, ending today or yesterday (today may still be open)."""
    done = set(days)
    cursor = today if today in done else today - dt.timedelta(days=1)
    streak = 0
    while cursor in done:
        streak += 1
        cursor -= dt.timedelta(days=1)
    return streak


def longest_streak(days: Iterable[dt.date]) -> int:
    """The longest run of consecutive days in ``days``."""
    ordered = sorted(set(days))
    best = run = 0
    prev: dt.date | None = None
    for day in ordered:
        run = run + 1 if prev is not None and day - prev == dt.timedelta(days=1) else 1
        best = max(best, run)
        prev = day
    return best


@dataclass(frozen=True)
class BadgeInfo:
    """A badge's display data."""

    code: str
    name: str
    emoji: str
    description: str


BADGES: dict[str, BadgeInfo] = {
    b.code: b
    for b in (
        BadgeInfo("multi-gpu-master", "Multi-GPU Master", "🏅", "Every problem of a challenge right"),
        BadgeInfo("no-hints-needed", "No Hints Needed", "🧠", "A perfect challenge without any hint"),
        BadgeInfo("lightning", "Lightning", "⚡", "A perfect challenge, every answer within 30 seconds"),
        BadgeInfo("perfect-week", "Perfect Week", "🌟", "Perfect challenges on 5 days of one ISO week"),
        BadgeInfo("streak-7", "7-Day Streak", "🔥", "A completed challenge 7 days in a row"),
        BadgeInfo("streak-30", "30-Day Streak", "🚀", "A completed challenge 30 days in a row"),
    )
}


@dataclass(frozen=True)
class ChallengeOutcome:
    """A player's finished challenge, as the badge rules see it."""

    day: dt.date
    problems: int
    correct: int
    hints_used: int
    max_answer_s: float


def badges_earned(
    outcome: ChallengeOutcome, perfect_days: Iterable[dt.date], completed_days: Iterable[dt.date]
) -> list[tuple[str, str]]:
    """Badges a just-completed challenge earns, as (code, scope key).

    The scope key makes awarding idempotent: per challenge day for per-challenge badges, per ISO week for
    the weekly one, "once" for streak milestones. ``perfect_days`` and ``completed_days`` include this day.
    """
    earned: list[tuple[str, str]] = []
    day_key = outcome.day.isoformat()
    perfect = outcome.problems > 0 and outcome.correct == outcome.problems
    if perfect:
        earned.append(("multi-gpu-master", day_key))
        if outcome.hints_used == 0:
            earned.append(("no-hints-needed", day_key))
        if outcome.max_answer_s <= 30:
            earned.append(("lightning", day_key))
        year, week, _ = outcome.day.isocalendar()
        in_week = {d for d in perfect_days if d.isocalendar()[:2] == (year, week)}
        if len(in_week) >= 5:
            earned.append(("perfect-week", f"{year}-W{week:02d}"))
    streak = current_streak(completed_days, outcome.day)
    if streak >= 7:
        earned.append(("streak-7", "once"))
    if streak >= 30:
        earned.append(("streak-30", "once"))
    return earned


def difficulty_ramp(n: int) -> list[Difficulty]:
    """Target difficulties for n problems, ramping from intermediate to expert (5 -> I, I, A, A, E)."""
    levels = [Difficulty.INTERMEDIATE, Difficulty.ADVANCED, Difficulty.EXPERT]
    if n <= 1:
        return levels[:n]
    # Spread the three levels over n slots; the last slot is always expert.
    return [levels[min(2, (i * 3) // n)] if i < n - 1 else Difficulty.EXPERT for i in range(n)]


#: A difficulty's rank by its plain string (candidates come from the database as strings).
_RANKS: dict[str, int] = {level.value: level.rank for level in Difficulty}

#: Days a family rests in a channel after one of its instances was asked there.
FAMILY_REST_DAYS = 7
#: Kinds whose questions carry code the runner can run (the bank requires a runner block with the code of
#: a predict_output question): each challenge has one when the bank does, so that at least one of its
#: problems can be disputed (`rankzero dispute today:N` was refused for every problem of a day of
#: metrics and conceptual questions).
DISPUTABLE_KINDS = frozenset({Kind.PREDICT_OUTPUT.value})


def pick_problems(
    candidates: Sequence[QuestionCandidate],
    n: int,
    rng: random.Random,
    day: dt.date | None = None,
    *,
    family_rest_days: int = FAMILY_REST_DAYS,
) -> list[QuestionCandidate]:
    """Choose n questions for a challenge.

    Rules: instances of one family count as one question for spreading: never two of a family in one
    challenge, and a family asked in this channel less than ``family_rest_days`` before ``day`` is not
    picked while other families can fill the slot (a base question is its own family). Then no question
    repeats in a channel until every eligible candidate has been used as often (least-used first);
    difficulty follows :func:`difficulty_ramp`, falling back to the nearest level; topics are mixed (a
    topic already in the challenge is avoided while others remain); among equals, the family with the
    smallest share of its instances used goes first, so families drain evenly. Last, a challenge without
    a question of :data:`DISPUTABLE_KINDS` gets one when the candidates have one (see
    :func:`_with_a_disputable`). Returned in ramp order.
    """
    remaining = list(candidates)
    rng.shuffle(remaining)
    size: dict[str, int] = {}
    used: dict[str, int] = {}
    last: dict[str, dt.date] = {}
    for c in candidates:
        size[c.family] = size.get(c.family, 0) + 1
        used[c.family] = used.get(c.family, 0) + (1 if c.uses else 0)
        if c.last_used is not None and (c.family not in last or c.last_used > last[c.family]):
            last[c.family] = c.last_used
    resting = set()
    if day is not None:
        resting = {f for f, d in last.items() if (day - d).days < family_rest_days}
    chosen: list[QuestionCandidate] = []
    for target in difficulty_ramp(min(n, len(candidates))):
        in_challenge = {c.family for c in chosen}
        fresh = [c for c in remaining if c.family not in in_challenge]
        # Fall back step by step rather than fail: a bank too small for the rules still gets a challenge.
        eligible = [c for c in fresh if c.family not in resting] or fresh or remaining
        least = min(c.uses for c in eligible)
        pool = [c for c in eligible if c.uses == least]
        topics = {c.topic for c in chosen}

        def rank(
            c: QuestionCandidate, target: Difficulty = target, topics: set[str] = topics
        ) -> tuple[int, int, float]:
            distance = abs(_RANKS[c.difficulty] - target.rank)
            return (distance, 1 if c.topic in topics else 0, used[c.family] / size[c.family])

        best = min(pool, key=rank)
        chosen.append(best)
        remaining.remove(best)
    _with_a_disputable(chosen, remaining, resting)
    chosen.sort(key=lambda c: _RANKS[c.difficulty])
    return chosen


def _with_a_disputable(
    chosen: list[QuestionCandidate], remaining: list[QuestionCandidate], resting: set[str]
) -> None:
    """Make one of ``chosen`` a question of :data:`DISPUTABLE_KINDS` when none is and one can be: the
    least-used such candidate (of a family not in the challenge, not resting where possible) takes the
    place of the chosen problem closest to it in difficulty, the most-used of those first.
    """
    if not chosen or any(c.kind in DISPUTABLE_KINDS for c in chosen):
        return
    families = {c.family for c in chosen}
    runnable = [c for c in remaining if c.kind in DISPUTABLE_KINDS and c.family not in families]
    runnable = [c for c in runnable if c.family not in resting] or runnable
    if not runnable:
        return
    least = min(c.uses for c in runnable)
    pool = [c for c in runnable if c.uses == least]
    slot, best = min(
        ((i, c) for i in range(len(chosen)) for c in pool),
        key=lambda p: (abs(_RANKS[p[1].difficulty] - _RANKS[chosen[p[0]].difficulty]), -chosen[p[0]].uses),
    )
    remaining.append(chosen[slot])
    remaining.remove(best)
    chosen[slot] = best
