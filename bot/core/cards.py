"""What to show, as data. Renderers (console, Discord, Slack) turn these into their own markup."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from bot.core.models import Choice, Outcome, StandingRow
from bot.core.vocabulary import Period, Scope


@dataclass(frozen=True)
class ProblemSummary:
    """One problem as listed on a challenge post (no answers)."""

    problem_id: int
    position: int
    kind: str
    topic: str
    difficulty: str


@dataclass(frozen=True)
class ChallengeCard:
    """The daily post: title, date, window, problem list."""

    challenge_id: int
    title: str
    day: dt.date
    status: str
    closes_at: dt.datetime | None
    problems: tuple[ProblemSummary, ...]
    badge_name: str = "Multi-GPU Master"


@dataclass(frozen=True)
class ProblemCard:
    """A problem as a player sees it while playing."""

    challenge_id: int
    problem_id: int
    position: int
    total: int
    kind: str
    topic: str
    difficulty: str
    prompt: str
    code: str | None
    choices: tuple[tuple[str, str], ...]
    attempts_left: int
    attempts_total: int
    started_at: dt.datetime
    deadline: dt.datetime
    has_hint: bool
    hint: str | None
    wrong_letters: tuple[str, ...] = ()
    over: bool = False


@dataclass(frozen=True)
class Reveal:
    """What a player learns once a problem is over for them."""

    correct_letter: str
    explanation: str | None
    choices: tuple[Choice, ...]


@dataclass(frozen=True)
class Feedback:
    """The immediate answer to an answer (or to time running out)."""

    problem_id: int
    outcome: Outcome | None
    letter: str | None
    correct: bool
    attempts_left: int
    points: int
    over: bool
    reveal: Reveal | None
    duplicate: bool = False
    message: str = ""


@dataclass(frozen=True)
class HintCard:
    """A hint and what it costs."""

    problem_id: int
    hint: str
    cost: int


@dataclass(frozen=True)
class BadgeAward:
    """A badge a player earned."""

    code: str
    name: str
    emoji: str
    description: str


@dataclass(frozen=True)
class PlayerChallengeSummary:
    """A player's score on one challenge so far."""

    challenge_id: int
    day: dt.date
    finished: int
    total: int
    correct: int
    points: int
    badges: tuple[BadgeAward, ...]
    streak: int


@dataclass(frozen=True)
class ProblemResult:
    """One problem's line in the results post."""

    position: int
    question_id: str
    topic: str
    correct_letter: str
    distribution: dict[str, int]
    players: int
    solved: int


@dataclass(frozen=True)
class StreakLine:
    """A player who completed the day's challenge, with their streak in that channel as of that day."""

    display_name: str
    #: Consecutive days with a completed challenge, ending on the challenge's day.
    days: int
    #: True when ``days`` is a milestone (7, 30, 50, 100, ...): reached today.
    milestone: bool


@dataclass(frozen=True)
class ResultsCard:
    """The results post when a challenge closes."""

    challenge_id: int
    title: str
    day: dt.date
    problems: tuple[ProblemResult, ...]
    winners: tuple[StandingRow, ...]
    badges: tuple[tuple[str, BadgeAward], ...]
    players: int
    #: Answer corrections since this channel's last results post (see bot/core/dispute_service.py).
    notes: tuple[str, ...] = ()
    #: The day's finishers on a streak of 2+ days, longest first (milestones included, at most 10).
    streaks: tuple[StreakLine, ...] = ()
    #: Why the results are not in the channel yet (the outbox retries them; the admins are told); None:
    #: posted (or no platform to post on).
    not_posted: str | None = None


@dataclass(frozen=True)
class DeliveryNotice:
    """For the admins: a post the platform keeps refusing (told once per cause), or one given up on."""

    #: ``challenge``, ``reminder``, ``results``, ``summary``, ``team_report`` or ``notice``
    #: (bot/core/outbox.py).
    kind: str
    #: None for a weekly summary or team report (the channel's week, not one challenge).
    challenge_id: int | None
    title: str
    day: dt.date
    #: What the platform answered, in words (escaped where it is shown).
    cause: str
    #: When it is tried next; None: given up (nobody will try again).
    retry_at: dt.datetime | None
    tries: int

    @property
    def what(self) -> str:
        """The post in words: "the results of Multi-GPU challenge · 2026-11-25"."""
        noun = {
            "challenge": "the post",
            "reminder": "the closing reminder",
            "results": "the results",
            "summary": "the weekly summary",
            "team_report": "the weekly team report",
            "notice": "the admin notice of a flagged question",
        }.get(self.kind, self.kind)
        if self.challenge_id is None:
            return f"{noun} ({self.title})"
        return f"{noun} of {self.title} (challenge #{self.challenge_id})"

    def text(self) -> str:
        """The notice as plain sentences (each platform escapes and decorates it)."""
        head = f"RankZero could not post {self.what}: {self.cause}."
        if self.retry_at is None:
            return (
                f"{head} It gave up after {self.tries} tries: nobody will try again, so fix the cause and "
                "tell the channel yourself."
            )
        return (
            f"{head} It tries again at {self.retry_at.astimezone(dt.UTC):%H:%M} UTC and keeps trying "
            "(you are told again only if the cause changes, or when it gives up)."
        )


