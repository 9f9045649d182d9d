"""The Slack adapter: an AsyncApp (Bolt) with RankZero's listeners, served over HTTP or Socket Mode.

HTTP mode (production): Slack POSTs slash commands, interactivity and events to ``/slack/events``; the
server checks every request's signature (HMAC-SHA256 of ``v0:{timestamp}:{body}`` with the signing
secret) on the raw bytes, with a timestamp within 5 minutes and a 256 KiB body cap, before Bolt parses
anything (bot/adapters/slack/verify.py; 401 or 413 otherwise). Socket Mode (development): the app opens
a websocket with the app-level token (``xapp-...``), so no public URL is needed.

OAuth mode (many workspaces, HTTP only): Bolt's AsyncOAuthFlow serves ``/slack/install`` (a link to
Slack's authorization page with a one-use ``state``, tied to the browser by a cookie) and
``/slack/oauth_redirect`` (the code exchanged with ``oauth.v2.access``; the install saved). The stores are
slack_sdk's async SQLAlchemy ones over our database, built in bot/bootstrap.py and given in Services, so the
Bolt app is made at start. Each request is authorized with its workspace's bot token (Bolt's installation
store authorization) and answered with that workspace's client (``SlackContext.client``);
``app_uninstalled`` and ``tokens_revoked`` delete the installation or bot and pause the workspace's
schedules, so nothing is posted there until it installs again.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import aiohttp
from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.async_app import AsyncApp, AsyncBoltContext, AsyncBoltRequest
from slack_bolt.oauth.async_callback_options import AsyncCallbackOptions, AsyncFailureArgs, AsyncSuccessArgs
from slack_bolt.oauth.async_oauth_settings import AsyncOAuthSettings
from slack_bolt.response import BoltResponse
from slack_sdk.errors import SlackApiError
from slack_sdk.oauth.token_rotation.async_rotator import AsyncTokenRotator
from slack_sdk.web.async_client import AsyncWebClient

from bot.adapters.slack import blocks as bk
from bot.adapters.slack import failures, observe, verify
from bot.adapters.slack.budget import RequestBudget
from bot.adapters.slack.context import SlackContext
from bot.adapters.slack.listeners import actions, commands, disputes, events, practice, reports, views
from bot.adapters.slack.platform import PLATFORM, SlackPlatform
from bot.adapters.slack.verify import (
    INSTALLS_PER_MINUTE,
    MAX_BODY_BYTES,
    VERIFIED,
    InstallLimiter,
    Refused,
    SlackRequestVerifier,
    refusal_response,
)
from bot.adapters.slack.workspaces import Workspace
from bot.config import Settings
from bot.core.errors import ConfigurationError, RankZeroError
from bot.core.models import Actor, ChannelRef, PlayerRef, Tenant
from bot.core.schedule import next_slot
from bot.core.schedule_text import describe_schedule
from bot.secret_box import SecretBox

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from bot.metrics import BotMetrics
    from bot.services import Services

log = logging.getLogger(__name__)

#: The path Slack posts to in HTTP mode (slash command, interactivity and event subscription URLs).
EVENTS_PATH = "/slack/events"
#: OAuth mode: where a workspace admin starts an install, and where Slack sends them back.
INSTALL_PATH = "/slack/install"
REDIRECT_PATH = "/slack/oauth_redirect"
#: The bot scopes an install asks for (the same as the README's manifest).
#: ``files:write``: the stats chart and the team report's heatmap (issue 30; files.getUploadURLExternal and
#: files.completeUploadExternal need it).
BOT_SCOPES = (
    "chat:write",
    "chat:write.public",
    "commands",
    "users:read",
    "channels:read",
    "groups:read",
    "files:write",
    # An outbox post retried after an uncertain try looks for its mark in the channel (SlackPlatform._post).
    "channels:history",
    "groups:history",
)
#: What a member of a workspace without an installation (uninstalled, token revoked) is told.
NOT_INSTALLED = (
    "RankZero is not installed in this workspace any more (it was uninstalled or its token revoked): "
    "a workspace admin can install it again from the app's install page."
)
#: Who pauses a workspace's schedules when it uninstalls the app (the service wants an admin actor).
UNINSTALL_ACTOR = Actor(PlayerRef(PLATFORM, "app_uninstalled", "Slack (app uninstalled)"), is_admin=True)


@dataclass(frozen=True)
class OAuthOptions:
    """OAuth mode's settings (RANKZERO_SLACK_CLIENT_ID, _CLIENT_SECRET, _REDIRECT_URI, _AUTHORIZE_URL)."""

    client_id: str
    client_secret: str
    redirect_uri: str | None = None
    authorize_url: str | None = None
    scopes: tuple[str, ...] = BOT_SCOPES


