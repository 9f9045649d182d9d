"""Frozen domain values passed between the service, the storage layer and the adapters."""

from __future__ import annotations

import datetime as dt
import re
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


#: The longest player name kept (characters): Slack allows 80 for a display name, Discord 32; the
#: database column holds 200. Names are shown in leaderboards, results and streak lines.
MAX_PLAYER_NAME = 80
#: Characters a name may not contain: C0/C1 controls (ESC starts terminal commands, newlines forge lines
#: of a leaderboard), DEL, and the bidirectional overrides and isolates that reorder what is shown.
_NAME_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
#: Characters that show nothing: a name of only these (and spaces) reads as empty on every leaderboard.
_ZERO_WIDTH = re.compile("[\u00ad\u180e\u200b-\u200d\u2060-\u2064\ufeff]")


def player_name_problem(name: str) -> str | None:
    """Why ``name`` (as a player typed it) cannot be a player name, with how to fix it; None when it can.

    A name is checked after stripping surrounding whitespace: it must be non-empty, at most
    :data:`MAX_PLAYER_NAME` characters, and free of control and text-direction characters.
    """
    stripped = name.strip()
    if not stripped:
        return "a player name cannot be empty or only spaces; give a name, e.g. --player ada"
    if not _ZERO_WIDTH.sub("", stripped).strip():
        first = _ZERO_WIDTH.search(stripped)
        code = f" (U+{ord(first.group()):04X})" if first else ""
        return (
            f"a player name needs a visible character: this one has only zero-width characters{code}; "
            "give a name, e.g. --player ada"
        )
    if len(stripped) > MAX_PLAYER_NAME:
        return (
            f"a player name is at most {MAX_PLAYER_NAME} characters, this one has {len(stripped)}; "
            "use a shorter name"
        )
    if found := _NAME_CONTROL.search(stripped):
        return (
            f"a player name cannot contain control or text-direction characters (U+{ord(found.group()):04X} "
            f"at position {found.start() + 1}); use letters, digits, spaces and punctuation"
        )
    return None


def bounded_display_name(name: str, fallback: str) -> str:
    """A platform's name for a player, made safe to store and show: control and text-direction characters
    dropped, whitespace stripped, cut to :data:`MAX_PLAYER_NAME` characters; ``fallback`` (a user id) when
    nothing is left. Platforms are not refused: a player cannot fix a name their workspace gave them here.
    """
    cleaned = " ".join(_NAME_CONTROL.sub(" ", name).split())
    if not _ZERO_WIDTH.sub("", cleaned).strip():
        cleaned = ""  # only zero-width characters: nothing anyone could read; the fallback is shown
    if len(cleaned) > MAX_PLAYER_NAME:
        cleaned = cleaned[: MAX_PLAYER_NAME - 1].rstrip() + "…"
    return cleaned or fallback[:MAX_PLAYER_NAME]


@dataclass(frozen=True)
class ChannelRef:
    """Where a challenge is posted: a channel of a workspace (Discord guild / Slack team) of a platform."""

    platform: str
    workspace_id: str
    channel_id: str
    name: str | None = None
    timezone: str = "UTC"

    @property
    def tenant(self) -> Tenant:
        """The tenant this channel belongs to: its Discord server, Slack workspace or Grid org."""
        return Tenant(self.platform, self.workspace_id)


#: The longest tenant key stored (platform, a colon, a Grid-aware workspace key); see :class:`Tenant`.
MAX_TENANT_KEY = 140


@dataclass(frozen=True)
class Tenant:
    """One customer of a shared RankZero: a Discord server, a Slack workspace or Enterprise Grid org, or the
    console's local tenant. Its challenges, schedules, standings, question overlay, corrections, flags
    and disputes are its own; no other tenant reads or changes them.

    ``workspace_id`` is what ``ChannelRef.workspace_id`` holds on that platform (a guild id; a Slack team
    id, ``E.../T...`` for a team of a Grid org, or ``E...`` for an org-wide install).
    """

    platform: str
    workspace_id: str

    def __post_init__(self) -> None:
        if not self.platform or not self.workspace_id or ":" in self.platform:
            raise ValueError(f"not a tenant: platform {self.platform!r}, workspace {self.workspace_id!r}")
        if len(self.key) > MAX_TENANT_KEY:
            raise ValueError(f"tenant key longer than {MAX_TENANT_KEY} characters")

    @property
    def key(self) -> str:
        """The stored form, ``<platform>:<workspace id>`` (the platform never holds a colon)."""
        return f"{self.platform}:{self.workspace_id}"

    @classmethod
    def from_key(cls, key: str) -> Tenant:
        """The inverse of :attr:`key`; ValueError for anything else."""
        platform, sep, workspace = key.partition(":")
        if not sep:
            raise ValueError(f"not a tenant key (platform:workspace): {key!r}")
        return cls(platform, workspace)

    def __str__(self) -> str:
        return self.key


class OpenWindow(NamedTuple):
    """An open challenge that has a closing time: what the scheduler arms a close job for."""

    challenge_id: int
    channel_pk: int
    closes_at: dt.datetime
    #: The challenge's channel: the scheduler closes only the windows of the channels its process serves.
    channel: ChannelRef


@dataclass(frozen=True)
class Actor:
    """A player acting, with the adapter's decision on whether they are an admin.

    ``tenant`` is where they act (the server or workspace the command ran in): a tenant admin's changes to
    the question bank are that tenant's overlay. ``is_operator`` is the operator of the whole bot (the CLI):
    only the operator changes the shared bank every tenant plays.
    """

    player: PlayerRef
    is_admin: bool = False
    tenant: Tenant | None = None
    is_operator: bool = False


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
    #: What a player experiences answering it (:func:`bot.core.scoring.experience_of`); "" counts the
    #: question's family as one experience (a candidate built without one).
    experience: str = ""
    #: The reasoning style the daily mix rotates (:func:`bot.core.scoring.style_of`); "" is the kind.
    style: str = ""

    @property
    def experience_key(self) -> str:
        """The experience the picker rotates: the stored key, else the family."""
        return self.experience or self.family

    @property
    def style_key(self) -> str:
        """The style the daily mix balances: the stored one, else the kind."""
        return self.style or self.kind

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