@dataclass(frozen=True)
class LeaderboardCard:
    """Top players of a scope and period, plus the caller's own line when outside the top."""

    scope: Scope
    period: Period
    title: str
    rows: tuple[StandingRow, ...]
    me: StandingRow | None
    total_players: int


@dataclass(frozen=True)
class TopicStat:
    """Accuracy on one topic or kind."""

    name: str
    answered: int
    correct: int

    @property
    def accuracy(self) -> float:
        """Share of problems solved, 0..1."""
        return self.correct / self.answered if self.answered else 0.0


@dataclass(frozen=True)
class StatsCard:
    """A player's record."""

    display_name: str
    points: int
    problems: int
    correct: int
    challenges_completed: int
    streak: int
    longest_streak: int
    badges: tuple[tuple[BadgeAward, int], ...]
    by_topic: tuple[TopicStat, ...]
    by_kind: tuple[TopicStat, ...] = field(default_factory=tuple)
    #: For the stats chart (issue 30): the player's points per local day over the last 30 days, oldest
    #: first, one entry per day (0 on days without points), in the card's tenant.
    daily_points: tuple[DayPoints, ...] = field(default_factory=tuple)
    #: Days with a completed challenge over the last 5 weeks (the streak calendar), and the local today.
    played_days: tuple[dt.date, ...] = field(default_factory=tuple)
    today: dt.date | None = None


@dataclass(frozen=True)
class DayPoints:
    """Points a player earned on one local day."""

    day: dt.date
    points: int


@dataclass(frozen=True)
class HeatCell:
    """A team's first attempts on one topic at one difficulty label over a week."""

    topic: str
    difficulty: str
    first_attempts: int
    first_correct: int


@dataclass(frozen=True)
class MissedQuestion:
    """One of the week's most-missed problems, its explanation one click away."""

    problem_id: int
    question_id: str
    topic: str
    first_attempts: int
    first_correct: int
    explanation: str


@dataclass(frozen=True)
class Mover:
    """A player whose standing moved most this week (``previous_rank`` None: new on the board)."""

    display_name: str
    points: int
    rank: int
    previous_rank: int | None

    @property
    def movement(self) -> str:
        """The move as shown beside the name: ``new``, ``▲2``, ``▼1`` or ``=``."""
        if self.previous_rank is None:
            return "new"
        delta = self.previous_rank - self.rank
        return f"▲{delta}" if delta > 0 else f"▼{-delta}" if delta < 0 else "="


@dataclass(frozen=True)
class MissedExplanation:
    """What the team report's "Explanation" button shows one player: a most-missed problem's explanation."""

    problem_id: int
    question_id: str
    topic: str
    explanation: str


@dataclass(frozen=True)
class TeamReportCard:
    """The weekly team report of a channel (opt-in): first-attempt accuracy by topic x difficulty, the three
    most-missed problems of the week, and the week's movers. ``week_start`` is the Monday of the week.
    """

    title: str
    week_start: dt.date
    cells: tuple[HeatCell, ...]
    missed: tuple[MissedQuestion, ...]
    movers: tuple[Mover, ...]


@dataclass(frozen=True)
class ReminderCard:
    """A nudge before a challenge's window closes."""

    challenge_id: int
    title: str
    day: dt.date
    closes_at: dt.datetime


@dataclass(frozen=True)
class PracticeNudgeCard:
    """The daily private reminder a player opted into: how many flashcards are due (UTC ``day``)."""

    display_name: str
    due: int
    day: dt.date


@dataclass(frozen=True)
class DifficultyLine:
    """A question whose difficulty a team's first attempts put under another label than the bank's."""

    question_id: str
    #: The bank's label (of the version last asked) and the label the learned rating maps to.
    label: str
    learned: str
    #: The learned difficulty on the logit scale (the labels' priors: -1.5, -0.5, 0.5, 1.5).
    rating: float
    first_attempts: int
    first_correct: int


@dataclass(frozen=True)
class DifficultyCard:
    """A tenant's questions where the label and the learned difficulty disagree, the widest gap first."""

    lines: tuple[DifficultyLine, ...]
    #: First attempts a question needs before it is compared (RANKZERO_LEARNED_DIFFICULTY_MIN_ATTEMPTS).
    min_attempts: int
    #: Questions with that many first attempts (compared), and how many disagree (``lines`` is the top).
    learned: int
    disagreeing: int


@dataclass(frozen=True)
class WeakTopic:
    """A topic's first attempts in the window and how many were right."""

    topic: str
    first_attempts: int
    first_correct: int

    @property
    def accuracy(self) -> float:
        """The share right at the first attempt."""
        return self.first_correct / self.first_attempts if self.first_attempts else 0.0


@dataclass(frozen=True)
class InsightsCard:
    """For a tenant's admins: the team's weakest topics over the last ``days`` days (topics with at least
    ``min_attempts`` first attempts, lowest accuracy first), the practice quiz topic that targets them
    (None: no topic has enough attempts yet) and the top label disagreements.
    """

    days: int
    min_attempts: int
    weakest: tuple[WeakTopic, ...]
    quiz_topic: str | None
    difficulty: DifficultyCard
