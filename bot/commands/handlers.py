"""The commands every platform offers, as calls that take typed arguments and return cards.

An adapter builds the :class:`~bot.core.models.Actor` (with :class:`~bot.commands.admin.AdminPolicy`) and
the :class:`~bot.core.models.ChannelRef`, parses what was typed with :mod:`bot.commands.parsing` (or gets
typed options from the platform), calls one method here and renders the result. Admin commands are
refused here first, with the platform's own words; the services check again.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from bot.commands.admin import AdminPolicy
from bot.commands.parsing import (
    MAX_PROBLEM_NUMBER,
    PROBLEM_FORMS,
    TODAY_PROBLEM,
    problem_reference,
    schedule_changes,
)
from bot.core.cards import (
    ChallengeCard,
    DifficultyCard,
    InsightsCard,
    LeaderboardCard,
    MissedExplanation,
    ResultsCard,
    StatsCard,
)
from bot.core.dispute_service import CorrectionCard, DisputeCard, DisputeService
from bot.core.errors import ConfigurationError, NotFoundError
from bot.core.models import Actor, Challenge, ChannelRef, PlayerRef
from bot.core.practice import PracticeService
from bot.core.practice_models import PracticeStatsCard
from bot.core.repositories import QuestionFlag, SyncReport
from bot.core.schedule import Schedule
from bot.core.schedule_service import ScheduleService, ScheduleView
from bot.core.service import QuizService
from bot.core.tenancy import acting_tenant
from bot.core.vocabulary import Period, Scope

#: An adapter's check that the bot may post in the channel (raises PostRefusedError saying what to grant).
PostCheck = Callable[[], Awaitable[None]]


@dataclass(frozen=True)
class NoChallenge:
    """There is no challenge in the channel today; when the next scheduled one is (None: no schedule)."""

    next_post: dt.datetime | None


@dataclass(frozen=True)
class Stats:
    """A player's competitive record and, apart from it, their practice figures (None: not wired)."""

    record: StatsCard
    practice: PracticeStatsCard | None


def problem_in(challenge: Challenge, reference: str) -> int:
    """The id of the problem ``reference`` names in ``challenge``: ``today:N`` (its position) or the id of
    the question it asks; NotFoundError listing what exists otherwise.
    """
    if (today := TODAY_PROBLEM.fullmatch(reference)) is not None:
        position = int(today.group(1))
        for problem in challenge.problems:
            if problem.position == position:
                return problem.id
        raise NotFoundError(f"today's challenge has problems 1 to {len(challenge.problems)}, not {position}")
    for problem in challenge.problems:
        if problem.question.id == reference:
            return problem.id
    listed = ", ".join(f"{p.position}: {p.question.id}" for p in challenge.problems)
    raise NotFoundError(
        f"no problem of today's challenge asks question {reference!r}; use today:N or one of ({listed})"
    )


