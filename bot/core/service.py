"""The use cases. Every public method is one service call an adapter makes for one user action.

Each call runs in its own unit of work (one transaction); game rules live here, invariants that must
hold under concurrency (one challenge per channel and day, at most N attempts) are also enforced by the
database's unique keys, and this module turns their conflicts into domain outcomes.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import random
from collections.abc import Callable, Sequence
from typing import Any

from bot.core import scoring
from bot.core.calendar import local_day
from bot.core.cards import (
    BadgeAward,
    ChallengeCard,
    DayPoints,
    DifficultyCard,
    Feedback,
    HintCard,
    InsightsCard,
    LeaderboardCard,
    MissedExplanation,
    PlayerChallengeSummary,
    ProblemCard,
    ProblemResult,
    ProblemSummary,
    ResultsCard,
    Reveal,
    StatsCard,
    StreakLine,
    TeamReportCard,
    TopicStat,
)
from bot.core.errors import (
    AlreadyTriedError,
    ChallengeClosedError,
    ConfigurationError,
    InvalidAnswerError,
    NoAttemptsLeftError,
    NotAdminError,
    NotFoundError,
    NotStartedError,
    ProblemOverError,
    TimeUpError,
    TooEarlyError,
)
from bot.core.insights import (
    CHAT_LINES,
    learn_from_close,
    tenant_difficulty,
    tenant_insights,
    with_learned_levels,
)
from bot.core.models import (
    Actor,
    Attempt,
    Challenge,
    ChannelRef,
    Outcome,
    PlayerRef,
    PlaySession,
    Problem,
    StandingRow,
    Tenant,
)
from bot.core.outbox import Delivery, Outbox, OutboxTiming, cause_of
from bot.core.ports import (
    AlreadyExistsError,
    AttemptConflictError,
    ChatPlatform,
    Clock,
    NoTelemetry,
    Telemetry,
    TransientConflictError,
    UnitOfWork,
)
from bot.core.repositories import AnswerWrite, CompletionRow, QuestionRow, SyncReport
from bot.core.standings import PeriodKey, ScopeKey, standing_keys
from bot.core.team_report import last_complete_week, team_report_card, team_report_title
from bot.core.tenancy import acting_tenant, sees
from bot.core.transactions import OwnTransactions, Transactions
from bot.core.vocabulary import MULTIPLE_CHOICE_KINDS, Period, Scope, parse_enum

log = logging.getLogger(__name__)

#: How many times a conflicting attempt insert is retried before reporting "no attempts left".
_ATTEMPT_RETRIES = 5
#: Closing a challenge again after the database aborted it to break a deadlock.
_CLOSE_RETRIES = 3
#: Streak lengths announced as milestones in the results post (7 and 30 are also badges).
STREAK_MILESTONES = frozenset({7, 30, 50, 100, 200, 365, 500, 1000})
#: At most this many streak lines in a results post (longest first).
RESULTS_STREAKS = 10
#: The stats chart (issue 30): points per day over the last 30 local days, and the streak calendar's
#: window, 35 days (five Monday-to-Sunday weeks end today at most 34 days after their first Monday).
STATS_CHART_DAYS = 30
STATS_CALENDAR_DAYS = 35


def _ended(challenge: Challenge, now: dt.datetime) -> bool:
    """Whether the challenge's window is over at ``now``: its stored end is the rule, whether or not the
    close job ran (a late or failing job must not let anyone score after the end).
    """
    return challenge.status != "open" or (challenge.closes_at is not None and now >= challenge.closes_at)


def _ended_text(challenge: Challenge) -> str:
    if challenge.status == "open" and challenge.closes_at is not None:
        return f"this challenge ended at {challenge.closes_at.astimezone(dt.UTC):%H:%M} UTC"
    return "this challenge is closed"


def _player_key(actor: Actor) -> tuple[str, str]:
    """What the start and answer jobs touch: one player (their jobs never run concurrently)."""
    return (actor.player.platform, actor.player.user_id)


def _not_posted(delivery: Delivery) -> str | None:
    """Why results are not in the channel after their first delivery (None: they are, or being posted)."""
    if delivery.status == "retrying":
        when = f" at {delivery.retry_at.astimezone(dt.UTC):%H:%M} UTC" if delivery.retry_at else ""
        return (
            f"{delivery.cause}. They are queued: RankZero tries again{when} and keeps trying (an admin "
            "channel, where one is set, hears of it and of a give-up; the bot's log always has it)"
        )
    if delivery.status == "gave_up":
        return (
            f"{delivery.cause}. RankZero gave up posting them (an admin channel, where one is set, hears of "
            "it; the bot's log always has it)"
        )
    return None


def _award(code: str) -> BadgeAward:
    info = scoring.BADGES[code]
    return BadgeAward(info.code, info.name, info.emoji, info.description)


def _deadline(challenge: Challenge, problem: Problem, now: dt.datetime) -> dt.datetime:
    """When a problem started at ``now`` times out: its time limit, but never after the challenge's end
    (no answer counts after the end).
    """
    deadline = now + dt.timedelta(seconds=problem.question.time_limit_s)
    return deadline if challenge.closes_at is None else min(deadline, challenge.closes_at)


def _card(
    challenge: Challenge,
    problem: Problem,
    started_at: dt.datetime,
    deadline: dt.datetime,
    attempts: Sequence[Attempt],
    *,
    hint_used: bool,
    over: bool,
) -> ProblemCard:
    """What a player sees of ``problem`` after ``attempts``: the one builder of every problem card."""
    q = problem.question
    return ProblemCard(
        challenge_id=challenge.id,
        problem_id=problem.id,
        position=problem.position,
        total=challenge.problem_count,
        kind=q.kind,
        topic=q.topic,
        difficulty=q.difficulty,
        prompt=q.prompt,
        code=q.code,
        choices=tuple((c.letter, c.text) for c in q.choices),
        attempts_left=max(0, q.attempts - len(attempts)),
        attempts_total=q.attempts,
        started_at=started_at,
        deadline=deadline,
        has_hint=bool(q.hint),
        hint=q.hint if hint_used else None,
        wrong_letters=tuple(a.letter for a in attempts if not a.correct),
        over=over,
    )


class QuizService:
    """RankZero's use cases over a unit-of-work factory, a clock and (optionally) a chat platform."""

    def __init__(
        self,
        uow_factory: Callable[[], UnitOfWork],
        clock: Clock,
        platform: ChatPlatform | None = None,
        *,
        problems_per_challenge: int = 5,
        learned_difficulty_min_attempts: int = 20,
        seed: int | None = None,
        transactions: Transactions | None = None,
        telemetry: Telemetry | None = None,
        outbox: OutboxTiming | None = None,
    ) -> None:
        """``transactions`` runs the start and answer paths (default: a transaction each; the app passes
        a ``GroupCommit`` so that players clicking together share transactions). ``telemetry``: where
        recorded answers are counted (the process's metrics; default nowhere). ``outbox``: the lease,
        backoff and give-up times of the posts' outbox (bot/core/outbox.py).
        ``learned_difficulty_min_attempts``: a team's first attempts on a question before its learned
        difficulty replaces the label in the daily ramp and is compared with it (bot/core/insights.py).
        """
        if problems_per_challenge < 1:
            raise ConfigurationError("problems per challenge must be at least 1")
        self._uow = uow_factory
        self._tx: Transactions = transactions or OwnTransactions(uow_factory)
        self._clock = clock
        self._platform = platform
        self._n = problems_per_challenge
        self._learned_min = max(1, learned_difficulty_min_attempts)
        self._seed = seed
        self._telemetry: Telemetry = telemetry or NoTelemetry()
        #: Every post to the platform goes through it (queued with its cause, marked sent when accepted).
        self.outbox = Outbox(
            uow_factory,
            clock,
            platform,
            results=self._results,
            challenge_card=self.challenge_card,
            timing=outbox or OutboxTiming(),
        )

    # ------------------------------------------------------------------ challenges
    async def open_challenge(
        self,
        channel: ChannelRef,
        day: dt.date | None = None,
        *,
        closes_at: dt.datetime | None = None,
        problems: int | None = None,
        time_limit_s: int | None = None,
        attempts: int | None = None,
        queue_post: bool = False,
    ) -> tuple[Challenge, bool]:
        """Get or create a channel's challenge for ``day`` (default: today in the channel's timezone).

        Returns (challenge, created). Unique per (channel, day): concurrent callers get the same one.
        A schedule passes its window end, problem count and time limit / attempts overrides.
        ``queue_post``: a created challenge's post is queued in the outbox in the same transaction, so a
        crash right after leaves it to be posted, never lost.
        """
        now = self._clock.now()
        day = day or local_day(now, channel.timezone)

        async def find(uow: UnitOfWork) -> Challenge | None:
            return await uow.challenges.find_challenge(channel, day)

        # Every player's first click reads the day's challenge: one lookup, grouped with the start and
        # answer calls of the moment when it exists.
        existing = await self._tx.run(find, (channel.platform, channel.workspace_id, channel.channel_id))
        if existing is not None:
            return existing, False
        async with self._uow() as uow:
            channel_pk = await uow.players.ensure_channel(channel)
            existing = await uow.challenges.get_challenge(channel_pk, day)
            if existing is not None:  # created since the lookup above
                return existing, False
            candidates = await uow.questions.question_candidates(
                channel.tenant, channel_pk, MULTIPLE_CHOICE_KINDS
            )
            # The ramp places each question by what this team found, once it answered it often enough.
            learned = await uow.difficulty.learned(channel.tenant, self._learned_min)
            candidates = with_learned_levels(
                candidates, {r.question_id: r.estimate for r in learned}, self._learned_min
            )
            if not candidates:
                raise NotFoundError(
                    "the question bank is empty: import questions first "
                    "(rankzero questions import questions/)"
                )
            rng = random.Random(f"{self._seed}:{channel_pk}:{day.isoformat()}")
            picks = scoring.pick_problems(candidates, problems or self._n, rng, day)
            title = f"Multi-GPU challenge · {day.isoformat()}"
            try:
                challenge = await uow.challenges.create_challenge(
                    channel_pk,
                    day,
                    title,
                    [p.version_id for p in picks],
                    now,
                    closes_at,
                    time_limit_s=time_limit_s,
                    attempts=attempts,
                )
            except AlreadyExistsError:
                challenge = None
            if challenge is not None and queue_post:
                await self.outbox.queue(uow, challenge, "challenge")
        if challenge is None:
            # Another process created it between our read and insert: read theirs.
            async with self._uow() as uow:
                channel_pk = await uow.players.ensure_channel(channel)
                found = await uow.challenges.get_challenge(channel_pk, day)
            if found is None:  # pragma: no cover - unique key guarantees it exists
                raise NotFoundError("challenge vanished after a concurrent create")
            return found, False
        log.info("created challenge %s for %s on %s", challenge.id, channel.channel_id, day)
        return challenge, True

    async def post_daily(
        self,
        channel: ChannelRef,
        day: dt.date | None = None,
        *,
        closes_at: dt.datetime | None = None,
        problems: int | None = None,
        time_limit_s: int | None = None,
        attempts: int | None = None,
    ) -> ChallengeCard:
        """Create the day's challenge (once) and post it: created and queued in the outbox in one
        transaction, then delivered. A challenge that exists unposted (refused before, but played, so not
        removed; created before the outbox) is delivered now too; the outbox row is the claim, so two
        callers at once post it once.

        A refusal propagates (the admins were told by the platform) after the challenge is removed when
        nobody saw nor played it, so the next post (a retried job, the admin's post-now once the bot may
        post) creates and posts it again; a challenge that stays is retried by the outbox.
        """
        challenge, created = await self.open_challenge(
            channel,
            day,
            closes_at=closes_at,
            problems=problems,
            time_limit_s=time_limit_s,
            attempts=attempts,
            queue_post=self._platform is not None,
        )
        card = self.challenge_card(challenge)
        unposted = challenge.message_ref is None and challenge.status == "open"
        if self._platform is not None and (created or unposted):
            async with self._uow() as uow:
                item_id = await self.outbox.queue(uow, challenge, "challenge")
            if item_id is None:  # pragma: no cover - queue answers an id whenever there is a platform
                return card
            try:
                await self.outbox.deliver(item_id, now_due=not created, reraise=True)
            except Exception:
                async with self._uow() as uow:
                    removed = await uow.challenges.delete_unposted_challenge(challenge.id)
                log.warning("posting challenge %s failed; removed unposted: %s", challenge.id, removed)
                raise
        return card

    @staticmethod
    def challenge_card(challenge: Challenge) -> ChallengeCard:
        """The public card of a challenge (no answers)."""
        return ChallengeCard(
            challenge_id=challenge.id,
            title=challenge.title,
            day=challenge.day,
            status=challenge.status,
            closes_at=challenge.closes_at,
            problems=tuple(
                ProblemSummary(p.id, p.position, p.question.kind, p.question.topic, p.question.difficulty)
                for p in challenge.problems
            ),
        )

    async def close_tenant_challenge(self, actor: Actor, challenge_id: int) -> ResultsCard | None:
        """Close the challenge an admin named by id, if it is their tenant's (any, for the operator);
        another tenant's reads exactly as a missing one. None: it was already closed.
        """
        self._require_admin(actor)
        view = acting_tenant(actor)
        async with self._uow() as uow:
            challenge = await uow.challenges.tenant_challenge(view, challenge_id)
        if challenge is None:
            raise NotFoundError(f"no challenge with id {challenge_id}")
        return await self.close_challenge(challenge.id)

    async def get_challenge(self, challenge_id: int) -> Challenge:
        """A challenge by id, or NotFoundError."""
        async with self._uow() as uow:
            challenge = await uow.challenges.get_challenge_by_id(challenge_id)
        if challenge is None:
            raise NotFoundError(f"no challenge with id {challenge_id}")
        return challenge

    async def find_challenge(self, channel: ChannelRef, day: dt.date | None = None) -> ChallengeCard | None:
        """The channel's challenge of ``day`` (default: today in its timezone) if one exists; never
        creates one (only a post does, so that every challenge is posted and gets its window).
        """
        async with self._uow() as uow:
            channel_pk = await uow.players.ensure_channel(channel)
            if day is None:
                # "Today" in the schedule's timezone when there is one: that is the day posts are made on.
                schedule = await uow.schedules.get_schedule(channel_pk)
                tz = schedule.config.timezone if schedule is not None else channel.timezone
                day = local_day(self._clock.now(), tz)
            found = await uow.challenges.get_challenge(channel_pk, day)
        return self.challenge_card(found) if found is not None else None

    async def close_open_challenge(
        self, channel: ChannelRef, challenge_id: int | None = None
    ) -> ResultsCard | None:
        """Close a challenge of ``channel`` now: ``challenge_id``, or else the channel's latest one.

        Never creates a challenge. NotFoundError when there is nothing open to close (no challenge, the
        latest one already closed, or an id of another channel); None when a concurrent close won.
        """
        async with self._uow() as uow:
            channel_pk = await uow.players.ensure_channel(channel)
            if challenge_id is None:
                challenge = await uow.challenges.latest_challenge(channel_pk)
                if challenge is None:
                    raise NotFoundError("this channel has no challenge to close")
                if challenge.status != "open":
                    raise NotFoundError(
                        f"this channel has no open challenge: its latest one (id {challenge.id}) is already "
                        "closed; give an id to close an older one"
                    )
            else:
                challenge = await uow.challenges.get_challenge_by_id(challenge_id)
                if challenge is None or challenge.channel_pk != channel_pk:
                    raise NotFoundError(f"no challenge with id {challenge_id} in this channel")
                if challenge.status != "open":
                    raise NotFoundError(f"challenge {challenge_id} is already closed")
        return await self.close_challenge(challenge.id)

    # ------------------------------------------------------------------ playing
    async def _problem(self, uow: UnitOfWork, problem_id: int) -> tuple[Challenge, Problem]:
        # Problems are read through their challenge so every check sees the challenge's status.
        challenge_id = await uow.challenges.challenge_id_of_problem(problem_id)
        challenge = (
            await uow.challenges.get_challenge_by_id(challenge_id) if challenge_id is not None else None
        )
        if challenge is None:
            raise NotFoundError(f"no problem with id {problem_id}")
        return challenge, next(p for p in challenge.problems if p.id == problem_id)

    def _problem_card(self, challenge: Challenge, problem: Problem, session: PlaySession) -> ProblemCard:
        over = session.finished or self._clock.now() >= session.deadline
        return _card(
            challenge,
            problem,
            session.started_at,
            session.deadline,
            session.attempts,
            hint_used=session.hint_used,
            over=over,
        )

    async def next_problem(self, actor: Actor, challenge_id: int) -> Problem | None:
        """The first problem of the challenge that is not over for this player (None when all are)."""
        now = self._clock.now()
        async with self._uow() as uow:
            player_pk = await uow.players.ensure_player(actor.player)
            challenge = await uow.challenges.get_challenge_by_id(challenge_id)
            if challenge is None:
                raise NotFoundError(f"no challenge with id {challenge_id}")
            sessions = {
                s.problem_id: s for s in await uow.plays.sessions_in_challenge(challenge_id, player_pk)
            }
            # A problem left running past its deadline (the player quit) is over: record the time-out
            # now, so completion and streaks do not wait for the challenge to close.
            for running in sessions.values():
                if not running.finished and now >= running.deadline:
                    await self._finish_timeout(uow, challenge, running)
        for problem in challenge.problems:
            s = sessions.get(problem.id)
            if s is None or (not s.finished and now < s.deadline):
                return problem
        return None

    async def start_problem(self, actor: Actor, problem_id: int) -> ProblemCard:
        """Start (or resume) a problem: the deadline is stored now and never moves."""
        now = self._clock.now()

        async def job(uow: UnitOfWork) -> ProblemCard:
            ctx = await uow.plays.play_context(problem_id, actor.player)
            if ctx is None:
                raise NotFoundError(f"no problem with id {problem_id}")
            challenge, problem, session = ctx.challenge, ctx.problem, ctx.session
            if _ended(challenge, now):
                raise ChallengeClosedError(f"{_ended_text(challenge)}: wait for the next one or try `quiz`")
            if session is None:
                player_pk = ctx.player_pk
                if player_pk is None:
                    player_pk = await uow.players.ensure_player(actor.player, likely_new=True)
                deadline = _deadline(challenge, problem, now)
                session = await uow.plays.create_session(problem_id, player_pk, now, deadline)
            if not session.finished and now >= session.deadline:
                await self._finish_timeout(uow, challenge, session)
                session = await uow.plays.get_session(problem_id, session.player_pk) or session
            return self._problem_card(challenge, problem, session)

        return await self._tx.run(job, _player_key(actor))

    async def preview_next(self, actor: Actor, challenge_id: int) -> ProblemCard | None:
        """The player's next problem (see :meth:`next_problem`) as :meth:`start_problem` would show it now,
        storing nothing but overdue time-outs: an adapter shows it first and starts the clock only once
        the player can see it. A problem already running: its real card. None when every one is over.
        One transaction (a rush of Starts costs this and the grouped start, nothing more).
        """
        now = self._clock.now()

        async def job(uow: UnitOfWork) -> tuple[Challenge, dict[int, PlaySession]]:
            player_pk = await uow.players.ensure_player(actor.player)
            challenge = await uow.challenges.get_challenge_by_id(challenge_id)
            if challenge is None:
                raise NotFoundError(f"no challenge with id {challenge_id}")
            sessions = {
                s.problem_id: s for s in await uow.plays.sessions_in_challenge(challenge_id, player_pk)
            }
            for running in sessions.values():
                if not running.finished and now >= running.deadline:
                    await self._finish_timeout(uow, challenge, running)
            return challenge, sessions

        # Through the start path's transactions: in a rush, players pressing Start together share them.
        challenge, sessions = await self._tx.run(job, _player_key(actor))
        for problem in challenge.problems:
            s = sessions.get(problem.id)
            if s is not None and not s.finished and now < s.deadline:
                return self._problem_card(challenge, problem, s)
            if s is None:
                if _ended(challenge, now):
                    raise ChallengeClosedError(
                        f"{_ended_text(challenge)}: wait for the next one or try `quiz`"
                    )
                return self._unstarted_card(challenge, problem, now)
        return None

    def _unstarted_card(self, challenge: Challenge, problem: Problem, now: dt.datetime) -> ProblemCard:
        """A problem as it will look when started at ``now`` (nothing stored)."""
        return _card(
            challenge, problem, now, _deadline(challenge, problem, now), (), hint_used=False, over=False
        )

    async def view_problem(self, actor: Actor, problem_id: int) -> ProblemCard:
        """The player's current view of a started problem."""
        async with self._uow() as uow:
            challenge, problem = await self._problem(uow, problem_id)
            player_pk = await uow.players.ensure_player(actor.player)
            session = await uow.plays.get_session(problem_id, player_pk)
        if session is None:
            raise NotStartedError("press Start first: the problem has not been started")
        return self._problem_card(challenge, problem, session)

    async def missed_explanation(self, actor: Actor, problem_id: int) -> MissedExplanation:
        """The explanation of a problem of ``actor``'s tenant (the team report's "Explanation" button).

        Problem ids are sequential and printed in button ids: a problem of another tenant is refused with
        the same words as a missing one, and one of a challenge still open is refused (its explanation
        would give the answer away to whoever has not played it yet).
        """
        async with self._uow() as uow:
            challenge, problem = await self._problem(uow, problem_id)
        if not sees(actor, challenge.channel.tenant):  # a DM (no tenant) sees none
            raise NotFoundError(f"no problem with id {problem_id}")
        if challenge.status == "open":
            raise TooEarlyError(
                "that problem's challenge is still open: its explanation comes once it closes"
            )
        question = problem.question
        text = question.explanation or "This question has no explanation."
        return MissedExplanation(problem_id, question.id, question.topic, text)

    async def schedule_timezone(self, channel: ChannelRef) -> str:
        """The timezone ``channel``'s days and weeks are counted in: its schedule's when it has one (the
        one its posts are made in, as find_challenge's "today"), else ``channel.timezone``.
        """
        async with self._uow() as uow:
            return await self._schedule_timezone(uow, channel, await uow.players.ensure_channel(channel))

    @staticmethod
    async def _schedule_timezone(uow: UnitOfWork, channel: ChannelRef, channel_pk: int) -> str:
        schedule = await uow.schedules.get_schedule(channel_pk)
        return schedule.config.timezone if schedule is not None else channel.timezone

    async def last_week_report(self, channel: ChannelRef) -> TeamReportCard:
        """The team report of ``channel``'s last complete week (Monday to Sunday before this one, in the
        schedule's timezone, else the channel's), from the data as it stands: the read-only web page's
        (bot/adapters/web). The same week the weekly post made today would report (last_complete_week).
        """
        async with self._uow() as uow:
            channel_pk = await uow.players.ensure_channel(channel)
            # The schedule's timezone, not the bot default's: a UTC+14 channel's Monday morning is still
            # Sunday in UTC, and the page would show the week before the one its chat report covered.
            tz = await self._schedule_timezone(uow, channel, channel_pk)
            day = last_complete_week(local_day(self._clock.now(), tz))
            payload = {"title": team_report_title(day), "day": day.isoformat()}
            return await team_report_card(uow, channel.tenant, channel_pk, payload)

    async def hint(self, actor: Actor, problem_id: int) -> HintCard:
        """Show the hint (once charged, later views are free)."""
        now = self._clock.now()
        async with self._uow() as uow:
            challenge, problem = await self._problem(uow, problem_id)
            player_pk = await uow.players.ensure_player(actor.player)
            session = await uow.plays.get_session(problem_id, player_pk)
            if session is None:
                raise NotStartedError("start the problem before asking for its hint")
            if not problem.question.hint:
                raise NotFoundError("this problem has no hint")
            if session.outcome == "timeout" or (not session.finished and now >= session.deadline):
                await self._finish_timeout(uow, challenge, session)
                await uow.commit()
                raise TimeUpError("time is up for this problem: no hint needed any more")
            if not session.finished:
                await uow.plays.mark_hint(session.id, now)
        return HintCard(problem_id, problem.question.hint, scoring.hint_cost(problem.question.difficulty))

    async def answer(
        self, actor: Actor, problem_id: int, letter: str, idempotency_key: str | None = None
    ) -> Feedback:
        """Answer a problem. Refused after the stored deadline, after the last attempt, or when over.

        A redelivered interaction (same idempotency key) is a no-op that returns the current state.
        Concurrent clicks race on the (session, attempt_no) unique key; losers retry with the next
        number, so at most ``attempts`` are ever stored and no database error reaches the player.
        """
        letter = letter.strip().upper()
        for _ in range(_ATTEMPT_RETRIES):
            try:
                return await self._answer_once(actor, problem_id, letter, idempotency_key)
            except AttemptConflictError:
                # Someone else took that attempt number (or this key) first; re-read and try again.
                if idempotency_key is not None:
                    return await self._replay(actor, problem_id)
        raise NoAttemptsLeftError("no attempts left for this problem")

    async def _replay(self, actor: Actor, problem_id: int, uow: UnitOfWork | None = None) -> Feedback:
        """The current state of a problem for a redelivered answer (changes nothing)."""
        if uow is None:
            async with self._uow() as fresh:
                return await self._replay(actor, problem_id, fresh)
        _, problem = await self._problem(uow, problem_id)
        session = await uow.plays.get_session(problem_id, await uow.players.ensure_player(actor.player))
        if session is None:
            raise NotStartedError("start the problem before answering it")
        return self._feedback(problem, session, duplicate=True)

    async def _answer_once(
        self, actor: Actor, problem_id: int, letter: str, idempotency_key: str | None
    ) -> Feedback:
        now = self._clock.now()

        async def job(uow: UnitOfWork) -> Feedback | None:
            ctx = await uow.plays.play_context(problem_id, actor.player, idempotency_key, for_answer=True)
            if ctx is None:
                raise NotFoundError(f"no problem with id {problem_id}")
            challenge, problem, session = ctx.challenge, ctx.problem, ctx.session
            if ctx.key_seen and session is not None:
                return self._feedback(problem, session, duplicate=True)
            q = problem.question
            if q.choice(letter) is None:
                letters = ", ".join(c.letter for c in q.choices)
                raise InvalidAnswerError(f"{letter!r} is not a choice of this problem: pick one of {letters}")
            if session is None:
                raise NotStartedError("start the problem before answering it")
            if session.finished:
                if session.outcome == "timeout":
                    raise TimeUpError("time is up for this problem: your answer was not counted")
                raise ProblemOverError("this problem is already over for you")
            if now >= session.deadline:
                # Record the time-out (committed with the job), then refuse the answer below.
                await self._finish_timeout(uow, challenge, session)
                return None
            if _ended(challenge, now):
                # Started before the end (a session from before this rule may run past it): the closing
                # time still wins; the close job ends the session when it runs.
                raise ChallengeClosedError(f"{_ended_text(challenge)}: your answer was not counted")
            used = len(session.attempts)
            if used >= q.attempts:
                raise NoAttemptsLeftError("no attempts left for this problem")
            if any(a.letter == letter for a in session.attempts):
                # A double click (or a stale button) on a wrong letter: refused, so it costs no attempt.
                # Two clicks at once both pass this check, but only one gets the attempt number; the other
                # retries (AttemptConflictError) and is refused here on its re-read.
                left = q.attempts - used
                raise AlreadyTriedError(
                    f"you already tried {letter}: pick another answer "
                    f"({left} attempt{'s' if left > 1 else ''} left)"
                )
            attempt_no = used + 1
            correct = letter == q.correct_letter
            elapsed = now - session.started_at
            elapsed_ms = max(0, int(elapsed.total_seconds() * 1000))
            ends = correct or attempt_no >= q.attempts
            outcome: Outcome | None = ("correct" if correct else "wrong") if ends else None
            points = 0
            if ends:
                points = scoring.points_for(
                    difficulty=q.difficulty,
                    correct=correct,
                    attempt_no=attempt_no,
                    elapsed_s=elapsed.total_seconds(),
                    time_limit_s=q.time_limit_s,
                    hint_used=session.hint_used,
                )
            standings = None
            if correct:
                standings = standing_keys(challenge.channel_pk, challenge.channel, challenge.day)
            # All the answer's writes at once (one statement on PostgreSQL): attempt, end, standings.
            ended = await uow.plays.record_answer(
                AnswerWrite(
                    session.id,
                    session.player_pk,
                    q.version_id,
                    attempt_no,
                    letter,
                    correct,
                    now,
                    elapsed_ms,
                    idempotency_key,
                    outcome,
                    points,
                    standings,
                )
            )
            if not correct:
                # Review follows the player's gaps: the question's card joins their practice deck (once).
                await uow.practice.add_mistake_card(session.player_pk, q.id, now)
            session = dataclasses.replace(
                session, attempts=(*session.attempts, Attempt(attempt_no, letter, correct, now, elapsed_ms))
            )
            if outcome is not None:
                if not ended:
                    # Ended concurrently (the challenge closed): report what is stored.
                    stored = await uow.plays.get_session(problem_id, session.player_pk)
                    return self._feedback(problem, stored or session)
                session = dataclasses.replace(session, outcome=outcome, points=points, finished_at=now)
                await self._after_finish(uow, challenge, session.player_pk, ctx.finished)
            return self._feedback(problem, session)

        feedback = await self._tx.run(job, _player_key(actor))
        if feedback is None:
            raise TimeUpError("time is up for this problem: your answer was not counted")
        if not feedback.duplicate:
            # Counted once committed: a redelivery (same key) is answered from the stored state.
            self._telemetry.answer_recorded(actor.player.platform, feedback.correct)
        return feedback

    def _feedback(self, problem: Problem, session: PlaySession, *, duplicate: bool = False) -> Feedback:
        q = problem.question
        last = session.attempts[-1] if session.attempts else None
        over = session.finished
        if last is None:
            message = "time is up" if session.outcome == "timeout" else "no answer yet"
        elif last.correct:
            message = f"Correct! +{session.points} points"
        elif over:
            message = f"Wrong: the answer was {q.correct_letter}"
        else:
            left = q.attempts - len(session.attempts)
            message = f"Not quite: {left} attempt{'s' if left != 1 else ''} left"
        return Feedback(
            problem_id=problem.id,
            outcome=session.outcome,
            letter=last.letter if last else None,
            correct=bool(last and last.correct),
            attempts_left=max(0, q.attempts - len(session.attempts)),
            points=session.points,
            over=over,
            reveal=Reveal(q.correct_letter or "", q.explanation, q.choices) if over else None,
            duplicate=duplicate,
            message=message,
        )

    async def time_up(self, actor: Actor, problem_id: int) -> Feedback:
        """Called when a player's countdown ends: records the time-out (a no-op if already over)."""
        now = self._clock.now()
        async with self._uow() as uow:
            challenge, problem = await self._problem(uow, problem_id)
            player_pk = await uow.players.ensure_player(actor.player)
            session = await uow.plays.get_session(problem_id, player_pk)
            if session is None:
                raise NotStartedError("the problem was never started")
            if not session.finished:
                if now < session.deadline:
                    left = (session.deadline - now).total_seconds()
                    raise ProblemOverError(f"time is not up yet: {left:.0f} s left")
                await self._finish_timeout(uow, challenge, session)
                session = await uow.plays.get_session(problem_id, player_pk) or session
        return self._feedback(problem, session)

    async def _finish_timeout(self, uow: UnitOfWork, challenge: Challenge, session: PlaySession) -> None:
        if await uow.plays.finish_session(session.id, "timeout", 0, session.deadline):
            await self._after_finish(uow, challenge, session.player_pk)

    async def _after_finish(
        self, uow: UnitOfWork, challenge: Challenge, player_pk: int, finished_before: int | None = None
    ) -> list[str]:
        """When the player's last problem of a challenge ends: record completion, award badges.

        ``finished_before``: how many other problems were over when the caller read its context (the
        answer path has it from ``play_context``), which saves the count on every problem but the last.
        It can only undercount (another problem of the player's ending concurrently on PostgreSQL); such
        a completion is then recorded when the challenge closes (``close_challenge``).
        """
        if finished_before is not None:
            if finished_before + 1 < challenge.problem_count:
                return []
        elif await uow.plays.finished_count(challenge.id, player_pk) < challenge.problem_count:
            return []
        sessions = await uow.plays.sessions_in_challenge(challenge.id, player_pk)
        if len(sessions) < challenge.problem_count or not all(s.finished for s in sessions):
            return []
        correct = [s for s in sessions if s.outcome == "correct"]
        # A problem that timed out took its whole time limit.
        max_answer_s = max(
            (s.attempts[-1].elapsed_ms / 1000) if s.attempts else (s.deadline - s.started_at).total_seconds()
            for s in sessions
        )
        row = CompletionRow(
            day=challenge.day,
            problems=challenge.problem_count,
            correct=len(correct),
            hints_used=sum(1 for s in sessions if s.hint_used),
            max_answer_s=max_answer_s,
        )
        if not await uow.standings.record_completion(
            challenge, player_pk, row, sum(s.points for s in sessions)
        ):
            return []
        history = await uow.standings.completions(player_pk, challenge.channel_pk)
        perfect = [c.day for c in history if c.problems and c.correct == c.problems]
        outcome = scoring.ChallengeOutcome(
            row.day, row.problems, row.correct, row.hints_used, row.max_answer_s
        )
        awards = scoring.badges_earned(outcome, perfect, [c.day for c in history])
        return await uow.standings.award_badges(player_pk, challenge.id, awards, self._clock.now())

    async def summary(self, actor: Actor, challenge_id: int) -> PlayerChallengeSummary:
        """The player's score on a challenge, badges earned on it and current streak."""
        async with self._uow() as uow:
            player_pk = await uow.players.ensure_player(actor.player)
            challenge = await uow.challenges.get_challenge_by_id(challenge_id)
            if challenge is None:
                raise NotFoundError(f"no challenge with id {challenge_id}")
            sessions = await uow.plays.sessions_in_challenge(challenge_id, player_pk)
            badges = [b for p, b in await uow.standings.challenge_badges(challenge_id) if p == player_pk]
            history = await uow.standings.completions(player_pk, challenge.channel_pk)
        today = local_day(self._clock.now(), challenge.channel.timezone)
        return PlayerChallengeSummary(
            challenge_id=challenge_id,
            day=challenge.day,
            finished=sum(1 for s in sessions if s.finished),
            total=len(challenge.problems),
            correct=sum(1 for s in sessions if s.outcome == "correct"),
            points=sum(s.points for s in sessions),
            badges=tuple(_award(b) for b in badges),
            streak=scoring.current_streak([c.day for c in history], today),
        )

    # ------------------------------------------------------------------ closing and results
    async def close_challenge(self, challenge_id: int) -> ResultsCard | None:
        """Close a challenge once; the call that closes it gets (and posts) the results, others None.

        Closing ends every player's running problem in one transaction, which on PostgreSQL can deadlock
        with a group-committed batch of answers; the database then aborts one of them and this retries.
        """
        for attempt in range(_CLOSE_RETRIES):
            try:
                return await self._close_once(challenge_id)
            except TransientConflictError:
                if attempt == _CLOSE_RETRIES - 1:
                    raise
                log.warning("closing challenge %s hit a conflicting transaction; retrying", challenge_id)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _close_once(self, challenge_id: int) -> ResultsCard | None:
        now = self._clock.now()
        async with self._uow() as uow:
            challenge = await uow.challenges.get_challenge_by_id(challenge_id)
            if challenge is None:
                raise NotFoundError(f"no challenge with id {challenge_id}")
            if not await uow.challenges.close_challenge(challenge_id, now):
                return None
            # In the close's transaction, after its status guard: counted exactly once per challenge.
            await learn_from_close(uow, challenge, now)
            for _sid, player_pk in await uow.plays.expire_sessions(challenge_id, now):
                await self._after_finish(uow, challenge, player_pk)
            # Backstop: on PostgreSQL a player's last two problems ending concurrently can each see the
            # other still running, so neither records the completion; every session is over now.
            for player_pk in await uow.plays.players_missing_completion(
                challenge_id, challenge.problem_count
            ):
                await self._after_finish(uow, challenge, player_pk)
            card = await self._results(uow, challenge)
            notes = await uow.corrections.take_correction_notes(challenge.channel_pk, now)
            card = dataclasses.replace(card, notes=tuple(notes))
            # Queued with the close, in its transaction: if the post fails (or this process dies), the
            # outbox still has it, where a retried close would only find the challenge "already closed".
            item_id = await self.outbox.queue(uow, challenge, "results", {"notes": list(notes)})
        if item_id is None:
            return card
        try:
            delivery = await self.outbox.deliver(item_id)
        except Exception as exc:  # the database failed after the close: the outbox job retries it
            log.exception("delivering the results of challenge %s failed; the outbox retries", challenge_id)
            delivery = Delivery("retrying", cause_of(exc))
        return dataclasses.replace(card, not_posted=_not_posted(delivery))

    async def results(self, challenge_id: int) -> ResultsCard:
        """The results of a challenge as they stand (closed or not)."""
        async with self._uow() as uow:
            challenge = await uow.challenges.get_challenge_by_id(challenge_id)
            if challenge is None:
                raise NotFoundError(f"no challenge with id {challenge_id}")
            return await self._results(uow, challenge)

    async def _results(self, uow: UnitOfWork, challenge: Challenge) -> ResultsCard:
        tallies = {t.problem_id: t for t in await uow.plays.problem_tallies(challenge.id)}
        standings = await uow.standings.challenge_standings(challenge.id)
        names = {r.player_pk: r.display_name for r in standings}
        badges = []
        for player_pk, code in await uow.standings.challenge_badges(challenge.id):
            name = names.get(player_pk) or await uow.players.player_name(player_pk)
            badges.append((name, _award(code)))
        problems = []
        for p in challenge.problems:
            t = tallies.get(p.id)
            dist = {c.letter: (t.distribution.get(c.letter, 0) if t else 0) for c in p.question.choices}
            problems.append(
                ProblemResult(
                    p.position,
                    p.question.id,
                    p.question.topic,
                    p.question.correct_letter or "",
                    dist,
                    t.players if t else 0,
                    t.solved if t else 0,
                )
            )
        top = max((r.points for r in standings), default=0)
        # Everyone tied on the top score wins; nobody wins a day where nobody scored.
        winners = tuple(r for r in standings if top > 0 and r.points == top)
        return ResultsCard(
            challenge_id=challenge.id,
            title=challenge.title,
            day=challenge.day,
            problems=tuple(problems),
            winners=winners,
            badges=tuple(badges),
            players=len(standings),
            streaks=await self._streaks(uow, challenge, standings),
        )

    async def _streaks(
        self, uow: UnitOfWork, challenge: Challenge, standings: Sequence[StandingRow]
    ) -> tuple[StreakLine, ...]:
        """The day's finishers on a streak of 2+ days in this channel, as of the challenge's day.

        From the completions the badges use, so the post agrees with the 7/30-day streak badges; one
        query for all the day's players.
        """
        completed = await uow.standings.completion_days(
            challenge.channel_pk, [row.player_pk for row in standings]
        )
        lines: list[StreakLine] = []
        for row in standings:
            days = completed[row.player_pk]
            if challenge.day not in days:
                continue  # played but did not finish every problem: no streak today
            length = scoring.current_streak(days, challenge.day)
            if length >= 2:
                lines.append(StreakLine(row.display_name, length, length in STREAK_MILESTONES))
        lines.sort(key=lambda line: (-line.days, line.display_name))
        return tuple(lines[:RESULTS_STREAKS])

    # ------------------------------------------------------------------ leaderboards and stats
    async def leaderboard(
        self,
        channel: ChannelRef,
        *,
        scope: Scope | str = Scope.CHANNEL,
        period: Period | str = Period.ALL,
        player: PlayerRef | None = None,
        limit: int = 10,
    ) -> LeaderboardCard:
        """Top ``limit`` players of a channel or its workspace for today, this week or all time.

        ``scope`` and ``period`` may be the enums' plain strings (what chat commands type).
        """
        try:
            scope = parse_enum(Scope, scope, "scope")
            period = parse_enum(Period, period, "period")
        except ValueError as exc:
            raise ConfigurationError(str(exc)) from None
        today = local_day(self._clock.now(), channel.timezone)
        period_key = PeriodKey.of(period, today)
        async with self._uow() as uow:
            channel_pk = await uow.players.ensure_channel(channel)
            player_pk = await uow.players.ensure_player(player) if player else None
            scope_key = ScopeKey.of(scope, channel_pk, channel)
            rows, me, total = await uow.standings.leaderboard(scope_key, period_key, limit, player_pk)
        when = f"{period.label} ({today.isoformat()})" if period is Period.TODAY else period.label
        title = f"Leaderboard · {scope.label} · {when}"
        return LeaderboardCard(scope, period, title, tuple(rows), me, total)

    async def stats(self, player: PlayerRef, channel: ChannelRef | None = None) -> StatsCard:
        """A player's record: points, accuracy by topic and kind, streaks, badges, in ``channel``'s tenant
        (without a channel: everywhere, for the console and tests).
        """
        now = self._clock.now()
        async with self._uow() as uow:
            player_pk = await uow.players.ensure_player(player)
            # The record in the channel's tenant only: another server's play is that server's business.
            tenant = channel.tenant if channel is not None else None
            history = await uow.standings.completions(player_pk, None, tenant)
            by_topic = await uow.standings.player_accuracy(player_pk, "topic", tenant)
            by_kind = await uow.standings.player_accuracy(player_pk, "kind", tenant)
            badges = await uow.standings.badge_counts(player_pk, tenant)
            name = await uow.players.player_name(player_pk)
            points = await uow.standings.player_points(player_pk, tenant)
            today = local_day(now, channel.timezone if channel else "UTC")
            chart_start = today - dt.timedelta(days=STATS_CHART_DAYS - 1)
            daily = await uow.standings.player_daily_points(player_pk, tenant, chart_start)
        days = [c.day for c in history]
        # The calendar's window: today and the days before it, back to the Monday 4 weeks before this week's.
        calendar_start = today - dt.timedelta(days=STATS_CALENDAR_DAYS - 1)
        return StatsCard(
            display_name=name,
            points=points,
            problems=sum(n for _, n, _ in by_topic),
            correct=sum(ok for _, _, ok in by_topic),
            challenges_completed=len(history),
            streak=scoring.current_streak(days, today),
            longest_streak=scoring.longest_streak(days),
            badges=tuple((_award(code), n) for code, n in sorted(badges.items()) if code in scoring.BADGES),
            by_topic=tuple(TopicStat(name, n, ok) for name, n, ok in by_topic),
            by_kind=tuple(TopicStat(name, n, ok) for name, n, ok in by_kind),
            daily_points=tuple(
                DayPoints(day, daily.get(day, 0))
                for day in (chart_start + dt.timedelta(days=i) for i in range(STATS_CHART_DAYS))
            ),
            played_days=tuple(sorted({d for d in days if calendar_start <= d <= today})),
            today=today,
        )

    # ------------------------------------------------------------------ admin
    @staticmethod
    def _require_admin(actor: Actor) -> None:
        if not actor.is_admin:
            raise NotAdminError("only admins can do that: ask a server/workspace admin")

    async def admin_import(self, actor: Actor, specs: Sequence[dict[str, Any]]) -> SyncReport:
        """Import validated question specs in one transaction (new versions for edited questions): a
        tenant admin's into their tenant's own questions, the operator's into the shared bank. A tenant's
        id used elsewhere refuses the whole import (QuestionBankError), nothing written; the operator's
        import is never refused for a tenant: a tenant's own question with that id is renamed (logged).
        """
        self._require_admin(actor)
        owner = acting_tenant(actor)
        async with self._uow() as uow:
            report = await uow.questions.sync_questions(owner, specs, self._clock.now())
        for tenant, old, new in report.moved_aside:
            # The operator's bank took an id a tenant's own question had: it now answers to a new id
            # there (its attempts, flags and corrections kept); its admins find it under that id.
            log.warning(
                "the shared bank now uses question id %r: tenant %s's own question %r is renamed %r",
                old,
                tenant,
                old,
                new,
            )
        return report

    async def admin_retire(self, actor: Actor, question_id: str) -> None:
        """Retire a question so it is no longer picked (history keeps it): for the admin's tenant only,
        or for everyone when the operator retires it.
        """
        self._require_admin(actor)
        view = acting_tenant(actor)
        async with self._uow() as uow:
            if not await uow.questions.retire_question(view, question_id, self._clock.now()):
                raise NotFoundError(f"no question with id {question_id!r}: see `rankzero questions list`")

    @staticmethod
    def _admin_tenant(actor: Actor, tenant: Tenant | None) -> Tenant:
        """The tenant an admin's report covers: their own (a tenant admin can name no other); the
        operator names one.
        """
        own = acting_tenant(actor)
        if own is not None:
            if tenant is not None and tenant != own:
                raise NotAdminError("a server or workspace admin sees their own team's answers only")
            return own
        if tenant is None:
            raise ConfigurationError("name the tenant (platform:workspace) whose answers to read")
        return tenant

    async def difficulty_report(
        self, actor: Actor, *, tenant: Tenant | None = None, limit: int = CHAT_LINES
    ) -> DifficultyCard:
        """Where the team's first attempts put a question under another label than the bank's (admins),
        the widest gap first.
        """
        self._require_admin(actor)
        view = self._admin_tenant(actor, tenant)
        async with self._uow() as uow:
            return await tenant_difficulty(uow, view, self._learned_min, limit)

    async def insights(self, actor: Actor, *, tenant: Tenant | None = None) -> InsightsCard:
        """The team's weakest topics lately, the quiz topic that targets them, the top disagreements."""
        self._require_admin(actor)
        view = self._admin_tenant(actor, tenant)
        async with self._uow() as uow:
            return await tenant_insights(uow, view, self._clock.now(), self._learned_min)

    async def list_questions(
        self, include_retired: bool = False, *, view: Tenant | None = None
    ) -> list[QuestionRow]:
        """The bank as ``view`` sees it (None: the operator's shared bank)."""
        async with self._uow() as uow:
            return await uow.questions.list_questions(view, include_retired)

    async def export_questions(
        self, include_retired: bool = False, *, view: Tenant | None = None
    ) -> list[dict[str, Any]]:
        """The latest version of every question ``view`` sees, as specs (round-trips through import)."""
        async with self._uow() as uow:
            return await uow.questions.latest_specs(view, include_retired)
