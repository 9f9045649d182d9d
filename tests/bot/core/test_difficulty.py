"""The learned difficulty (bot/core/difficulty.py) on synthetic first attempts drawn from known
difficulties and abilities with a seeded RNG: the estimates recover the truth (values and order), a
mislabelled question ends under its true label, and a question with few answers stays near its label.
"""

from __future__ import annotations

import random
import statistics

import pytest

from bot.core.difficulty import (
    LABEL_LOGITS,
    DifficultyEstimate,
    FirstAttempt,
    disagrees,
    label_prior,
    level_of,
    map_logit,
    sigmoid,
    update_estimates,
)
from bot.core.vocabulary import Difficulty


def _ranks(values: list[float]) -> list[int]:
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0] * len(values)
    for rank, i in enumerate(order):
        ranks[i] = rank
    return ranks


def _spearman(a: list[float], b: list[float]) -> float:
    ra, rb = _ranks(a), _ranks(b)
    n = len(a)
    return 1 - 6 * sum((x - y) ** 2 for x, y in zip(ra, rb, strict=True)) / (n * (n * n - 1))


def _simulate(
    seed: int, labels: dict[str, str], true: dict[str, float], challenges: int, players: int = 60
) -> dict[str, DifficultyEstimate]:
    """Challenges of 5 questions, each answered by 20 of the team's players, closed one after another."""
    rng = random.Random(seed)
    drawn = [rng.gauss(0.0, 1.0) for _ in range(players)]
    # Difficulty is relative to the team's average player (the model's zero): centre the team on it.
    mean = statistics.mean(drawn)
    ability = [a - mean for a in drawn]
    estimates = {q: label_prior(label) for q, label in labels.items()}
    for _ in range(challenges):
        questions = rng.sample(sorted(true), 5)
        team = rng.sample(range(players), 20)
        answers = [
            FirstAttempt(p, q, rng.random() < sigmoid(ability[p] - true[q])) for q in questions for p in team
        ]
        estimates.update(update_estimates(answers, estimates))
    return estimates


@pytest.fixture(scope="module")
def bank() -> tuple[dict[str, float], dict[str, str], set[str]]:
    """40 questions of known difficulty; 8 carry a label two levels off (the bank's mistakes)."""
    rng = random.Random(2026)
    true = {f"q{i}": rng.uniform(-2.3, 2.3) for i in range(40)}
    levels = list(Difficulty)
    labels = {q: level_of(b).value for q, b in true.items()}
    wrong = set(sorted(true)[:8])
    for q in wrong:
        rank = level_of(true[q]).rank
        labels[q] = levels[rank + 2 if rank < 2 else rank - 2].value
    return true, labels, wrong


def test_many_answers_recover_the_true_difficulties(
    bank: tuple[dict[str, float], dict[str, str], set[str]],
) -> None:
    true, labels, _ = bank
    estimates = _simulate(1, labels, true, challenges=400)
    assert min(e.first_attempts for e in estimates.values()) >= 300
    errors = [abs(estimates[q].rating - true[q]) for q in true]
    # Shrinking the abilities toward the team's mean flattens the extremes a little.
    assert statistics.mean(errors) < 0.3
    assert max(errors) < 0.7
    qs = sorted(true)
    assert _spearman([true[q] for q in qs], [estimates[q].rating for q in qs]) > 0.95


def test_a_mislabelled_question_ends_under_its_true_label(
    bank: tuple[dict[str, float], dict[str, str], set[str]],
) -> None:
    true, labels, wrong = bank
    estimates = _simulate(2, labels, true, challenges=400)
    for q in wrong:
        # The true value is at least 0.2 from a boundary for a fair check of the mapped label.
        if min(abs(true[q] - cut) for cut in (-1.0, 0.0, 1.0)) > 0.2:
            assert estimates[q].level is level_of(true[q]), q
            assert disagrees(estimates[q], labels[q], min_attempts=20), q
    agreeing = [q for q in true if q not in wrong and min(abs(true[q] - c) for c in (-1.0, 0.0, 1.0)) > 0.3]
    assert agreeing
    assert not any(disagrees(estimates[q], labels[q], 20) for q in agreeing)


def test_few_answers_stay_near_the_label() -> None:
    # A beginner question three players all got wrong: hard-looking data, but three answers are not
    # enough to leave the label's neighbourhood.
    prior = label_prior("beginner")
    answers = [FirstAttempt(p, "q", False) for p in range(3)]
    after = update_estimates(answers, {"q": prior})["q"]
    assert prior.rating < after.rating < prior.rating + 0.8
    assert after.level in {Difficulty.BEGINNER, Difficulty.INTERMEDIATE}
    assert (after.first_attempts, after.first_correct) == (3, 0)
    assert after.information > prior.information
    assert not disagrees(after, "beginner", min_attempts=20)


def test_the_prior_is_the_label() -> None:
    for level, logit in LABEL_LOGITS.items():
        assert label_prior(level.value).rating == logit
        assert level_of(logit) is level
    assert label_prior("not-a-level").rating == 0.0


def test_map_is_clamped_and_answers_move_it_the_right_way() -> None:
    x, info = map_logit(0.0, 1e-9, [0.0] * 50, [True] * 50)
    assert x == 6.0 and info > 0
    up, _ = map_logit(0.0, 1.0, [0.0] * 10, [True] * 8 + [False] * 2)
    down, _ = map_logit(0.0, 1.0, [0.0] * 10, [True] * 2 + [False] * 8)
    assert down < 0.0 < up
    assert up == pytest.approx(-down)


def test_a_strong_team_makes_a_question_look_easier_only_through_the_answers() -> None:
    # The same answers on the same question: the ability estimate depends on the player's other answers.
    current = {q: label_prior("intermediate") for q in ("a", "b", "c")}
    strong = [FirstAttempt(1, q, True) for q in ("a", "b", "c")]
    weak = [FirstAttempt(2, "a", True), FirstAttempt(2, "b", False), FirstAttempt(2, "c", False)]
    # Player 1 got everything right, so their right answer to "a" says less about "a" than player 2's.
    by_strong = update_estimates(strong, current)["a"].rating
    by_weak = update_estimates(weak, current)["a"].rating
    assert by_weak < by_strong < current["a"].rating
