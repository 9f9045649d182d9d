"""Practice benchmark: how long the pure parts of practice take (explain grading, FSRS scheduling).

Explain grading runs inside a chat interaction (Discord and Slack give 3 seconds to acknowledge), so it
must stay far below a millisecond-scale budget; FSRS runs four times per card shown (the delay preview on
each grade key). Both are pure functions: this times them on the bank's real explain prompts (their
model answers and a short paraphrase) and on a review card.

Run ``python benchmarks/practice.py [--repeat 2000]``. Prints the median per call in microseconds.
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import time
from collections.abc import Callable

from bot.bootstrap import shipped_bank_specs
from bot.core.grading import grade_explanation
from bot.core.srs import CardState, previews


def _median_us(fn: Callable[[], object], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e6


def main() -> None:
    """Time grading and scheduling; print one line per case."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=2000)
    args = parser.parse_args()
    explains = [s for s in shipped_bank_specs() if s["kind"] == "explain"]
    short = "The batch is split across the GPUs, each has a copy of the model, and outputs are gathered."
    for spec in explains:
        concepts = spec["concepts"]
        model = spec["model_answer"]
        long_us = _median_us(lambda: grade_explanation(model, concepts), args.repeat)  # noqa: B023
        short_us = _median_us(lambda: grade_explanation(short, concepts), args.repeat)  # noqa: B023
        print(
            f"grade {spec['id']:34} {len(concepts)} concepts: model answer ({len(model)} chars) "
            f"{long_us:7.0f} us · short answer {short_us:6.0f} us"
        )
    now = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    card = CardState(
        phase="review",
        stability=17.0,
        difficulty=6.0,
        interval_days=17,
        due=now,
        last_review=now - dt.timedelta(days=17),
    )
    us = _median_us(lambda: previews(card, now), args.repeat)
    print(f"FSRS: the 4 grade previews of one review card: {us:.1f} us")


if __name__ == "__main__":
    main()