def redelivery_key(body: dict[str, Any]) -> str | None:
    """What identifies one delivery of a payload: the event id, or the clicking user and action_ts."""
    if body.get("event_id"):
        return f"event:{body['event_id']}"
    acts = body.get("actions")
    if body.get("type") == "block_actions" and acts:
        user = (body.get("user") or {}).get("id", "")
        return f"action:{user}:{acts[0].get('action_id')}:{acts[0].get('action_ts')}"
    return None


def build_bolt_app(
    ctx: SlackContext, signing_secret: str, oauth_settings: AsyncOAuthSettings | None = None
) -> AsyncApp:
    """The Bolt app with RankZero's listeners; outgoing Web API calls go through ``ctx.client`` (in OAuth
    mode, with ``oauth_settings``, the request's workspace's client).
    """
    app = AsyncApp(
        client=ctx.base_client,
        signing_secret=signing_secret,
        request_verification_enabled=True,
        oauth_settings=oauth_settings,
        # What a member of a workspace that uninstalled the app is told (through the response_url).
        user_facing_authorize_error_message=NOT_INSTALLED if oauth_settings is not None else None,
    )
    if oauth_settings is not None:

        @app.middleware
        async def per_workspace(
            req: AsyncBoltRequest, resp: BoltResponse, next: Callable[[], Awaitable[BoltResponse]]
        ) -> BoltResponse | None:
            # Runs after Bolt's authorization: the request's client carries its workspace's bot token.
            context: AsyncBoltContext = req.context
            ctx.enter_request(context.client, _bot_scopes(context), workspace_of(context))
            return await next()

        register_uninstall(app, ctx, oauth_settings)

    @app.middleware
    async def log_request(
        req: AsyncBoltRequest, resp: BoltResponse, next: Callable[[], Awaitable[BoltResponse]]
    ) -> BoltResponse | None:
        # The log lines of this request's handling (listeners included) name its workspace and channel.
        observe.enter_request(req.body, workspace_of(req.context).key)
        return await next()

    @app.middleware
    async def allowed_tenants(
        req: AsyncBoltRequest, resp: BoltResponse, next: Callable[[], Awaitable[BoltResponse]]
    ) -> BoltResponse | None:
        # RANKZERO_ALLOWED_TENANTS: a workspace (or Grid org) the operator did not allow gets nothing,
        # whatever it sends; acknowledged (so Slack does not retry) and logged.
        key = workspace_of(req.context).key
        if key and not ctx.allowed.allows(Tenant(PLATFORM, key)):
            log.warning(
                "ignored a Slack request from workspace %s: it is not in RANKZERO_ALLOWED_TENANTS", key
            )
            return BoltResponse(status=200, body="")
        return await next()

    @app.middleware
    async def drop_redeliveries(
        req: AsyncBoltRequest, resp: BoltResponse, next: Callable[[], Awaitable[BoltResponse]]
    ) -> BoltResponse | None:
        # Slack redelivers events (X-Slack-Retry-Num) when it did not see our answer in time, maybe to
        # another process: the command layer drops every delivery after the first, through the database
        # for events. Clicks are remembered here; an answer's idempotency key protects it everywhere.
        key = redelivery_key(req.body)
        if key is not None:
            durable = key.startswith("event:")
            first = await ctx.deliveries.first(key) if durable else ctx.deliveries.first_here(key)
            if not first:
                log.info("dropped a redelivery (%s, retry %s)", key, req.headers.get("x-slack-retry-num"))
                return BoltResponse(status=200, body="")
        return await next()

    @app.middleware
    async def view_hashes(
        req: AsyncBoltRequest, resp: BoltResponse, next: Callable[[], Awaitable[BoltResponse]]
    ) -> BoltResponse | None:
        # A click inside a modal carries the hash of the view the player sees: our next views.update of
        # it sends that hash, so Slack refuses it if the view changed meanwhile (hash_conflict).
        ctx.saw_view(req.body)
        return await next()

    failures.install(app, lambda: ctx.client)
    commands.register(app, ctx)
    actions.register(app, ctx)
    views.register(app, ctx)
    events.register(app, ctx)
    disputes.register(app, ctx)
    practice.register(app, ctx)
    reports.register(app, ctx)
    return app


