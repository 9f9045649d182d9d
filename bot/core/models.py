"""Frozen domain values passed between the service, the storage layer and the adapters."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

LETTERS = "ABCDEF"
Outcome = Literal["correct", "wrong", "timeout"]


@dataclass(frozen=True)
class PlayerRef:
    """Who is playing, as the platform knows them."""

    platform: str
    user_id: str
    display_name: str


@dataclass(frozen=True)
class ChannelRef:
    """Where a challenge is posted: a channel of a workspace (Discord guild / Slack team) of a platform."""

    platform: str
    workspace_id: str
    channel_id: str
    name: str | None = None
    timezone: str = "UTC"


class OpenWindow(NamedTuple):
    """An open challenge that has a closing time: what the scheduler arms a close job for."""

    challenge_id: int
    channel_pk: int
    closes_at: dt.datetime
    #: The challenge's channel: the scheduler closes only the windows of the channels its process serves.
    channel: ChannelRef


@dataclass(frozen=True)
class Actor:
    """A player acting, with the adapter's decision on whether they are an admin."""

    player: PlayerRef
    is_admin: bool = False


@dataclass(frozen=True)
class Choice:
    """One option of a multiple-choice question."""

    letter: str
    text: str
    correct: bool
    feedback: str | None = None


@dataclass(frozen=True)
class Question:
    """One version of a question, as it was asked."""

    version_id: int
    id: str
    version: int
    kind: str
    topic: str
    difficulty: str
    prompt: str
    code: str | None
    hint: str | None
    explanation: str | None
    time_limit_s: int
    attempts: int
    choices: tuple[Choice, ...]
    tags: tuple[str, ...] = ()
    runner: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def correct_letter(self) -> str | None:
        """Letter of the correct choice (None for flashcards and explain prompts)."""
        return next((c.letter for c in self.choices if c.correct), None)

    def choice(self, letter: str) -> Choice | None:
        """The choice with this letter, if the question has it."""
        return next((c for c in self.choices if c.letter == letter.upper()), None)


@dataclass(frozen=True)
class Problem:
    """A question placed at a position of a challenge."""

    id: int
    challenge_id: int
    position: int
    question: Question


@dataclass(frozen=True)
class Challenge:
    """The day's challenge of one channel."""

    id: int
    channel_pk: int
    channel: ChannelRef
    day: dt.date
    status: Literal["open", "closed"]
    title: str
    opened_at: dt.datetime
    closes_at: dt.datetime | None
    problems: tuple[Problem, ...]
    message_ref: str | None = None
    #: Number of problems when ``problems`` was not loaded (a single-problem play context).
    size: int = 0

    @property
    def problem_count(self) -> int:
        """How many problems the challenge has, whether or not they were all loaded."""
        return self.size or len(self.problems)


@dataclass(frozen=True)
class Attempt:
    """One answer a player gave to a problem."""

    attempt_no: int
    letter: str
    correct: bool
    answered_at: dt.datetime
    elapsed_ms: int


@dataclass(frozen=True)
class PlaySession:
    """A player's play of one problem: when it started, its deadline, and how it went so far."""

    id: int
    problem_id: int
    player_pk: int
    started_at: dt.datetime
    deadline: dt.datetime
    hint_used: bool
    finished_at: dt.datetime | None
    outcome: Outcome | None
    points: int
    attempts: tuple[Attempt, ...]

    @property
    def finished(self) -> bool:
        """True once the problem ended for this player."""
        return self.outcome is not None


@dataclass(frozen=True)
class QuestionCandidate:
    """What the challenge picker needs to know about a question."""

    version_id: int
    question_id: str
    topic: str
    difficulty: str
    kind: str
    uses: int
    #: The last day this question was asked in the channel (None: never).
    last_used: dt.date | None = None

    @property
    def family(self) -> str:
        """The question's family: instances ``family-id/param=value,...`` share one; a base question is
        its own family of one.
        """
        return self.question_id.split("/", 1)[0]


@dataclass(frozen=True)
class StandingRow:
    """One line of a leaderboard."""

    rank: int
    player_pk: int
    display_name: str
    points: int
    correct: int
    answer_ms: int


@dataclass(frozen=True)
class PlayContext:
    """What the start and answer paths need about one problem and one player, read in one query.

    ``challenge.problems`` is empty here (only ``problem`` is loaded); use ``challenge.problem_count``.
    """

    challenge: Challenge
    problem: Problem
    player_pk: int | None
    session: PlaySession | None
    key_seen: bool = False
    #: how many of the challenge's problems were already over for the player when this was read
    finished: int = 0
