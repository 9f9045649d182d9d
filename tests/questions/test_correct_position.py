"""The keyed-letter bias: ``questions stats`` reports, per kind, the share of questions keyed on each letter
as players see them (hand-written in file order, family instances after their stable shuffle), and
``questions validate`` warns when one letter holds too much of a kind, or of one file's hand-written
questions.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from questions.loader import LoadedQuestion, default_bank_dir, load_paths
from questions.schema import QuestionSpec
from questions.stats import (
    FILE_POSITION_LIMIT,
    FILE_POSITION_MIN_QUESTIONS,
    POSITION_LIMIT,
    POSITION_MIN_QUESTIONS,
    correct_letter,
    correct_position_shares,
    correct_position_warnings,
    file_position_warnings,
)
from tests.cli import rankzero
from tests.conftest import make_spec


def _specs(raw: list[dict[str, Any]]) -> list[QuestionSpec]:
    return [QuestionSpec.model_validate(s) for s in raw]


def _keyed(prefix: str, letters: str, kind: str = "debug", n_choices: int = 4) -> list[dict[str, Any]]:
    """One question per letter of ``letters``, keyed on that letter."""
    return [
        make_spec(
            f"{prefix}-{i}", "advanced", "DDP", kind=kind, correct="ABCD".index(letter), n_choices=n_choices
        )
        for i, letter in enumerate(letters)
    ]


def test_the_letter_is_the_keyed_choice_in_the_order_shown() -> None:
    assert (
        correct_letter(QuestionSpec.model_validate(make_spec("keyed-c", "advanced", "DDP", correct=2))) == "C"
    )


def test_shares_are_per_kind_and_list_every_letter_offered() -> None:
    specs = _specs(
        [
            *_keyed("dbg", "AABB"),
            *_keyed("c", "AAA", kind="conceptual", n_choices=3),  # three choices: no D offered
        ]
    )
    assert correct_position_shares(specs) == {
        "conceptual": {"A": 1.0, "B": 0.0, "C": 0.0},
        "debug": {"A": 0.5, "B": 0.5, "C": 0.0, "D": 0.0},
    }


def test_a_kind_warns_past_the_limit_only_from_the_minimum_size() -> None:
    leaning = int(POSITION_MIN_QUESTIONS * POSITION_LIMIT) + 1  # one past the limit
    rest = POSITION_MIN_QUESTIONS - leaning
    specs = _specs(_keyed("dbg", "B" * leaning + "ACD" * rest)[:POSITION_MIN_QUESTIONS])
    lines = correct_position_warnings(specs)
    assert len(lines) == 1
    assert lines[0].startswith(
        f"debug: the correct choice is B in {leaning} of {POSITION_MIN_QUESTIONS} questions"
    )
    assert "swap whole choice entries" in lines[0]
    # One question fewer: too few to judge, however they lean.
    assert correct_position_warnings(specs[1:]) == []
    # At the limit exactly: no warning.
    at_limit = int(POSITION_MIN_QUESTIONS * POSITION_LIMIT)
    balanced = _specs(_keyed("dbg", "B" * at_limit + "ACD" * POSITION_MIN_QUESTIONS)[:POSITION_MIN_QUESTIONS])
    assert correct_position_warnings(balanced) == []


def _loaded(raw: list[dict[str, Any]], file: str) -> list[LoadedQuestion]:
    return [LoadedQuestion(s, file, 1) for s in _specs(raw)]


def test_a_file_warns_past_half_of_its_hand_written_questions() -> None:
    n = FILE_POSITION_MIN_QUESTIONS
    over = int(n * FILE_POSITION_LIMIT) + 1
    leaning = _loaded(_keyed("h", "B" * over + "ACD" * n)[:n], "bank/leaning.yaml")
    lines = file_position_warnings(leaning)
    assert lines == [
        f"bank/leaning.yaml: the correct choice is B in {over} of its {n} multiple-choice questions (limit "
        f"{FILE_POSITION_LIMIT:.0%}): move the correct choice of some of them to another letter (swap whole "
        "choice entries, text and feedback together; check that no prompt, hint, explanation or feedback "
        "names a choice by its letter or position)"
    ]
    assert file_position_warnings(leaning[1:]) == []  # too few to judge
    # Family instances (an id with "/") are a stable shuffle no author chose: not counted.
    instances = _loaded(_keyed("fam-zz/n=", "B" * n), "bank/generated/fam.yaml")
    assert file_position_warnings(instances) == []
    # Retired questions are never shown.
    retired = _loaded([{**s, "retired": True} for s in _keyed("r", "B" * n)], "bank/retired.yaml")
    assert file_position_warnings(retired) == []


def test_validate_warns_and_stats_reports_the_shares(tmp_path: Path) -> None:
    bank = tmp_path / "bank"
    bank.mkdir()
    n = POSITION_MIN_QUESTIONS
    (bank / "debug.yaml").write_text(yaml.safe_dump({"questions": _keyed("dbg", "C" * n)}))
    done = rankzero("questions", "validate", str(bank))
    assert done.returncode == 0, done.stderr  # warnings, not errors
    assert f"debug: the correct choice is C in {n} of {n} questions (100%, limit {POSITION_LIMIT:.0%})" in (
        done.stderr
    )
    assert f"debug.yaml: the correct choice is C in {n} of its {n} multiple-choice questions" in done.stderr
    stats = json.loads(rankzero("questions", "stats", "--json", str(bank)).stdout)
    assert stats["correct_position_share"] == {"debug": {"A": 0.0, "B": 0.0, "C": 1.0, "D": 0.0}}
    (bank / "debug.yaml").write_text(yaml.safe_dump({"questions": _keyed("dbg", "ABCD" * (n // 4))}))
    done = rankzero("questions", "validate", str(bank))
    assert done.returncode == 0 and "warning" not in done.stderr, done.stderr


def test_the_shipped_bank_leans_on_no_letter() -> None:
    loaded = load_paths([default_bank_dir()])
    shown = [q.spec for q in loaded if not q.spec.retired]
    assert correct_position_warnings(shown) == []
    assert file_position_warnings(loaded) == []