def workspace_of(context: AsyncBoltContext) -> Workspace:
    """The workspace of a request (Grid-aware: an org-wide install is its enterprise)."""
    return Workspace(
        context.enterprise_id or None, context.team_id or None, bool(context.is_enterprise_install)
    )


def _bot_scopes(context: AsyncBoltContext) -> frozenset[str]:
    result = context.authorize_result
    scopes = result.bot_scopes if result is not None else None
    return frozenset(scopes or ())


def register_uninstall(app: AsyncApp, ctx: SlackContext, oauth_settings: AsyncOAuthSettings) -> None:
    """``app_uninstalled`` and ``tokens_revoked``: delete what the installation store holds for the
    workspace (its public API), then pause the workspace's running schedules, marked as paused by the
    removal (a reinstall resumes them, see :func:`install_callbacks`), so the scheduler posts nothing there
    (a post that races it is refused as "not installed"). Nobody is told in Slack: the workspace is gone.
    Its cached users.info answers go too (a reinstall may come with other admins).
    """
    store = oauth_settings.installation_store
    assert store is not None

    async def pause_workspace(ws: Workspace) -> None:
        ctx.forget_workspace(ws.key)
        try:
            await ctx.services.schedules.suspend_workspace(UNINSTALL_ACTOR, PLATFORM, ws.key)
        except RankZeroError as exc:
            log.warning("could not pause the schedules of Slack workspace %s: %s", ws, exc)

    @app.event("app_uninstalled")
    async def uninstalled(context: AsyncBoltContext) -> None:
        ws = workspace_of(context)
        await store.async_delete_all(enterprise_id=ws.enterprise_id, team_id=ws.team_id)
        log.warning("Slack workspace %s uninstalled RankZero: its tokens are deleted", ws)
        await pause_workspace(ws)

    @app.event("tokens_revoked")
    async def revoked(event: dict[str, Any], context: AsyncBoltContext) -> None:
        ws = workspace_of(context)
        tokens = event.get("tokens") or {}
        for user_id in tokens.get("oauth") or []:
            await store.async_delete_installation(
                enterprise_id=ws.enterprise_id, team_id=ws.team_id, user_id=str(user_id)
            )
        if tokens.get("bot"):
            await store.async_delete_bot(enterprise_id=ws.enterprise_id, team_id=ws.team_id)
            log.warning("Slack workspace %s revoked RankZero's bot token", ws)
            await pause_workspace(ws)


