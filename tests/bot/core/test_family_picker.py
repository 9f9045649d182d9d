"""The daily picker treats the instances of a family as one question (issue 14)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import random

from bot.core import scoring
from bot.core.models import QuestionCandidate
from bot.core.service import QuizService
from tests.conftest import ADMIN, CHANNEL, make_spec, test_bank

LEVELS = ("intermediate", "advanced", "expert")


def _family_bank() -> list[QuestionCandidate]:
    """3 families of 12 instances plus 6 base questions: the families would fill every slot alone."""
    cands: list[QuestionCandidate] = []
    for f in range(3):
        for i in range(12):
            cands.append(
                QuestionCandidate(len(cands), f"fam{f}/n={i}", f"t{f}", LEVELS[i % 3], "conceptual", 0)
            )
    for i in range(6):
        cands.append(QuestionCandidate(len(cands), f"base-{i}", "tb", LEVELS[i % 3], "conceptual", 0))
    return cands


def test_never_two_instances_of_a_family_in_one_challenge() -> None:
    cands = _family_bank()
    for seed in range(50):
        picked = scoring.pick_problems(cands, 5, random.Random(seed))
        families = [c.family for c in picked]
        assert len(families) == len(set(families)) == 5, families


def test_a_family_rests_seven_days_in_a_channel() -> None:
    day = dt.date(2027, 3, 10)
    cands = [
        QuestionCandidate(0, "fam0/n=0", "t", "intermediate", "conceptual", 1, day - dt.timedelta(days=6)),
        *[QuestionCandidate(i, f"fam0/n={i}", "t", "intermediate", "conceptual", 0) for i in range(1, 12)],
        QuestionCandidate(20, "fam1/n=0", "t", "expert", "conceptual", 1, day - dt.timedelta(days=7)),
        *[QuestionCandidate(20 + i, f"fam1/n={i}", "t", "expert", "conceptual", 0) for i in range(1, 12)],
        *[QuestionCandidate(40 + i, f"base-{i}", "u", "advanced", "conceptual", 0) for i in range(8)],
    ]
    # Each instance its own experience: only the family rest rule is at play (not the 120-day one).
    cands = [dataclasses.replace(c, experience=c.question_id) for c in cands]
    for seed in range(30):
        picked = scoring.pick_problems(cands, 5, random.Random(seed), day)
        assert "fam0" not in {c.family for c in picked}, "asked 6 days ago: still resting"
        assert "fam1" in {c.family for c in picked}, "asked 7 days ago: available again"


def test_rest_rule_never_beats_least_used_when_nothing_else_fits() -> None:
    # Only one family exists: a challenge still gets made (one instance per family is the rule that bends
    # last), and the picker does not crash.
    day = dt.date(2027, 3, 10)
    cands = [QuestionCandidate(i, f"solo/n={i}", "t", "advanced", "conceptual", 0) for i in range(6)]
    assert len(scoring.pick_problems(cands, 5, random.Random(0), day)) == 5


def _instances(family: str, n: int, level: str, topic: str) -> list[dict[str, object]]:
    return [make_spec(f"{family}/n={i}", level, topic) for i in range(n)]


async def test_service_spreads_families_over_days(service: QuizService) -> None:
    """Through the real storage: 21 days of challenges on a bank where two families hold most questions."""
    bank = [
        *_instances("big-a", 30, "intermediate", "DDP"),
        *_instances("big-b", 30, "expert", "Collectives"),
        *[make_spec(f"more-{i}", LEVELS[i % 3], "Scaling") for i in range(60)],
    ]
    await service.admin_import(ADMIN, bank)
    last_day: dict[str, dt.date] = {}
    start = dt.date(2027, 1, 4)
    for offset in range(21):
        day = start + dt.timedelta(days=offset)
        challenge, _ = await service.open_challenge(CHANNEL, day)
        families = [p.question.id.split("/")[0] for p in challenge.problems]
        assert len(families) == len(set(families)), f"{day}: two instances of a family: {families}"
        for fam in families:
            if fam in last_day:
                assert (day - last_day[fam]).days >= 7, f"{fam} again after {(day - last_day[fam]).days} days"
            last_day[fam] = day
    assert {"big-a", "big-b"} <= set(last_day)
    assert len(test_bank()) == 18  # the fixture's own bank is still there too
