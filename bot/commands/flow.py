"""The private problem flow every platform shares: Start/Next, answer, hint, and time running out.

An adapter calls :class:`ProblemFlow` with the Actor, the ids from the clicked button and a *surface*: its
own handle on where the player's problem is shown (a Discord interaction to edit through, a Slack view
id). The flow makes the service calls, keeps one deadline timer per (player, problem) on the services'
clock, and when a problem's time runs out while it is still shown, hands the adapter the surface and
what to render. Game rules stay in the core: the flow only sequences calls and decides what is shown.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from bot.commands.timer import DeadlineTimers
from bot.core.cards import Feedback, HintCard, PlayerChallengeSummary, ProblemCard
from bot.core.errors import RankZeroError
from bot.core.models import Actor
from bot.core.ports import Clock
from bot.core.service import QuizService

log = logging.getLogger(__name__)

#: The adapter's handle on where a player's problem is shown.
S = TypeVar("S")


@dataclass(frozen=True)
class Shown:
    """What the player's surface shows after a click: a problem (with the answer's feedback or the hint)
    or, once every problem is over, the player's summary.
    """

    card: ProblemCard | None = None
    summary: PlayerChallengeSummary | None = None
    feedback: Feedback | None = None
    hint: HintCard | None = None


#: Renders a time-out on a surface that still shows the problem: (surface, problem, its feedback).
OnTimeUp = Callable[[S, ProblemCard, Feedback], Awaitable[None]]


class ProblemFlow(Generic[S]):
    """Start/Next, answer and hint for one platform, with the time-up timers of the problems shown.

    ``surface_id`` names a surface for the "still shown" check: a late timer never overwrites the next
    problem. Adapters whose surface has a stable id pass it (Slack's view id); by default it is the
    player's flow in that challenge.
    """

    def __init__(self, quiz: QuizService, clock: Clock, on_time_up: OnTimeUp[S]) -> None:
        self.quiz = quiz
        self.timers = DeadlineTimers(clock)
        self._on_time_up = on_time_up
        #: (user id, problem id) -> the latest surface the problem was shown on (edits go through it).
        self._surfaces: dict[tuple[str, int], S] = {}
        #: surface id -> the problem it shows now.
        self._showing: dict[str, int] = {}

    @property
    def clock(self) -> Clock:
        """The clock the deadlines are waited on."""
        return self.timers.clock

    @clock.setter
    def clock(self, clock: Clock) -> None:
        self.timers.clock = clock

    # ------------------------------------------------------------------ clicks
    async def next(self, actor: Actor, challenge_id: int, surface: S, surface_id: str | None = None) -> Shown:
        """Start (or resume) the player's first problem that is not over, or their summary when none is."""
        problem = await self.quiz.next_problem(actor, challenge_id)
        sid = surface_id or _flow_id(actor, challenge_id)
        if problem is None:
            self._showing.pop(sid, None)
            return Shown(summary=await self.quiz.summary(actor, challenge_id))
        card = await self.quiz.start_problem(actor, problem.id)
        self._show(actor, card, surface, sid)
        return Shown(card=card)

    async def next_shown(
        self,
        actor: Actor,
        challenge_id: int,
        surface: S,
        show: Callable[[Shown], Awaitable[bool]],
        surface_id: str | None = None,
    ) -> Shown:
        """Like :meth:`next`, but the player's clock starts only once ``show`` put the problem on their
        screen (it returns True when the platform accepted it): a problem waiting for a slow or busy
        platform costs the player none of its time. The deadline shown is computed just before showing,
        so the stored one (counted from when it was shown) is never earlier than what the player reads.
        When ``show`` returns False nothing is started: the next Start shows the problem afresh.
        """
        preview = await self.quiz.preview_next(actor, challenge_id)
        sid = surface_id or _flow_id(actor, challenge_id)
        if preview is None:
            self._showing.pop(sid, None)
            shown = Shown(summary=await self.quiz.summary(actor, challenge_id))
            await show(shown)
            return shown
        if not await show(Shown(card=preview)):
            return Shown(card=preview)
        card = await self.quiz.start_problem(actor, preview.problem_id)  # a resumed one keeps its deadline
        self._show(actor, card, surface, sid)
        return Shown(card=card)

    async def answer(
        self,
        actor: Actor,
        problem_id: int,
        letter: str,
        idempotency_key: str,
        surface: S,
        surface_id: str | None = None,
    ) -> Shown:
        """Answer with ``letter``; ``idempotency_key`` (one per delivered click) makes a redelivered click
        a no-op whose feedback says ``duplicate``.
        """
        feedback = await self.quiz.answer(actor, problem_id, letter, idempotency_key=idempotency_key)
        card = await self.quiz.view_problem(actor, problem_id)
        self._show(actor, card, surface, surface_id or _flow_id(actor, card.challenge_id))
        return Shown(card=card, feedback=feedback)

    async def hint(self, actor: Actor, problem_id: int, surface: S, surface_id: str | None = None) -> Shown:
        """Show the problem's hint (charged once)."""
        hint = await self.quiz.hint(actor, problem_id)
        card = await self.quiz.view_problem(actor, problem_id)
        self._show(actor, card, surface, surface_id or _flow_id(actor, card.challenge_id))
        return Shown(card=card, hint=hint)

    async def view(self, actor: Actor, problem_id: int) -> ProblemCard:
        """The problem as the player sees it now (to show a refusal next to it)."""
        return await self.quiz.view_problem(actor, problem_id)

    # ------------------------------------------------------------------ timers
    def _show(self, actor: Actor, card: ProblemCard, surface: S, surface_id: str) -> None:
        key = (actor.player.user_id, card.problem_id)
        self._showing[surface_id] = card.problem_id
        if card.over:
            self._surfaces.pop(key, None)
            self.timers.disarm(key)
            return
        self._surfaces[key] = surface  # the latest click's handle: the freshest token to edit through
        self.timers.arm(key, card.deadline, lambda: self._time_up(actor, card.problem_id, surface_id))

    async def _time_up(self, actor: Actor, problem_id: int, surface_id: str) -> None:
        key = (actor.player.user_id, problem_id)
        surface = self._surfaces.pop(key, None)
        try:
            feedback = await self.quiz.time_up(actor, problem_id)
        except RankZeroError as exc:  # e.g. answered meanwhile: nothing to announce
            log.info("time-up of problem %s for %s: %s", problem_id, actor.player.user_id, exc)
            return
        if surface is None or feedback.outcome != "timeout" or self._showing.get(surface_id) != problem_id:
            return  # answered in time, or the surface moved on to another problem
        card = await self.quiz.view_problem(actor, problem_id)
        await self._on_time_up(surface, card, feedback)

    async def close(self) -> None:
        """Cancel every timer (the stored deadlines still count)."""
        await self.timers.close()
        self._surfaces.clear()


def _flow_id(actor: Actor, challenge_id: int) -> str:
    return f"{actor.player.user_id}:{challenge_id}"