def install_callbacks(ctx: SlackContext, platform: SlackPlatform) -> AsyncCallbackOptions:
    """What the OAuth redirect does after Bolt saved an install: Bolt's own success page, and first, for
    a workspace that installs the app again, its daily challenges back: the schedules its removal paused
    (not those an admin paused) resume, and the installer is told which, in a direct message.

    The install itself never fails on our account: a database or Slack error here is logged, and the
    installer still gets Bolt's success page (``schedule resume`` in a channel does the same by hand).
    """

    async def success(args: AsyncSuccessArgs) -> BoltResponse:
        inst = args.installation
        ws = Workspace(inst.enterprise_id or None, inst.team_id or None, bool(inst.is_enterprise_install))
        if not ctx.allowed.allows(Tenant(PLATFORM, ws.key)):
            # RANKZERO_ALLOWED_TENANTS: Bolt saved the install already; remove it (the store's public
            # API, as an uninstall does) and show the installer Bolt's failure page.
            log.warning(
                "refused the Slack install of workspace %s: it is not in RANKZERO_ALLOWED_TENANTS", ws
            )
            await args.settings.installation_store.async_delete_all(
                enterprise_id=ws.enterprise_id, team_id=ws.team_id
            )
            return await args.default.failure(
                AsyncFailureArgs(
                    request=args.request,
                    reason="this workspace is not allowed to install this app",
                    suggested_status_code=403,
                    settings=args.settings,
                    default=args.default,
                )
            )
        try:
            resumed = await ctx.services.schedules.resume_workspace(UNINSTALL_ACTOR, PLATFORM, ws.key)
        except Exception:  # never turn a saved install into an error page
            log.exception("Slack workspace %s installed again, but its schedules could not be resumed", ws)
            resumed = []
        if resumed and inst.user_id:
            now = ctx.clock.now()
            text = bk.resumed_text(
                [(s.channel.channel_id, describe_schedule(s), next_slot(s.config, now)) for s in resumed]
            )
            try:
                client = await platform.client_for(ChannelRef(PLATFORM, ws.key, inst.user_id))
                await client.chat_postMessage(channel=inst.user_id, text=text)
            except (SlackApiError, RankZeroError) as exc:
                log.warning("could not tell %s in %s that its schedules resumed: %s", inst.user_id, ws, exc)
        return await args.default.success(args)

    async def failure(args: AsyncFailureArgs) -> BoltResponse:
        return await args.default.failure(args)

    return AsyncCallbackOptions(success=success, failure=failure)


class SlackHttpServer:
    """Serves a Bolt app at ``EVENTS_PATH`` (and, in OAuth mode, the install and redirect pages) with
    aiohttp. A POST reaches Bolt only once its raw bytes passed ``verifier`` (bot/adapters/slack/verify.py):
    Bolt parses the body before its own signature check, so an unsigned body is never parsed here.
    """

    def __init__(
        self,
        app: AsyncApp | None,
        host: str,
        port: int,
        *,
        verifier: SlackRequestVerifier,
        oauth: bool = False,
        installs: InstallLimiter | None = None,
    ) -> None:
        #: The Bolt app (OAuth mode: set at start, when the stores exist).
        self.app = app
        self.verifier = verifier
        #: Per-client limit on ``/slack/install`` (each one writes an OAuth state row).
        self.installs = installs or InstallLimiter()
        self._oauth = oauth
        self._host = host
        self._port = port
        self._runner: web.AppRunner | None = None
        self._site: web.TCPSite | None = None
        #: Where acknowledgement times go (set when the adapter starts).
        self.metrics: BotMetrics | None = None

    async def _handle_event(self, request: web.Request) -> web.Response:
        assert self.app is not None
        arrived = time.monotonic()
        try:
            raw = await self.verifier.verified_body(request)
            text = raw.decode("utf-8")
        except Refused as refused:
            return refusal_response(request, refused)
        except UnicodeDecodeError:
            # Signed, so Slack's: still no reason to let a decoding error become a traceback.
            return refusal_response(request, Refused(400, "the body is not UTF-8"))
        bolt_req = AsyncBoltRequest(
            body=text,
            query=request.query_string,
            headers=dict(request.headers),
            context={VERIFIED: True},
        )
        answered = await self.app.async_dispatch(bolt_req)  # returns once the listener acknowledged
        if self.metrics is not None:
            self.metrics.acknowledged(PLATFORM, time.monotonic() - arrived)
        return await to_aiohttp_response(answered)

    async def _handle_oauth(self, request: web.Request) -> web.Response:
        # The install pages are the OAuth flow's: unsigned browser GETs with no body.
        assert self.app is not None and self.app.oauth_flow is not None
        flow = self.app.oauth_flow
        bolt_req = await to_bolt_request(request)
        if request.path == flow.install_path:
            wait = self.installs.take(request.remote or "?")
            if wait:
                log.info("refused an install from %s: over %d a minute", request.remote, INSTALLS_PER_MINUTE)
                return web.Response(
                    status=429,
                    text="Too many install attempts: try again in a minute.",
                    headers={"Retry-After": str(wait)},
                )
            bolt_resp = await flow.handle_installation(bolt_req)
        else:
            bolt_resp = await flow.handle_callback(bolt_req)
        return await to_aiohttp_response(bolt_resp)

    @property
    def port(self) -> int:
        """The bound port (useful with port 0)."""
        assert self._runner is not None
        for addr in self._runner.addresses:
            return int(addr[1])
        raise RuntimeError("not listening")

    async def start(self) -> None:
        """Listen."""
        # aiohttp's own cap too (its default is 1 MiB), for any body read outside read_capped.
        web_app = web.Application(client_max_size=MAX_BODY_BYTES)
        routes = [web.post(EVENTS_PATH, self._handle_event)]
        if self._oauth:
            routes += [web.get(INSTALL_PATH, self._handle_oauth), web.get(REDIRECT_PATH, self._handle_oauth)]
        web_app.add_routes(routes)
        self._runner = web.AppRunner(web_app, access_log=None, lingering_time=verify.REFUSED_BODY_LINGER_S)
        await self._runner.setup()
        self._site = web.TCPSite(self._runner, self._host, self._port)
        await self._site.start()

    @property
    def listening(self) -> bool:
        """True between start and stop."""
        return self._site is not None and self._runner is not None and bool(self._runner.addresses)

    async def stop(self) -> None:
        """Stop listening."""
        if self._runner is not None:
            await self._runner.cleanup()
        self._site = None


