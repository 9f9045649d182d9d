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

#: Base points by difficulty, keyed by the members (all of them: tests/bot/core/test_vocabulary.py checks
#: it) and read with the plain strings questions carry (a member hashes as its value: no conversion per
#: answer).
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
#: Days before a channel meets an experience again (a concept with the same reasoning), while the bank
#: still has experiences the channel has not seen in that time.
EXPERIENCE_REST_DAYS = 120
#: The style of questions whose answer is mostly arithmetic (a formula family, a metrics question).
ARITHMETIC = "arithmetic"
#: At most this many arithmetic questions in one day's challenge (while others can fill the slot).
MAX_ARITHMETIC_PER_DAY = 2
#: The styles each day's mix rotates through; the day's ordinal decides which comes first.
ROTATION_STYLES: tuple[str, ...] = (
    Kind.DEBUG.value,
    Kind.CONCEPTUAL.value,
    Kind.MODEL_CHOICE.value,
    Kind.PREDICT_OUTPUT.value,
)
#: The longest experience key (a 64-character concept and a few short reasoning parameters).
MAX_EXPERIENCE = 160
#: Kinds whose questions carry code the runner can run (the bank requires a runner block with the code of
#: a predict_output question): each challenge has one when the bank does, so that at least one of its
#: problems can be disputed (`rankzero dispute today:N` was refused for every problem of a day of
#: metrics and conceptual questions).
DISPUTABLE_KINDS = frozenset({Kind.PREDICT_OUTPUT.value})


def experience_of(question_id: str, concept: str | None, experience: str | None) -> str:
    """What a player experiences answering a question: the key the family build derived (its concept and
    the values of the parameters that change the reasoning), else the concept the question names, else
    its family (an instance's family id; a base question is its own family).
    """
    return experience or concept or question_id.split("/", 1)[0]


def style_of(kind: str, arithmetic: bool) -> str:
    """The reasoning style a question asks for: :data:`ARITHMETIC` for a formula or a metrics question,
    ``conceptual`` for a hyperparameter choice argued in words, else its kind.
    """
    if arithmetic or kind == Kind.METRICS.value:
        return ARITHMETIC
    if kind == Kind.HYPERPARAMETER.value:
        return Kind.CONCEPTUAL.value
    return kind


def experience_last_seen(candidates: Iterable[QuestionCandidate]) -> dict[str, dt.date]:
    """The last day the channel met each experience (any of its questions)."""
    last: dict[str, dt.date] = {}
    for c in candidates:
        key = c.experience_key
        if c.last_used is not None and (key not in last or c.last_used > last[key]):
            last[key] = c.last_used
    return last


def _met_within(c: QuestionCandidate, seen: dict[str, dt.date], day: dt.date, days: int) -> bool:
    """Whether the channel met ``c``'s experience less than ``days`` days before ``day``."""
    last = seen.get(c.experience_key)
    return last is not None and (day - last).days < days


def _day_rotation(day: dt.date | None) -> dict[str, int]:
    """Each rotated style's place on ``day`` (0 first); arithmetic and other styles come after them."""
    shift = day.toordinal() % len(ROTATION_STYLES) if day is not None else 0
    order = ROTATION_STYLES[shift:] + ROTATION_STYLES[:shift]
    return {style: i for i, style in enumerate(order)}


