"""What the learned difficulty costs a challenge's close, and how well it recovers known difficulties.

Usage: python benchmarks/learned_difficulty.py [--players 200] [--runs 20]

* cost: ``update_estimates`` (bot/core/difficulty.py) on one challenge of 5 problems answered by
  ``--players`` players, the pure part the close runs in its transaction (median and p90 of ``--runs``);
* recovery: 40 questions of known difficulty (8 labelled two levels off), 400 challenges of 5 questions
  and 20 of 60 players each, seeded: the mean and largest error of the estimates and how many mislabelled
  questions end under their true label.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from bot.core.difficulty import FirstAttempt, label_prior, level_of, sigmoid, update_estimates
from bot.core.vocabulary import Difficulty


def _cost(players: int, runs: int) -> list[float]:
    rng = random.Random(1)
    questions = [f"q{i}" for i in range(5)]
    answers = [FirstAttempt(p, q, rng.random() < 0.6) for q in questions for p in range(players)]
    current = {q: label_prior("intermediate") for q in questions}
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        update_estimates(answers, current)
        times.append(time.perf_counter() - started)
    return times


def _recovery() -> tuple[float, float, int, int]:
    rng = random.Random(2026)
    true = {f"q{i}": rng.uniform(-2.3, 2.3) for i in range(40)}
    labels = {q: level_of(b).value for q, b in true.items()}
    levels = list(Difficulty)
    wrong = sorted(true)[:8]
    for q in wrong:
        rank = level_of(true[q]).rank
        labels[q] = levels[rank + 2 if rank < 2 else rank - 2].value
    drawn = [rng.gauss(0, 1) for _ in range(60)]
    ability = [a - statistics.mean(drawn) for a in drawn]
    estimates = {q: label_prior(label) for q, label in labels.items()}
    for _ in range(400):
        team = rng.sample(range(60), 20)
        answers = [
            FirstAttempt(p, q, rng.random() < sigmoid(ability[p] - true[q]))
            for q in rng.sample(sorted(true), 5)
            for p in team
        ]
        estimates.update(update_estimates(answers, estimates))
    errors = [abs(estimates[q].rating - true[q]) for q in true]
    fixed = sum(1 for q in wrong if estimates[q].level is level_of(true[q]))
    return statistics.mean(errors), max(errors), fixed, len(wrong)


def main() -> None:
    """Print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--players", type=int, default=200)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    times = sorted(_cost(args.players, args.runs))
    p90 = times[min(len(times) - 1, int(0.9 * len(times)))]
    print(
        f"update_estimates, 5 problems x {args.players} players: "
        f"median {statistics.median(times) * 1000:.1f} ms, p90 {p90 * 1000:.1f} ms"
    )
    mean, worst, fixed, wrong = _recovery()
    print(
        f"recovery: mean error {mean:.2f} logits, largest {worst:.2f}; "
        f"{fixed}/{wrong} mislabelled questions under their true label"
    )


if __name__ == "__main__":
    main()