class SlackAdapter:
    """The adapter ``rankzero serve`` runs: HTTP mode with a signing secret, Socket Mode with an app token."""

    name = PLATFORM

    def __init__(
        self,
        ctx: SlackContext,
        *,
        signing_secret: str | None,
        app_token: str | None = None,
        host: str = "127.0.0.1",
        port: int = 3000,
        admin_channel: str | None = None,
        oauth: OAuthOptions | None = None,
    ) -> None:
        if oauth is not None and (app_token is not None or not signing_secret):
            raise ConfigurationError(
                "Slack OAuth mode (RANKZERO_SLACK_CLIENT_ID and _CLIENT_SECRET) serves HTTP: set "
                "RANKZERO_SLACK_SIGNING_SECRET and unset RANKZERO_SLACK_APP_TOKEN"
            )
        if app_token is None and not signing_secret:
            raise ConfigurationError(
                "Slack needs RANKZERO_SLACK_SIGNING_SECRET (HTTP mode) or RANKZERO_SLACK_APP_TOKEN "
                "(Socket Mode, xapp-...): find them under Basic Information of your Slack app"
            )
        self.ctx = ctx
        self.platform = SlackPlatform(ctx.base_client, admin_channel=admin_channel)
        self.oauth = oauth
        self._signing_secret = signing_secret or "socket-mode-unsigned"
        # Socket Mode does not sign requests; Bolt still wants a secret, which is then unused. OAuth mode
        # builds the Bolt app at start (its stores live in the database the services open).
        self.bolt: AsyncApp | None = None if oauth else build_bolt_app(ctx, self._signing_secret)
        self._app_token = app_token
        self.http: SlackHttpServer | None = (
            None
            if app_token
            else SlackHttpServer(
                self.bolt,
                host,
                port,
                verifier=SlackRequestVerifier(self._signing_secret),
                oauth=oauth is not None,
            )
        )
        self._socket: Any = None
        self._session: aiohttp.ClientSession | None = None
        #: What /healthz reports: "not started", "token refused", "listening", "connected", "stopped".
        self.state = "not started"
        #: The bot's own user id (auth.test), e.g. to recognise the bot joining a channel.
        self.bot_user_id = ""

    async def start(self, services: Services) -> None:
        """Check the bot token (auth.test), attach the services, then listen (HTTP) or connect (Socket
        Mode). A refused token is a ConfigurationError, which ``serve`` turns into one line and exit 1.
        """
        self._open_session()
        if self.oauth is None:
            await self.check_token()
        else:
            self._start_oauth(services)
        self.ctx.bind(services)
        self.ctx.deliveries.log = services.deliveries
        metrics = services.metrics
        observe.count_rate_limits(self.ctx.base_client, metrics)
        if self.http is not None:
            self.http.metrics = metrics
        loaded = await disputes.drafts(self.ctx).load()  # admins' drafts from before a restart
        log.info("Slack: %d question drafts loaded", loaded)
        if self.http is not None:
            await self.http.start()
            self.state = "listening"
            log.warning("Slack HTTP mode: listening on port %d at %s", self.http.port, EVENTS_PATH)
            return
        assert self.bolt is not None
        from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler

        self._socket = AsyncSocketModeHandler(self.bolt, self._app_token)
        await self._socket.connect_async()
        self.state = "connected"
        log.warning("Slack Socket Mode: connected")

    def _start_oauth(self, services: Services) -> None:
        """Build the Bolt app with the OAuth flow over the services' installation and state stores."""
        assert self.oauth is not None and self.http is not None
        if services.slack_installations is None or services.slack_oauth_states is None:
            raise ConfigurationError("Slack OAuth mode needs the installation stores (bot/bootstrap.py)")
        settings = AsyncOAuthSettings(
            client_id=self.oauth.client_id,
            client_secret=self.oauth.client_secret,
            scopes=list(self.oauth.scopes),
            redirect_uri=self.oauth.redirect_uri,
            install_path=INSTALL_PATH,
            redirect_uri_path=REDIRECT_PATH,
            # /slack/install sends the admin straight to Slack (no intermediate "Add to Slack" page).
            install_page_rendering_enabled=False,
            installation_store=services.slack_installations,
            state_store=services.slack_oauth_states,
            authorization_url=self.oauth.authorize_url,  # None: Slack's own page
            callback_options=install_callbacks(self.ctx, self.platform),
        )
        self.bolt = build_bolt_app(self.ctx, self._signing_secret, settings)
        self.http.app = self.bolt
        self.platform.installations = services.slack_installations
        # Posts renew rotating tokens too (Bolt does it for requests); over the shared session.
        self.platform.rotator = AsyncTokenRotator(
            client_id=self.oauth.client_id,
            client_secret=self.oauth.client_secret,
            client=self.ctx.base_client,
        )
        self.platform.install_hint = self.oauth.redirect_uri or INSTALL_PATH
        if self.oauth.redirect_uri and self.oauth.redirect_uri.endswith(REDIRECT_PATH):
            self.platform.install_hint = self.oauth.redirect_uri[: -len(REDIRECT_PATH)] + INSTALL_PATH
        log.warning("Slack OAuth mode: workspaces install at %s", INSTALL_PATH)

    async def check_token(self) -> None:
        """auth.test with the bot token: who the bot is, or a ConfigurationError saying what to fix."""
        try:
            resp = await self.ctx.client.auth_test()
        except SlackApiError as exc:
            self.state = "token refused"
            raise ConfigurationError(
                f"Slack refused RANKZERO_SLACK_BOT_TOKEN ({exc.response.get('error')}): copy the Bot User "
                "OAuth Token (xoxb-...) from OAuth & Permissions, reinstalling the app if it was revoked"
            ) from None
        self.bot_user_id = str(resp.get("user_id") or "")
        header = next((v for k, v in (resp.headers or {}).items() if k.lower() == "x-oauth-scopes"), "")
        value = header[0] if isinstance(header, list) and header else header
        self.ctx.scopes = frozenset(s.strip() for s in str(value or "").split(",") if s.strip())
        log.info("Slack bot token accepted: %s in %s", resp.get("user"), resp.get("team"))

    async def health(self) -> dict[str, Any]:
        """The adapter's part of /healthz: the mode, and whether it listens (HTTP) or its websocket is
        connected (Socket Mode; slack_sdk's public ``is_connected``).
        """
        if self.http is not None:
            ok = self.state == "listening" and self.http.listening
            mode = "http+oauth" if self.oauth else "http"
            return {"ok": ok, "mode": mode, "state": self.state if ok else "not listening"}
        client = getattr(self._socket, "client", None)
        connected = False
        if client is not None:
            try:
                connected = bool(await client.is_connected())
            except Exception:  # a half-closed session: report it as down, never fail the health check
                log.debug("socket state unknown", exc_info=True)
        return {"ok": connected, "mode": "socket", "state": "connected" if connected else "disconnected"}

    def _open_session(self) -> None:
        """One aiohttp session (one connection pool) for every Web API call of this process.

        Without it slack_sdk opens a session, and a TLS connection to Slack, per call. The base client
        carries it, and every client made from it does too: Bolt's per-request clients (it copies the base
        client's session), the workspace clients of OAuth mode (SlackPlatform.client_for), and the
        response_url replies of the error handler (failures.tell).
        """
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession()
            self.ctx.base_client.session = self._session

    async def stop(self) -> None:
        """Stop listening or disconnect, cancel pending time-up timers, finish the drafts' writes, close
        the Web API session.
        """
        self.state = "stopped"
        if self.ctx.bound:
            await disputes.drafts(self.ctx).flush()
        if self.http is not None:
            await self.http.stop()
        if self._socket is not None:
            await self._socket.close_async()
        await self.ctx.stop_timers()
        if self._session is not None:
            self.ctx.base_client.session = None
            await self._session.close()
            self._session = None


