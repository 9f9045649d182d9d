"""Every daily challenge has a problem that can be disputed when the bank has one (issue 25, section 5:
`rankzero dispute today:N` was refused for every problem of a day that picked only metrics, conceptual and
hyperparameter questions, about one day in three with the shipped bank).
"""

from __future__ import annotations

import datetime as dt
import random

from bot.core import scoring
from bot.core.models import QuestionCandidate
from tests.shipped import shipped_questions

DAY = dt.date(2026, 11, 27)


def test_a_challenge_of_the_shipped_bank_always_has_a_runnable_problem() -> None:
    specs = [q.spec for q in shipped_questions() if q.spec.choices and not q.spec.retired]
    candidates = [
        QuestionCandidate(i, s.id, s.topic, s.difficulty.value, s.kind.value, 0) for i, s in enumerate(specs)
    ]
    runnable = {s.id for s in specs if s.code and s.runner}
    for seed in range(60):
        picked = scoring.pick_problems(candidates, 5, random.Random(seed), DAY)
        assert len({c.question_id for c in picked}) == 5
        assert any(c.question_id in runnable for c in picked), [c.question_id for c in picked]
        ranks = [scoring._RANKS[c.difficulty] for c in picked]
        assert ranks == sorted(ranks)  # still in ramp order


def test_the_runnable_question_takes_the_closest_difficulty_and_the_rules_hold() -> None:
    levels = ["intermediate", "advanced", "expert"]
    candidates = [
        QuestionCandidate(i, f"c{i}", f"t{i % 5}", levels[i % 3], "conceptual", 0) for i in range(15)
    ]
    candidates.append(QuestionCandidate(99, "run-1", "t9", "advanced", "predict_output", 0))
    for seed in range(20):
        picked = scoring.pick_problems(candidates, 5, random.Random(seed), DAY)
        assert "run-1" in [c.question_id for c in picked]
        assert [c.difficulty for c in picked] == [
            "intermediate",
            "intermediate",
            "advanced",
            "advanced",
            "expert",
        ]
    # A bank without one is picked as before: nothing to add.
    plain = candidates[:-1]
    assert all(c.kind == "conceptual" for c in scoring.pick_problems(plain, 5, random.Random(0), DAY))
