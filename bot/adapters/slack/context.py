"""What every Slack listener shares: the services, the Web API client, who is an admin, retries, timers.

Listeners stay thin: they turn a payload into a PlayerRef/ChannelRef/Actor with the helpers here, make
one service call and render the result with ``blocks``.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.adapters.slack import blocks as bk
from bot.adapters.slack.platform import PLATFORM
from bot.core.errors import RankZeroError
from bot.core.models import Actor, ChannelRef, PlayerRef
from bot.core.ports import Clock, SystemClock

if TYPE_CHECKING:
    from bot.serve import Services

log = logging.getLogger(__name__)

#: How long a users.info admin answer is trusted.
ADMIN_CACHE_S = 300.0
#: How many delivered event/action keys are remembered to drop Slack's redeliveries.
SEEN_KEYS = 10_000


class SlackContext:
    """State of one running Slack adapter (one workspace, one bot token)."""

    def __init__(
        self,
        client: AsyncWebClient,
        *,
        admins: frozenset[str] = frozenset(),
        timezone: str = "UTC",
        clock: Clock | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.client = client
        self.admins = admins
        self.timezone = timezone
        self.clock: Clock = clock or SystemClock()
        self._sleep = sleep
        self._services: Services | None = None
        self._user_cache: dict[str, tuple[float, bool, str | None]] = {}
        self._seen: OrderedDict[str, None] = OrderedDict()
        #: view id -> problem id currently shown, so a late timer never overwrites the next problem.
        self.showing: dict[str, int] = {}
        self._timers: dict[tuple[str, int], asyncio.Task[None]] = {}
        #: Delivered event ids in the database (bot/storage/repositories/deliveries.py), set at start.
        self.deliveries: Any = None
        #: The bot token's OAuth scopes (auth.test at start); empty until then.
        self.scopes: frozenset[str] = frozenset()

    # ------------------------------------------------------------------ services
    @property
    def services(self) -> Services:
        """The services given at start (listeners run only after that)."""
        if self._services is None:
            raise RuntimeError("the Slack adapter has not been started")
        return self._services

    @property
    def bound(self) -> bool:
        """True once the adapter started (the services are attached)."""
        return self._services is not None

    def bind(self, services: Services) -> None:
        """Attach the services (done by the adapter's start)."""
        self._services = services

    # ------------------------------------------------------------------ refs
    @staticmethod
    def player(user: dict[str, Any] | str, name: str | None = None) -> PlayerRef:
        """A PlayerRef from a payload's ``user`` object (or id)."""
        if isinstance(user, str):
            return PlayerRef(PLATFORM, user, name or user)
        uid = str(user.get("id"))
        return PlayerRef(PLATFORM, uid, str(name or user.get("name") or user.get("username") or uid))

    def channel(self, team_id: str, channel_id: str, name: str | None = None) -> ChannelRef:
        """A ChannelRef of this workspace."""
        return ChannelRef(PLATFORM, team_id, channel_id, name, self.timezone)

    async def _user(self, user_id: str) -> tuple[bool, str | None]:
        """(workspace admin/owner?, display name) from users.info, cached 5 minutes."""
        cached = self._user_cache.get(user_id)
        now = time.monotonic()
        if cached is not None and now - cached[0] < ADMIN_CACHE_S:
            return cached[1], cached[2]
        try:
            resp = await self.client.users_info(user=user_id)
        except SlackApiError as exc:
            log.warning("users.info failed for %s: %s", user_id, exc.response.get("error"))
            return False, None
        user = resp.get("user") or {}
        admin = bool(user.get("is_admin") or user.get("is_owner") or user.get("is_primary_owner"))
        profile = user.get("profile") or {}
        name = profile.get("display_name") or profile.get("real_name") or user.get("name")
        self._user_cache[user_id] = (now, admin, str(name) if name else None)
        return admin, str(name) if name else None

    async def is_admin(self, user_id: str) -> bool:
        """A configured admin (RANKZERO_ADMINS), or a workspace admin/owner according to users.info."""
        if user_id in self.admins:
            return True
        return (await self._user(user_id))[0]

    async def display_name(self, user_id: str) -> str:
        """The user's Slack display name (their id when users.info does not answer)."""
        return (await self._user(user_id))[1] or user_id

    async def actor(self, user: dict[str, Any] | str, name: str | None = None) -> Actor:
        """The Actor for a payload's user: Slack display name (users.info) and the admin decision."""
        uid = user if isinstance(user, str) else str(user.get("id"))
        admin, shown = await self._user(uid)
        ref = self.player(user, shown or name)
        return Actor(ref, admin or uid in self.admins)

    # ------------------------------------------------------------------ retries
    def first_delivery(self, key: str) -> bool:
        """True the first time ``key`` is seen (later calls: a redelivery to drop)."""
        if key in self._seen:
            return False
        self._seen[key] = None
        while len(self._seen) > SEEN_KEYS:
            self._seen.popitem(last=False)
        return True

    # ------------------------------------------------------------------ views
    async def update_view(self, view_id: str, view: dict[str, Any]) -> bool:
        """views.update; False when the modal is gone (closed by the player). Any other refusal is raised
        (after the client's retries), so the error handler tells the player and logs it.
        """
        try:
            await self.client.views_update(view_id=view_id, view=view)
        except SlackApiError as exc:
            if exc.response.get("error") != "not_found":
                raise
            log.info("views.update of %s: the modal is closed", view_id)
            return False
        return True

    # ------------------------------------------------------------------ time-up timers
    def arm_timer(self, view_id: str, actor: Actor, problem_id: int, deadline: dt.datetime) -> None:
        """At the problem's stored deadline, record the time-out and update the modal if still shown."""
        key = (actor.player.user_id, problem_id)
        if key in self._timers and not self._timers[key].done():
            return
        self.showing[view_id] = problem_id
        self._timers[key] = asyncio.create_task(self._expire(view_id, actor, problem_id, deadline))

    async def _expire(self, view_id: str, actor: Actor, problem_id: int, deadline: dt.datetime) -> None:
        try:
            await self._sleep(max(0.0, (deadline - self.clock.now()).total_seconds()))
            quiz = self.services.quiz
            try:
                feedback = await quiz.time_up(actor, problem_id)
            except RankZeroError as exc:
                log.info("time-up of problem %s for %s: %s", problem_id, actor.player.user_id, exc)
                return
            if feedback.outcome != "timeout" or self.showing.get(view_id) != problem_id:
                return  # answered in time, or the modal moved on
            card = await quiz.view_problem(actor, problem_id)
            await self.update_view(
                view_id, bk.problem_view(card, feedback, note="Time is up for this problem.")
            )
        except Exception:  # a timer must never take the process down; the DB stays the truth
            log.exception("time-up timer for problem %s failed", problem_id)
        finally:
            self._timers.pop((actor.player.user_id, problem_id), None)

    async def stop_timers(self) -> None:
        """Cancel pending timers (the next Start or answer records a time-out from the DB anyway)."""
        for task in list(self._timers.values()):
            task.cancel()
        for task in list(self._timers.values()):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._timers.clear()
