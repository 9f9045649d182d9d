"""Difficulty learned from a team's answers: a Rasch (1PL) model fitted one closed challenge at a time.

The model: a player of ability ``a`` answers a question of difficulty ``b`` right at the first attempt
with probability ``sigmoid(a - b)`` (the logit scale). Only first attempts count: the second attempt of a
player who already saw a wrong answer struck out measures something else.

Each question starts from its bank label (:data:`LABEL_LOGITS`) with a Gaussian prior of
:data:`PRIOR_SD`; each close updates it by the maximum a posteriori estimate of ``b`` given that
challenge's first attempts, the previous estimate being the prior (an assumed-density filter: the
posterior is kept as a Gaussian, mean ``rating`` and precision ``information``). With few attempts the
prior dominates, so a question keeps (close to) its label until the team's answers say otherwise.

The players' abilities in a challenge are estimated first, from the same first attempts against the
questions' current ratings with a N(0, :data:`ABILITY_SD`) prior: a question answered only by the team's
strongest players does not look easy for that alone.

Pure functions, no I/O: the service reads the answers and the stored estimates in the close's
transaction and writes the results back in it (bot/core/insights.py, ``learn_from_close``); an answer
correction learns the corrected question again from its re-judged first attempts (``relearn_question``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from bot.core.vocabulary import Difficulty

#: Each label's prior mean on the logit scale (an average player answers an intermediate question right
#: about 62% of the time, an expert one about 18%). Learned ratings map back to labels at the midpoints.
LABEL_LOGITS: dict[Difficulty, float] = {
    Difficulty.BEGINNER: -1.5,
    Difficulty.INTERMEDIATE: -0.5,
    Difficulty.ADVANCED: 0.5,
    Difficulty.EXPERT: 1.5,
}
#: The label prior's standard deviation: its precision (1/0.6^2 = 2.8) is what about 11 answers of an
#: even question add (each adds p(1-p) <= 0.25), so a handful of answers barely moves a question.
PRIOR_SD = 0.6
#: The prior on a player's ability in one challenge (the team's average player is 0).
ABILITY_SD = 1.5
#: Estimates are clamped here: a question everyone answered right is easy, not infinitely easy.
MAX_LOGIT = 6.0
#: Newton steps are clamped to this length (the log-posterior is concave, so this only damps overshoot).
_MAX_STEP = 1.0
_ITERATIONS = 25
_TOLERANCE = 1e-6


@dataclass(frozen=True)
class FirstAttempt:
    """One player's first answer to one question in a closed challenge."""

    player: int
    question_id: str
    correct: bool


@dataclass(frozen=True)
class DifficultyEstimate:
    """A question's learned difficulty in one tenant: the posterior mean and precision, and the counts."""

    rating: float
    information: float
    first_attempts: int = 0
    first_correct: int = 0

    @property
    def level(self) -> Difficulty:
        """The label the learned rating maps to."""
        return level_of(self.rating)

    @property
    def accuracy(self) -> float | None:
        """The share of first attempts that were right (None before any)."""
        return self.first_correct / self.first_attempts if self.first_attempts else None


def sigmoid(x: float) -> float:
    """The logistic function, stable for large ``|x|``."""
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


def label_prior(label: str) -> DifficultyEstimate:
    """The estimate of a question nobody answered yet: its label's logit, the prior's precision.
    An unknown label (a bank newer than this code) starts in the middle.
    """
    try:
        mean = LABEL_LOGITS[Difficulty(label)]
    except ValueError:
        mean = 0.0
    return DifficultyEstimate(mean, 1.0 / PRIOR_SD**2)


def level_of(rating: float) -> Difficulty:
    """The label a rating falls under: the nearest label's logit (boundaries at the midpoints)."""
    return min(LABEL_LOGITS, key=lambda level: (abs(LABEL_LOGITS[level] - rating), level.rank))


def disagrees(estimate: DifficultyEstimate, label: str, min_attempts: int) -> bool:
    """Whether the team's answers (at least ``min_attempts`` first attempts) put a question under
    another label than the bank's.
    """
    return estimate.first_attempts >= min_attempts and estimate.level.value != label


def map_logit(
    mean: float, precision: float, offsets: Sequence[float], successes: Sequence[bool]
) -> tuple[float, float]:
    """The MAP of ``x`` under a N(mean, 1/precision) prior, where each observation succeeds with
    probability ``sigmoid(x - offset)``; returns (x, the observations' Fisher information at x).

    Newton's method on a strictly concave log-posterior (the prior keeps it so even when every answer
    agrees), hence a unique maximum; clamped to +-:data:`MAX_LOGIT`.
    """
    x = mean
    for _ in range(_ITERATIONS):
        grad = -precision * (x - mean)
        info = 0.0
        for offset, success in zip(offsets, successes, strict=True):
            p = sigmoid(x - offset)
            grad += (1.0 if success else 0.0) - p
            info += p * (1.0 - p)
        step = max(-_MAX_STEP, min(_MAX_STEP, grad / (info + precision)))
        x = max(-MAX_LOGIT, min(MAX_LOGIT, x + step))
        if abs(step) < _TOLERANCE:
            break
    info = sum(sigmoid(x - o) * (1.0 - sigmoid(x - o)) for o in offsets)
    return x, info


def estimate_abilities(answers: Iterable[FirstAttempt], ratings: Mapping[str, float]) -> dict[int, float]:
    """Each player's ability in this batch: the MAP against the questions' current ratings."""
    per_player: dict[int, tuple[list[float], list[bool]]] = {}
    for a in answers:
        offsets, outcomes = per_player.setdefault(a.player, ([], []))
        offsets.append(ratings[a.question_id])
        outcomes.append(a.correct)
    precision = 1.0 / ABILITY_SD**2
    return {
        player: map_logit(0.0, precision, offsets, outcomes)[0]
        for player, (offsets, outcomes) in per_player.items()
    }


def update_estimates(
    answers: Sequence[FirstAttempt], current: Mapping[str, DifficultyEstimate]
) -> dict[str, DifficultyEstimate]:
    """The questions' estimates after one closed challenge's first attempts (``current`` holds every
    answered question's estimate before it: stored, or :func:`label_prior`). Questions without an answer
    are left out (unchanged).
    """
    abilities = estimate_abilities(answers, {q: e.rating for q, e in current.items()})
    per_question: dict[str, tuple[list[float], list[bool]]] = {}
    for a in answers:
        offsets, outcomes = per_question.setdefault(a.question_id, ([], []))
        offsets.append(abilities[a.player])
        # x = b succeeds when the player fails: P(wrong) = sigmoid(b - ability).
        outcomes.append(not a.correct)
    updated: dict[str, DifficultyEstimate] = {}
    for question_id, (offsets, failures) in per_question.items():
        before = current[question_id]
        rating, info = map_logit(before.rating, before.information, offsets, failures)
        updated[question_id] = DifficultyEstimate(
            rating,
            before.information + info,
            before.first_attempts + len(failures),
            before.first_correct + sum(1 for failed in failures if not failed),
        )
    return updated
