"""The vocabulary (bot/core/vocabulary.py) is the one definition of each fixed list.

Mappings keyed by its members cover every member, and no module of bot/ or questions/ spells a list of
them out again (the copies had drifted: Discord's /question add could not add a beginner question).
"""

from __future__ import annotations

import ast
from enum import StrEnum
from pathlib import Path

import pytest

from bot.adapters.console.render import DIFFICULTY_STYLE, KIND_LABELS
from bot.adapters.discord.commands import SCOPE_NAMES
from bot.adapters.discord.render import DIFFICULTY_ICONS
from bot.core.scoring import BASE_POINTS
from bot.core.vocabulary import (
    MULTIPLE_CHOICE_KINDS,
    RUNNABLE_KINDS,
    Difficulty,
    Kind,
    Period,
    Scope,
    parse_enum,
)

ROOT = Path(__file__).resolve().parents[3]
VOCABULARY = ROOT / "bot" / "core" / "vocabulary.py"
ENUMS: tuple[type[StrEnum], ...] = (Kind, Difficulty, Period, Scope)


@pytest.mark.parametrize(
    ("mapping", "enum"),
    [
        (BASE_POINTS, Difficulty),
        (DIFFICULTY_ICONS, Difficulty),
        (DIFFICULTY_STYLE, Difficulty),
        (KIND_LABELS, Kind),
        (SCOPE_NAMES, Scope),
    ],
)
def test_every_mapping_keyed_by_a_vocabulary_covers_each_member(
    mapping: dict[str, object], enum: type[StrEnum]
) -> None:
    assert set(mapping) == set(enum)


def test_labels_exist_for_every_period_and_scope() -> None:
    assert [p.label for p in Period] == ["today", "this week", "all time"]
    assert [s.label for s in Scope] == ["this channel", "this workspace"]
    assert [k.label for k in MULTIPLE_CHOICE_KINDS][:2] == ["predict output", "conceptual"]


def test_kind_sets_and_difficulty_order() -> None:
    assert set(RUNNABLE_KINDS) <= set(MULTIPLE_CHOICE_KINDS)
    assert [k for k in Kind if not k.is_multiple_choice] == [Kind.FLASHCARD, Kind.EXPLAIN]
    assert [k for k in Kind if k.is_runnable] == [Kind.PREDICT_OUTPUT, Kind.DEBUG]
    assert [d.rank for d in Difficulty] == [0, 1, 2, 3]
    assert sorted(["expert", "beginner", "advanced"], key=lambda d: Difficulty(d).rank) == [
        "beginner",
        "advanced",
        "expert",
    ]
    # A member is its string: YAML, database rows and chat payloads keep plain strings.
    as_str: str = (
        Kind.PREDICT_OUTPUT
    )  # compared as the str it is (a Kind-typed side is never equal to a literal for mypy)
    assert as_str == "predict_output" and f"{Difficulty.EXPERT}" == "expert"


def test_parse_enum_forgives_case_and_spaces_and_names_the_allowed_values() -> None:
    assert parse_enum(Period, " Week ", "period") is Period.WEEK
    with pytest.raises(ValueError, match=r"unknown scope 'guild': use one of channel, workspace"):
        parse_enum(Scope, " guild", "scope")


# --------------------------------------------------------------------------- no second copy
def copies_in(source: str) -> list[tuple[int, type[StrEnum], list[str]]]:
    """``(line, enum, values)`` for each literal collection that spells out a vocabulary again.

    A tuple, list or set literal (a ``Literal[...]`` included) or a dict's keys holding three or more
    values of one enum (both values for a two-member enum) is a copy of that list.
    """
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            items: list[ast.expr | None] = list(node.elts)
        elif isinstance(node, ast.Dict):
            items = list(node.keys)
        else:
            continue
        strings = {i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str)}
        for enum in ENUMS:
            values = sorted(strings & {m.value for m in enum})
            if len(values) >= min(3, len(enum)):
                found.append((node.lineno, enum, values))
    return sorted(found, key=lambda f: f[0])


def test_the_copy_detector_sees_the_shapes_copies_had() -> None:
    shapes = """
from typing import Literal
KINDS = ("predict_output", "conceptual", "hyperparameter", "debug", "metrics", "model_choice")
Level = Literal["intermediate", "advanced", "expert"]
ORDER = {"beginner": 0, "intermediate": 1, "advanced": 2, "expert": 3}
SCOPES = ["channel", "workspace"]
fine = ("channel", "dm", "debug", "metrics")  # one scope and two kinds: not a copy
"""
    assert [(line, enum) for line, enum, _ in copies_in(shapes)] == [
        (3, Kind),
        (4, Difficulty),
        (5, Difficulty),
        (6, Scope),
    ]


def test_no_module_spells_out_a_fixed_list_again() -> None:
    files = sorted({*ROOT.joinpath("bot").rglob("*.py"), *ROOT.joinpath("questions").rglob("*.py")})
    assert len(files) > 20
    copies = [
        f"{path.relative_to(ROOT)}:{line}: {enum.__name__} {values}"
        for path in files
        if path != VOCABULARY
        for line, enum, values in copies_in(path.read_text(encoding="utf-8"))
    ]
    assert copies == [], "use bot.core.vocabulary instead of a copy:\n" + "\n".join(copies)