def pick_problems(
    candidates: Sequence[QuestionCandidate],
    n: int,
    rng: random.Random,
    day: dt.date | None = None,
    *,
    family_rest_days: int = FAMILY_REST_DAYS,
    experience_rest_days: int = EXPERIENCE_REST_DAYS,
) -> list[QuestionCandidate]:
    """Choose n questions for a challenge.

    Rules, each a filter that falls back to the candidates before it when it would leave none (a bank too
    small for the rules still gets a challenge):

    1. never two questions of one family or one experience (:attr:`QuestionCandidate.experience_key`) in a
       challenge;
    2. no experience the channel met less than ``experience_rest_days`` before ``day`` (without a day:
       none it ever met); when every one was, the least-used questions, of experiences not met within half
       that, a quarter... (the experience met longest ago ranks first);
    3. no family asked in the channel less than ``family_rest_days`` before ``day``;
    4. at most :data:`MAX_ARITHMETIC_PER_DAY` arithmetic questions (this bends before rule 2 while fresh
       experiences exist, and before the age of a repeated one once none does).

    Among what is left, the slot's difficulty (:func:`difficulty_ramp`, nearest level as fallback) comes
    first, then a question never asked in the channel, then a style not yet in the challenge, then the
    experience met longest ago, then the day's rotation of :data:`ROTATION_STYLES` (arithmetic after
    them), then a topic not yet in it, then an experience the channel never met, then the least-used
    question, then the family with the smallest share of its instances used (families drain evenly).
    Last, a challenge without a question of :data:`DISPUTABLE_KINDS` gets one when the candidates have
    one (see :func:`_with_a_disputable`).
    Returned in ramp order.
    """
    remaining = list(candidates)
    rng.shuffle(remaining)
    size: dict[str, int] = {}
    used: dict[str, int] = {}
    last: dict[str, dt.date] = {}
    met: dict[str, int] = {}
    for c in candidates:
        size[c.family] = size.get(c.family, 0) + 1
        used[c.family] = used.get(c.family, 0) + (1 if c.uses else 0)
        met[c.experience_key] = met.get(c.experience_key, 0) + c.uses
        if c.last_used is not None and (c.family not in last or c.last_used > last[c.family]):
            last[c.family] = c.last_used
    seen = experience_last_seen(candidates)
    resting: set[str] = set()
    if day is not None:
        resting = {f for f, d in last.items() if (day - d).days < family_rest_days}
        recent = {e for e, d in seen.items() if (day - d).days < experience_rest_days}
    else:
        recent = {e for e, k in met.items() if k}
    rotation = _day_rotation(day)
    chosen: list[QuestionCandidate] = []
    for target in difficulty_ramp(min(n, len(candidates))):
        families = {c.family for c in chosen}
        experiences = {c.experience_key for c in chosen}
        eligible = [
            c for c in remaining if c.family not in families and c.experience_key not in experiences
        ] or remaining
        capped = sum(1 for c in chosen if c.style_key == ARITHMETIC) >= MAX_ARITHMETIC_PER_DAY
        fresh = [c for c in eligible if c.experience_key not in recent]
        window = max(experience_rest_days, 0)  # a negative rest would never halve to 0
        while not fresh:
            # Every experience was met lately: widen step by step (half the window each time) so the
            # style and difficulty rules still have a choice; the oldest go first in the ranking below.
            # The family rest still holds here (it is the weaker rule only among fresh experiences).
            window //= 2
            # A question never asked here goes before an asked one whatever its experience's age.
            rested = [c for c in eligible if c.family not in resting] or eligible
            if capped:  # every experience repeats anyway: the day's mix wins over the oldest one
                rested = [c for c in rested if c.style_key != ARITHMETIC] or rested
            least = min(c.uses for c in rested)
            unasked = [c for c in rested if c.uses == least]
            fresh = [
                c for c in unasked if day is None or window == 0 or not _met_within(c, seen, day, window)
            ]
        eligible = [c for c in fresh if c.family not in resting] or fresh
        if capped:
            eligible = [c for c in eligible if c.style_key != ARITHMETIC] or eligible
        styles = [c.style_key for c in chosen]
        topics = {c.topic for c in chosen}

        def rank(
            c: QuestionCandidate,
            target: Difficulty = target,
            styles: list[str] = styles,
            topics: set[str] = topics,
        ) -> tuple[int, int, int, int, int, int, int, int, float]:
            return (
                abs(_RANKS[c.difficulty] - target.rank),
                1 if c.uses else 0,  # a question never asked here before one asked 4+ months ago
                styles.count(c.style_key),
                seen.get(c.experience_key, dt.date.min).toordinal(),  # then the experience met longest ago
                rotation.get(c.style_key, len(rotation)),
                1 if c.topic in topics else 0,
                1 if met[c.experience_key] else 0,
                c.uses,
                used[c.family] / size[c.family],
            )

        best = min(eligible, key=rank)
        chosen.append(best)
        remaining.remove(best)
    _with_a_disputable(chosen, remaining, resting, recent)
    chosen.sort(key=lambda c: _RANKS[c.difficulty])
    return chosen


def _with_a_disputable(
    chosen: list[QuestionCandidate], remaining: list[QuestionCandidate], resting: set[str], recent: set[str]
) -> None:
    """Make one of ``chosen`` a question of :data:`DISPUTABLE_KINDS` when none is and one can be: the
    least-used such candidate (of a family and an experience not in the challenge, an experience not met
    lately and a family not resting where possible) takes the place of the chosen problem closest to it in
    difficulty, the most-used of those first. One met lately only replaces a problem met lately too.
    """
    if not chosen or any(c.kind in DISPUTABLE_KINDS for c in chosen):
        return
    families = {c.family for c in chosen}
    experiences = {c.experience_key for c in chosen}
    runnable = [
        c
        for c in remaining
        if c.kind in DISPUTABLE_KINDS and c.family not in families and c.experience_key not in experiences
    ]
    fresh = [c for c in runnable if c.experience_key not in recent]
    slots = list(range(len(chosen)))
    if fresh:
        runnable = fresh
    else:
        # Disputability never costs the experience rule: a runnable question met lately only takes the
        # place of a problem that repeats an experience too.
        slots = [i for i, c in enumerate(chosen) if c.experience_key in recent]
    runnable = [c for c in runnable if c.family not in resting] or runnable
    if not runnable or not slots:
        return
    least = min(c.uses for c in runnable)
    pool = [c for c in runnable if c.uses == least]
    slot, best = min(
        ((i, c) for i in slots for c in pool),
        key=lambda p: (abs(_RANKS[p[1].difficulty] - _RANKS[chosen[p[0]].difficulty]), -chosen[p[0]].uses),
    )
    remaining.append(chosen[slot])
    remaining.remove(best)
    chosen[slot] = best
