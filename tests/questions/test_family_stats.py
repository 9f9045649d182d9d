"""``rankzero questions stats --json`` on a small bank, run as the real command (in-process)."""

from __future__ import annotations

import datetime as dt
import itertools
import json
from pathlib import Path

import yaml

from bot.core.models import QuestionCandidate
from questions.stats import days_without_repeat, replay
from tests.cli import rankzero
from tests.conftest import make_spec

LEVELS = ("intermediate", "advanced", "expert")


def test_stats_json_counts_families_verified_and_days(tmp_path: Path) -> None:
    bank = tmp_path / "bank"
    (bank / "generated").mkdir(parents=True)
    base = [make_spec(f"base-{i}", LEVELS[i % 3], "DDP") for i in range(10)]
    retired = {**make_spec("base-old", "advanced", "DDP"), "retired": True}  # out of rotation: not counted
    (bank / "base.yaml").write_text(yaml.safe_dump({"questions": [*base, retired]}))
    inst = [make_spec(f"fam-a/n={i}", "advanced", "Collectives") for i in range(6)]
    records = {q["id"]: {"hash": "x", "torch": "2.13.0", "status": "ok", "verified": True} for q in inst[:4]}
    (bank / "generated" / "a.yaml").write_text(
        yaml.safe_dump({"generated": {"source": "a.yaml", "instances": records}, "questions": inst})
    )
    done = rankzero("questions", "stats", "--json", str(bank))
    assert done.returncode == 0, done.stderr
    stats = json.loads(done.stdout)
    assert stats["multiple_choice"] == 16
    assert stats["families"] == 1 and stats["instances"] == 6 and stats["base_questions"] == 10
    assert stats["verified"] == 4
    assert stats["by_topic"] == {"Collectives": 6, "DDP": 10}
    assert set(stats["by_kind"]) == {"conceptual"} and sum(stats["by_difficulty"].values()) == 16
    # 10 base questions + one family usable once a week: 11 questions in 2 days (5 a day), then the
    # 3rd day has only 1 unseen base question and a resting family: a repeat.
    assert stats["days_without_repeat"] == 2


def test_days_without_repeat_respects_the_family_rest() -> None:
    # 40 instances of one family alone: one a week; 5 a day is impossible without a repeat on day 1.
    one_family = [QuestionCandidate(i, f"f/n={i}", "t", "advanced", "conceptual", 0) for i in range(40)]
    assert days_without_repeat(one_family) == 0
    # 35 families of 4: 5 a day, each family back after 7 days: exactly 28 days (140 questions).
    many = [
        QuestionCandidate(f * 10 + i, f"f{f}/n={i}", f"t{f % 14}", LEVELS[f % 3], "conceptual", 0)
        for f in range(35)
        for i in range(4)
    ]
    assert days_without_repeat(many) == 28


def test_the_replay_skips_weekends_when_asked_and_records_each_day_before_the_next() -> None:
    # 40 one-question families: every day's 5 picks are new, and each pick is recorded as asked on its day
    # before the next day is picked (the state both figures read).
    bank = [QuestionCandidate(i, f"q{i}", f"t{i % 14}", LEVELS[i % 3], "conceptual", 0) for i in range(40)]
    asked: set[str] = set()
    days = []
    for day, picks in replay(bank, weekdays_only=True):
        assert all(p.uses == 0 and p.last_used is None for p in picks)  # never an asked one while new exist
        assert not asked & {p.question_id for p in picks}
        asked |= {p.question_id for p in picks}
        days.append(day)
        if len(days) == 7:
            break
    assert all(d.weekday() < 5 for d in days)
    assert days[5] - days[4] == dt.timedelta(days=3)  # Friday, then Monday
    every_day = [day for day, _ in itertools.islice(replay(bank), 7)]
    assert every_day == [days[0] + dt.timedelta(days=n) for n in range(7)]