class Commands:
    """The platform-neutral bodies of the chat commands."""

    def __init__(
        self,
        quiz: QuizService,
        schedules: ScheduleService,
        admins: AdminPolicy,
        *,
        disputes: DisputeService | None = None,
        practice: PracticeService | None = None,
    ) -> None:
        self.quiz = quiz
        self.schedules = schedules
        self.admins = admins
        self.disputes = disputes
        self.practice = practice

    # ------------------------------------------------------------------ players
    async def leaderboard(
        self, actor: Actor, channel: ChannelRef, scope: Scope, period: Period
    ) -> LeaderboardCard:
        """The channel's or workspace's top players for ``period``, with the asking player's rank."""
        return await self.quiz.leaderboard(channel, scope=scope, period=period, player=actor.player)

    async def stats(self, player: PlayerRef, channel: ChannelRef) -> Stats:
        """``player``'s record in ``channel``'s workspace, and their practice figures."""
        record = await self.quiz.stats(player, channel)
        practice = await self.practice.stats(player) if self.practice is not None else None
        return Stats(record, practice)

    async def missed_explanation(self, actor: Actor, problem_id: int) -> MissedExplanation:
        """The explanation behind a team report's "Explanation" button (the actor's tenant only).

        A click names whatever id its sender likes (up to 18 digits): one no problem can have (beyond the
        database's 32-bit ids) gets the same "not found" as a missing one, not a database error.
        """
        if not 0 < problem_id <= MAX_PROBLEM_NUMBER:
            raise NotFoundError(f"no problem with id {problem_id}")
        return await self.quiz.missed_explanation(actor, problem_id)

    async def challenge(self, channel: ChannelRef) -> ChallengeCard | NoChallenge:
        """Today's challenge of the channel (for a late joiner). Never creates one: only a post does,
        which also gives it its message and closing time.
        """
        card = await self.quiz.find_challenge(channel)
        if card is not None:
            return card
        view = await self.schedules.show_schedule(channel, upcoming=1)
        return NoChallenge(view.next_posts[0] if view is not None and view.next_posts else None)

    async def dispute(
        self, actor: Actor, channel: ChannelRef, reference: str | int, code: str | None = None
    ) -> DisputeCard:
        """Run a problem's code (or ``code``, a variant) on the runner; the service rate-limits runs per
        player and refuses a problem that is not over for the player yet.
        """
        if self.disputes is None:
            raise ConfigurationError("the runner is not configured on this bot (RANKZERO_RUNNER_URL)")
        problem_id = await self.resolve_problem(channel, str(reference))
        return await self.disputes.dispute(actor, problem_id, code)

    async def resolve_problem(self, channel: ChannelRef, reference: str) -> int:
        """The problem id ``reference`` names: its number, ``today:N`` (problem N of today's challenge in
        ``channel``) or a question id asked in today's challenge there. Whatever a platform let the user
        type comes here: a malformed reference is a ConfigurationError listing the forms, a number no
        problem can have a NotFoundError.
        """
        named = problem_reference(reference)
        if isinstance(named, int):
            if named > MAX_PROBLEM_NUMBER:
                raise NotFoundError(f"there is no problem {named}: use {PROBLEM_FORMS}")
            return named
        reference = named
        card = await self.quiz.find_challenge(channel)
        if card is None:
            raise NotFoundError(
                f"there is no challenge in this channel today, so {reference!r} names no problem: "
                "give the problem's number (shown when it ended)"
            )
        return problem_in(await self.quiz.get_challenge(card.challenge_id), reference)

    # ------------------------------------------------------------------ admins: schedules and posts
    async def schedule_set(
        self, actor: Actor, channel: ChannelRef, options: Mapping[str, Any], can_post: PostCheck
    ) -> Schedule:
        """Set the channel's schedule: admins only, and only where the bot can post (``can_post``)."""
        self.admins.require(actor)
        await can_post()
        return await self.schedules.set_schedule(actor, channel, **schedule_changes(options))

    async def schedule_show(self, channel: ChannelRef) -> ScheduleView | None:
        """The channel's schedule and next posts (None: it has none)."""
        return await self.schedules.show_schedule(channel)

    async def schedule_pause(self, actor: Actor, channel: ChannelRef, *, paused: bool) -> Schedule:
        """Pause or resume the channel's schedule (admins)."""
        self.admins.require(actor)
        return await self.schedules.pause_schedule(actor, channel, paused=paused)

    async def post_now(self, actor: Actor, channel: ChannelRef, can_post: PostCheck) -> ChallengeCard:
        """Post today's challenge here now, once per day and channel, with the channel's schedule
        settings (closing time, problems, overrides) when it has one.
        """
        self.admins.require(actor)
        await can_post()
        return await self.schedules.post_now(actor, channel)

    async def close_now(
        self, actor: Actor, channel: ChannelRef, challenge_id: int | None
    ) -> ResultsCard | None:
        """Close an open challenge of this channel (its latest one by default); None when a concurrent
        close won. NotFoundError when there is nothing open to close here.
        """
        self.admins.require(actor)
        return await self.quiz.close_open_challenge(channel, challenge_id)

    async def close_challenge(self, actor: Actor, challenge_id: int) -> ResultsCard | None:
        """Close the challenge ``challenge_id`` of the admin's tenant (a server's, in any of its
        channels); None: it was already closed. Another tenant's reads as a missing one.
        """
        self.admins.require(actor)
        return await self.quiz.close_tenant_challenge(actor, challenge_id)

    # ------------------------------------------------------------------ admins: the question bank
    async def import_questions(self, actor: Actor, specs: list[dict[str, Any]]) -> SyncReport:
        """Add or update valid question specs (a form's, a file's)."""
        self.admins.require(actor)
        return await self.quiz.admin_import(actor, specs)

    async def retire(self, actor: Actor, question_id: str) -> None:
        """Retire a question: it is not picked again; history keeps it."""
        self.admins.require(actor)
        await self.quiz.admin_retire(actor, question_id)

    async def preview(self, actor: Actor, question_id: str) -> dict[str, Any]:
        """A question's spec with its answer (retired ones too), as the admin's tenant sees it."""
        self.admins.require(actor)
        view = acting_tenant(actor)
        for spec in await self.quiz.export_questions(include_retired=True, view=view):
            if spec.get("id") == question_id:
                return spec
        raise NotFoundError(f"no question with id {question_id!r}")

    async def correct(self, actor: Actor, question_id: str, letter: str) -> CorrectionCard:
        """Make ``letter`` the official answer and re-score past attempts."""
        self.admins.require(actor)
        return await self._disputes().correct_answer(actor, question_id, letter)

    async def flags(self, actor: Actor, *, everything: bool) -> list[QuestionFlag]:
        """Questions a dispute contradicted: the open ones, or all."""
        self.admins.require(actor)
        return await self._disputes().flags(actor, None if everything else "open")

    # ------------------------------------------------------------------ admins: what the answers teach
    async def difficulty(self, actor: Actor) -> DifficultyCard:
        """The questions whose difficulty learned from the team's first attempts disagrees with their
        label, the widest gap first (the admin's tenant only).
        """
        self.admins.require(actor)
        return await self.quiz.difficulty_report(actor)

    async def insights(self, actor: Actor) -> InsightsCard:
        """The team's weakest topics lately, the practice quiz for them, the top disagreements."""
        self.admins.require(actor)
        return await self.quiz.insights(actor)

    def _disputes(self) -> DisputeService:
        if self.disputes is None:
            raise ConfigurationError("disputes are not set up on this bot")
        return self.disputes
