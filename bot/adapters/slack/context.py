"""What every Slack listener shares: the services, the Web API client, who is an admin, retries, timers.

Listeners stay thin: they turn a payload into a PlayerRef/ChannelRef/Actor with the helpers here, make
one service call and render the result with ``blocks``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from slack_bolt.request.internals import extract_enterprise_id, extract_is_enterprise_install, extract_team_id
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient

from bot.adapters.slack import blocks as bk
from bot.adapters.slack.budget import RequestBudget
from bot.adapters.slack.platform import PLATFORM
from bot.adapters.slack.workspaces import Workspace
from bot.commands.admin import AdminPolicy, PlatformRights
from bot.commands.dedup import Redeliveries
from bot.commands.flow import ProblemFlow
from bot.commands.handlers import Commands
from bot.core.cards import Feedback, ProblemCard
from bot.core.models import Actor, ChannelRef, PlayerRef, Tenant, bounded_display_name
from bot.core.player_day import platform_timezone
from bot.core.ports import Clock, SystemClock
from bot.core.tenancy import TenantAllowList

if TYPE_CHECKING:
    from bot.services import Services

log = logging.getLogger(__name__)

#: What a non-admin is told when they try an admin command.
REFUSAL = "only admins can do that: ask a workspace admin (or one listed in RANKZERO_ADMINS)"
#: How long a users.info admin answer is trusted.
ADMIN_CACHE_S = 300.0
#: At most this many users.info lookups wait behind the budget at once (one per player; see player_actor).
MAX_QUEUED_LOOKUPS = 2000
#: Cached users.info answers kept before expired ones are dropped (the cache must not grow forever).
ADMIN_CACHE_MAX = 10_000

#: How many views' latest hashes (and update locks) are remembered; the oldest are forgotten first.
VIEW_HASHES_MAX = 10_000


@dataclass(frozen=True)
class Surface:
    """Where a player's problem is shown: a modal (``view_id``, changed with views.update and its hash), or
    a private (ephemeral) message in the channel, changed through the latest click's ``response_url``
    (Slack: 5 uses within 30 minutes each; every click brings a fresh one).
    """

    view_id: str | None = None
    response_url: str | None = None


#: In OAuth mode, the request being handled: its Web API client (with its workspace's bot token, made by
#: Bolt's authorization), its bot scopes and its workspace. Set by the app's middleware; asyncio copies
#: it into the listener tasks and timers started while handling the request.
_REQUEST: ContextVar[tuple[AsyncWebClient, frozenset[str], Workspace] | None] = ContextVar(
    "slack_request", default=None
)


class SlackContext:
    """State of one running Slack adapter: one workspace and bot token (single-workspace mode), or every
    workspace that installed the app (OAuth mode: ``client`` and ``scopes`` are the current request's).
    """

    def __init__(
        self,
        client: AsyncWebClient,
        *,
        admins: frozenset[str] = frozenset(),
        timezone: str = "UTC",
        clock: Clock | None = None,
    ) -> None:
        #: The Web API client of single-workspace mode (in OAuth mode: the one without a token that
        #: per-workspace clients copy their base URL and retries from).
        self.base_client = client
        #: Who is an admin: workspace admins/owners (users.info) and RANKZERO_ADMINS.
        self.admin_policy = AdminPolicy(refusal=REFUSAL, admin_users=admins)
        #: The platform-neutral command bodies, built when the services are attached.
        self._commands: Commands | None = None
        self.timezone = timezone
        self._clock: Clock = clock or SystemClock()
        #: The shared problem flow (bot.commands.flow), built when the services are attached; its
        #: surface is the modal's view id.
        self._flow: ProblemFlow[Surface] | None = None
        self._services: Services | None = None
        #: users.info answers by (workspace key, user id): whether someone is an admin is a fact about one
        #: workspace (a Grid user administers some of the org's workspaces and not others), told by that
        #: workspace's token, so an answer never decides for another workspace.
        #: The last element is the user's IANA timezone as Slack reports it (``user.tz``), or None.
        self._user_cache: dict[tuple[str, str], tuple[float, bool, str | None, str | None]] = {}
        #: Redelivered events are dropped here and, once started, through the database.
        self.deliveries = Redeliveries(self._clock)
        #: The bot token's OAuth scopes (auth.test at start); empty until then.
        self.token_scopes: frozenset[str] = frozenset()
        #: The workspaces this bot serves (RANKZERO_ALLOWED_TENANTS; open: every one).
        self.allowed = TenantAllowList()
        #: Our side of Slack's Tier 4 limits, per workspace (RANKZERO_SLACK_TIER4_*; budget.py).
        self.budget = RequestBudget()
        #: view id -> the hash Slack gave with the view we last showed (views.update sends it, so an update
        #: computed from older state is refused as ``hash_conflict`` instead of overwriting newer state).
        self._hashes: OrderedDict[str, str] = OrderedDict()
        #: view id -> a lock that puts one view's updates in order (each waits for the previous hash).
        self._view_locks: OrderedDict[str, asyncio.Lock] = OrderedDict()
        #: users.info lookups queued behind the budget (kept referenced until they end).
        self._lookups: set[asyncio.Task[object]] = set()
        #: (workspace, user) of the queued lookups: one per player, however often they click meanwhile.
        self._lookup_keys: set[tuple[str | None, str]] = set()

    # ------------------------------------------------------------------ the request's workspace
    @property
    def client(self) -> AsyncWebClient:
        """The Web API client to answer the current request with (its workspace's bot token)."""
        current = _REQUEST.get()
        return current[0] if current is not None else self.base_client

    @property
    def scopes(self) -> frozenset[str]:
        """The bot token's scopes, for the current request's workspace in OAuth mode."""
        current = _REQUEST.get()
        return current[1] if current is not None else self.token_scopes

    @scopes.setter
    def scopes(self, scopes: frozenset[str]) -> None:
        self.token_scopes = scopes

    @staticmethod
    def enter_request(client: AsyncWebClient, scopes: frozenset[str], workspace: Workspace) -> None:
        """Handle the current request (and what it starts) with this workspace's client (OAuth mode)."""
        _REQUEST.set((client, scopes, workspace))

    def workspace_id(self, body: dict[str, Any]) -> str:
        """The ``ChannelRef.workspace_id`` of a payload: its Grid-aware key in OAuth mode (see
        bot/adapters/slack/workspaces.py), else the team id.
        """
        current = _REQUEST.get()
        if current is not None:
            return current[2].key
        # Bolt's own extractors, as its request context (and so the allow-list check) uses them: a slash
        # command carries ``enterprise_id``, a click ``enterprise.id``, a modal ``team.enterprise_id``; read
        # from one field only, a Grid team would be two tenants.
        return Workspace(
            extract_enterprise_id(body) or None,
            extract_team_id(body) or None,
            bool(extract_is_enterprise_install(body)),
        ).key

    @property
    def clock(self) -> Clock:
        """The services' clock (the time-up timers wait on it)."""
        return self._clock

    @clock.setter
    def clock(self, clock: Clock) -> None:
        self._clock = clock
        self.deliveries.clock = clock
        if self._flow is not None:
            self._flow.clock = clock

    @property
    def flow(self) -> ProblemFlow[Surface]:
        """The problem flow over the services given at start."""
        if self._flow is None:
            raise RuntimeError("the Slack adapter has not been started")
        return self._flow

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

    @property
    def commands(self) -> Commands:
        """The command layer over the services given at start."""
        if self._commands is None:
            raise RuntimeError("the Slack adapter has not been started")
        return self._commands

    def bind(self, services: Services) -> None:
        """Attach the services (done by the adapter's start)."""
        self._services = services
        self._commands = Commands(
            services.quiz,
            services.schedules,
            self.admin_policy,
            disputes=services.app.disputes,
            practice=services.app.practice,
        )
        self._flow = ProblemFlow(services.quiz, self._clock, self._time_up)

    # ------------------------------------------------------------------ refs
    @staticmethod
    def player(user: dict[str, Any] | str, name: str | None = None) -> PlayerRef:
        """A PlayerRef from a payload's ``user`` object (or id)."""
        if isinstance(user, str):
            return PlayerRef(PLATFORM, user, bounded_display_name(name or user, user))
        uid = str(user.get("id"))
        given = str(name or user.get("name") or user.get("username") or uid)
        return PlayerRef(PLATFORM, uid, bounded_display_name(given, uid))

    def channel(self, workspace_id: str, channel_id: str, name: str | None = None) -> ChannelRef:
        """A ChannelRef in a workspace (``workspace_id``: a team id, or :meth:`workspace_id`'s key)."""
        return ChannelRef(PLATFORM, workspace_id, channel_id, name, self.timezone)

    def _request_workspace(self) -> str:
        """The key of the workspace whose token answers now: the request's in OAuth mode, else the one
        token's (single-workspace mode has one workspace, so one key for all).
        """
        current = _REQUEST.get()
        return current[2].key if current is not None else ""

    async def _user(self, user_id: str) -> tuple[bool, str | None]:
        """(workspace admin/owner?, display name) from users.info of the request's workspace, cached 5
        minutes per (workspace, user).
        """
        # The key and the client are read together from the same request context: the answer is cached
        # under the workspace whose token asked.
        key = (self._request_workspace(), user_id)
        client = self.client
        cached = self._user_cache.get(key)
        now = time.monotonic()
        if cached is not None and now - cached[0] < ADMIN_CACHE_S:
            return cached[1], cached[2]
        try:
            resp = await client.users_info(user=user_id)
        except SlackApiError as exc:
            log.warning(
                "users.info failed for %s in %s: %s",
                user_id,
                key[0] or "the workspace",
                exc.response.get("error"),
            )
            return False, None
        user = resp.get("user") or {}
        admin = bool(user.get("is_admin") or user.get("is_owner") or user.get("is_primary_owner"))
        profile = user.get("profile") or {}
        name = profile.get("display_name") or profile.get("real_name") or user.get("name")
        if len(self._user_cache) >= ADMIN_CACHE_MAX:
            self._user_cache = {k: v for k, v in self._user_cache.items() if now - v[0] < ADMIN_CACHE_S}
        self._user_cache[key] = (now, admin, str(name) if name else None, platform_timezone(user.get("tz")))
        return admin, str(name) if name else None

    async def user_timezone(self, user_id: str) -> str | None:
        """The user's timezone as Slack reports it (users.info ``user.tz``, an IANA name), from the same
        cached answer as their name; None when Slack does not say (no users:read, a failed lookup).
        """
        await self._user(user_id)
        cached = self._user_cache.get((self._request_workspace(), user_id))
        return cached[3] if cached is not None else None

    def forget_workspace(self, workspace: str) -> None:
        """Drop a workspace's cached users.info answers (it uninstalled the app; a reinstall asks again)."""
        self._user_cache = {k: v for k, v in self._user_cache.items() if k[0] != workspace}

    async def is_admin(self, user_id: str) -> bool:
        """A configured admin (RANKZERO_ADMINS), or a workspace admin/owner according to users.info."""
        if user_id in self.admin_policy.admin_users:  # no users.info call needed
            return True
        admin, _ = await self._user(user_id)
        return self.admin_policy.is_admin(user_id, PlatformRights(manages_workspace=admin))

    async def display_name(self, user_id: str) -> str:
        """The user's Slack display name (their id when users.info does not answer)."""
        return (await self._user(user_id))[1] or user_id

    async def actor(
        self, user: dict[str, Any] | str, name: str | None = None, *, body: dict[str, Any] | None = None
    ) -> Actor:
        """The Actor for a payload's user: Slack display name (users.info), the admin decision, and the
        tenant (the request's workspace or Grid org, from ``body`` outside OAuth mode).
        """
        uid = user if isinstance(user, str) else str(user.get("id"))
        admin, shown = await self._user(uid)
        key = self.workspace_id(body or {})
        return self.admin_policy.actor(
            self.player(user, shown or name),
            PlatformRights(manages_workspace=admin),
            Tenant(PLATFORM, key) if key else None,
        )

    # ------------------------------------------------------------------ views
    def workspace_key(self) -> str:
        """The budget's key for the request's workspace: the one whose token answers (OAuth mode: the
        request's; single-workspace mode has one token, so one key), the same key every update uses.
        """
        return self._request_workspace()

    def remember_hash(self, view: dict[str, Any] | None) -> None:
        """Keep the hash of a view Slack answered or sent (views.open/update answers, click payloads)."""
        if not view or not view.get("id") or not view.get("hash"):
            return
        vid = str(view["id"])
        self._hashes[vid] = str(view["hash"])
        self._hashes.move_to_end(vid)
        while len(self._hashes) > VIEW_HASHES_MAX:
            self._hashes.popitem(last=False)

    def saw_view(self, body: dict[str, Any]) -> None:
        """A click inside a modal: its hash is what the player saw when clicking (an update of ours that
        ends after this keeps its own, newer one: updates of a view run one at a time).
        """
        if body.get("type") == "block_actions":
            self.remember_hash(body.get("view"))

    def _lock(self, view_id: str) -> asyncio.Lock:
        lock = self._view_locks.get(view_id)
        if lock is None:
            lock = self._view_locks[view_id] = asyncio.Lock()
            while len(self._view_locks) > VIEW_HASHES_MAX:
                self._view_locks.popitem(last=False)
        return lock

    async def open_view(self, trigger_id: str, view: dict[str, Any]) -> str:
        """views.open with a trigger; returns the view id (its hash is kept for later updates)."""
        opened = await self.client.views_open(trigger_id=trigger_id, view=view)
        self.remember_hash(opened.get("view"))
        return str((opened.get("view") or {})["id"])

    async def update_view(
        self,
        view_id: str,
        view: dict[str, Any],
        *,
        rerender: Callable[[], Awaitable[dict[str, Any]]] | None = None,
        workspace: str = "",
    ) -> bool:
        """views.update with the view's hash; False when the modal is gone (closed by the player) or the
        update was stale and there is nothing fresher to show.

        A ``hash_conflict`` means the modal changed since the state ``view`` was computed from (another
        process, or a click that raced this one): Slack refused to overwrite the newer view. With
        ``rerender`` the state is read again and shown (it includes everything stored so far, so it is at
        least as new as what replaced ours; we do not know that view's hash, so this second write goes
        without one); without it the stale update is dropped. Any other refusal is raised (after the
        client's retries), so the error handler tells the player and logs it.
        """
        async with self._lock(view_id):
            await self.budget.take(workspace or self._request_workspace(), "views.update")
            try:
                known = self._hashes.get(view_id)
                kwargs: dict[str, Any] = {"hash": known} if known else {}
                resp = await self.client.views_update(view_id=view_id, view=view, **kwargs)
            except SlackApiError as exc:
                error = exc.response.get("error")
                if error == "not_found":
                    log.info("views.update of %s: the modal is closed", view_id)
                    return False
                if error != "hash_conflict":
                    raise
                # The stale hash stays: until a click or our re-read shows the new one, an update
                # computed from what we knew is refused again rather than sent blind.
                log.info("views.update of %s refused as stale (hash_conflict)", view_id)
                if rerender is None:
                    return False
                fresh = await rerender()
                await self.budget.take(workspace or self._request_workspace(), "views.update")
                resp = await self.client.views_update(view_id=view_id, view=fresh)
            self.remember_hash(resp.get("view"))
        return True

    async def respond(self, url: str, message: dict[str, Any], *, replace: bool) -> bool:
        """Show ``message`` privately through a response_url (``replace``: instead of the message the click
        came from); False when Slack did not accept it (the URL used 5 times, expired, or refused).
        """
        webhook = AsyncWebhookClient(url, session=self.client.session)  # the shared connection pool
        try:
            resp = await webhook.send(response_type="ephemeral", replace_original=replace, **message)
        except OSError as exc:
            log.warning("a response_url post failed: %s", exc)
            return False
        if resp.status_code != 200:
            log.warning("a response_url post was refused: %s %s", resp.status_code, resp.body[:80])
            return False
        return True

    async def show(
        self,
        surface: Surface,
        view: dict[str, Any],
        *,
        replace: bool = True,
        rerender: Callable[[], Awaitable[dict[str, Any]]] | None = None,
    ) -> bool:
        """Show a problem-flow view on ``surface``: the modal (``rerender``: see :meth:`update_view`), or
        the private message (its blocks; ``replace``: instead of the clicked message, else a new one).
        """
        if surface.view_id is not None:
            return await self.update_view(surface.view_id, view, rerender=rerender)
        assert surface.response_url is not None
        return await self.respond(surface.response_url, bk.as_message(view), replace=replace)

    # ------------------------------------------------------------------ players
    async def player_actor(self, body: dict[str, Any]) -> Actor:
        """The Actor for a player's click, never waiting on Slack's users.info budget: the cached answer,
        else users.info when the workspace's budget allows it now, else the payload's user name (a lookup
        is queued behind the budget, so the next click shows the display name). Admin rights are not
        needed to play.
        """
        user = body["user"]
        uid = str(user.get("id"))
        key = (self._request_workspace(), uid)
        cached = self._user_cache.get(key)
        fresh = cached is not None and time.monotonic() - cached[0] < ADMIN_CACHE_S
        if fresh or self.budget.try_take(self.workspace_key(), "users.info"):
            return await self.actor(user, body=body)
        if key not in self._lookup_keys and len(self._lookup_keys) < MAX_QUEUED_LOOKUPS:
            # One queued lookup per player (a player clicking on while the budget is spent adds nothing),
            # and a bound on them all: past it the name in the payload serves until a lookup fits.
            self._lookup_keys.add(key)
            task: asyncio.Task[object] = asyncio.create_task(self._lookup_later(body))
            self._lookups.add(task)
            task.add_done_callback(self._lookups.discard)
            task.add_done_callback(lambda _t: self._lookup_keys.discard(key))
        tenant_key = self.workspace_id(body)
        return self.admin_policy.actor(
            self.player(user),
            PlatformRights(manages_workspace=False),
            Tenant(PLATFORM, tenant_key) if tenant_key else None,
        )

    async def _lookup_later(self, body: dict[str, Any]) -> object:
        await self.budget.take(self.workspace_key(), "users.info")
        return await self._user(str(body["user"].get("id")))

    # ------------------------------------------------------------------ time-up
    async def _time_up(self, surface: Surface, card: ProblemCard, feedback: Feedback) -> None:
        """A problem's time ran out while it is still shown: say so on its modal or message."""
        await self.show(surface, bk.problem_view(card, feedback, note="Time is up for this problem."))

    async def stop_timers(self) -> None:
        """Cancel pending timers (the next Start or answer records a time-out from the DB anyway) and
        queued users.info lookups.
        """
        for task in list(self._lookups):
            task.cancel()
        if self._flow is not None:
            await self._flow.close()
