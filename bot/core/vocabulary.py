"""RankZero's fixed lists, defined once: question kinds, difficulties, leaderboard periods and scopes.

Every layer uses these enums: the bank's schema validates against them, the core picks and scores with
them, and each adapter builds its choices (Discord app-command choices, Slack static selects, console
prompts) from them, so a value added here appears everywhere and a value missing somewhere cannot drift.

They are ``StrEnum``s: a member compares equal to its string value and serialises as it, so YAML files,
database rows and chat payloads keep their plain strings.
"""

from __future__ import annotations

from enum import StrEnum
from typing import TypeVar

E = TypeVar("E", bound=StrEnum)


class Kind(StrEnum):
    """What sort of question it is, and so how it is answered."""

    PREDICT_OUTPUT = "predict_output"
    CONCEPTUAL = "conceptual"
    HYPERPARAMETER = "hyperparameter"
    DEBUG = "debug"
    METRICS = "metrics"
    MODEL_CHOICE = "model_choice"
    FLASHCARD = "flashcard"
    EXPLAIN = "explain"

    @property
    def is_multiple_choice(self) -> bool:
        """Answered by picking one of 2-6 choices (the kinds a daily challenge and a quiz use)."""
        return self in MULTIPLE_CHOICE_KINDS

    @property
    def is_runnable(self) -> bool:
        """Its code can be settled by the runner (a dispute or a preview runs it)."""
        return self in RUNNABLE_KINDS

    @property
    def label(self) -> str:
        """A human label: ``"predict output"``."""
        return self.value.replace("_", " ")


#: The kinds answered by picking a choice, in the order adapters list them.
MULTIPLE_CHOICE_KINDS: tuple[Kind, ...] = (
    Kind.PREDICT_OUTPUT,
    Kind.CONCEPTUAL,
    Kind.HYPERPARAMETER,
    Kind.DEBUG,
    Kind.METRICS,
    Kind.MODEL_CHOICE,
)
#: The kinds whose code the runner can settle.
RUNNABLE_KINDS: tuple[Kind, ...] = (Kind.PREDICT_OUTPUT, Kind.DEBUG)


class Difficulty(StrEnum):
    """How hard a question is; the order of the members is the order of difficulty."""

    BEGINNER = "beginner"
    INTERMEDIATE = "intermediate"
    ADVANCED = "advanced"
    EXPERT = "expert"

    @property
    def rank(self) -> int:
        """0 for beginner up to 3 for expert (for sorting and "at least this hard" filters)."""
        return _DIFFICULTY_RANKS[self]


#: Member -> position, computed once (challenge picking ranks every candidate by it).
_DIFFICULTY_RANKS: dict[Difficulty, int] = {level: i for i, level in enumerate(Difficulty)}


class Period(StrEnum):
    """The time span a leaderboard covers."""

    TODAY = "today"
    WEEK = "week"
    ALL = "all"

    @property
    def label(self) -> str:
        """A human label used in leaderboard titles (the day itself is added by the caller)."""
        return {Period.TODAY: "today", Period.WEEK: "this week", Period.ALL: "all time"}[self]


class Scope(StrEnum):
    """Whose players a leaderboard ranks: one channel's, or the whole workspace's (Discord server)."""

    CHANNEL = "channel"
    WORKSPACE = "workspace"

    @property
    def label(self) -> str:
        """A human label used in leaderboard titles."""
        return {Scope.CHANNEL: "this channel", Scope.WORKSPACE: "this workspace"}[self]


def parse_enum(enum: type[E], value: str, what: str) -> E:
    """``value`` as a member of ``enum``, or a ValueError naming ``what`` and the values allowed.

    Adapters call it on chat input (case and surrounding spaces ignored) and show the message as is.
    """
    cleaned = value.strip().lower()
    try:
        return enum(cleaned)
    except ValueError:
        allowed = ", ".join(member.value for member in enum)
        raise ValueError(f"unknown {what} {value.strip()!r}: use one of {allowed}") from None