def build_adapter(
    settings: Settings, *, client: AsyncWebClient | None = None, base_url: str | None = None
) -> SlackAdapter:
    """The adapter for ``settings`` (``client``/``base_url`` point the Web API elsewhere, e.g. a fake):
    OAuth mode when the client id, client secret and signing secret are set, else one bot token.
    """
    if bool(settings.slack_client_id) != bool(settings.slack_client_secret):
        raise ConfigurationError(
            "Slack OAuth mode needs both RANKZERO_SLACK_CLIENT_ID and RANKZERO_SLACK_CLIENT_SECRET "
            "(Basic Information > App Credentials); set both, or neither for one workspace's bot token"
        )
    oauth: OAuthOptions | None = None
    if settings.slack_client_id and settings.slack_client_secret:
        oauth = OAuthOptions(
            settings.slack_client_id,
            settings.slack_client_secret.get_secret_value(),
            redirect_uri=settings.slack_redirect_uri,
            authorize_url=settings.slack_authorize_url,
        )
    if settings.slack_bot_token is None and client is None and oauth is None:
        raise ConfigurationError(
            "Slack needs RANKZERO_SLACK_BOT_TOKEN (xoxb-..., OAuth & Permissions), or "
            "RANKZERO_SLACK_CLIENT_ID and RANKZERO_SLACK_CLIENT_SECRET for many workspaces (OAuth)"
        )
    if client is None:
        # OAuth mode: no token here; each request and post uses its workspace's bot token.
        bot_token = settings.slack_bot_token if oauth is None else None
        token = bot_token.get_secret_value() if bot_token else None
        kwargs: dict[str, Any] = {"token": token}
        base_url = base_url or settings.slack_api_url
        if base_url:
            kwargs["base_url"] = base_url
        client = AsyncWebClient(**kwargs)
    failures.add_retries(client)
    ctx = SlackContext(client, admins=frozenset(settings.admins), timezone=settings.default_timezone)
    ctx.allowed = settings.tenant_allow_list
    ctx.budget = RequestBudget(settings.slack_tier4_per_minute, settings.slack_tier4_burst)
    secret = settings.slack_signing_secret.get_secret_value() if settings.slack_signing_secret else None
    app_token = settings.slack_app_token.get_secret_value() if settings.slack_app_token else None
    adapter = SlackAdapter(
        ctx,
        signing_secret=secret,
        app_token=app_token,
        host=settings.slack_host,
        port=settings.slack_port,
        admin_channel=settings.slack_admin_channel_id,
        oauth=oauth,
    )
    if oauth is not None:
        # Before anything is migrated or served: OAuth mode keeps tokens in the database, encrypted.
        key = settings.secret_key.get_secret_value() if settings.secret_key else None
        SecretBox.required(key, "Slack OAuth mode (each workspace's bot token is kept in the database)")
    return adapter
