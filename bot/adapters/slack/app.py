"""The Slack adapter: an AsyncApp (Bolt) with RankZero's listeners, served over HTTP or Socket Mode.

HTTP mode (production): Slack POSTs slash commands, interactivity and events to ``/slack/events``; Bolt
verifies every request's signature (HMAC-SHA256 of ``v0:{timestamp}:{body}`` with the signing secret)
and refuses timestamps more than 5 minutes away, both with 401. Socket Mode (development): the app opens
a websocket with the app-level token (``xapp-...``), so no public URL is needed.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.async_app import AsyncApp, AsyncBoltRequest
from slack_bolt.response import BoltResponse
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.adapters.slack import failures
from bot.adapters.slack.context import SlackContext
from bot.adapters.slack.listeners import actions, commands, disputes, events, practice, views
from bot.adapters.slack.platform import PLATFORM, SlackPlatform
from bot.config import Settings
from bot.core.errors import ConfigurationError
from bot.storage.repositories.deliveries import SqlDeliveryLog

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from bot.serve import Services

log = logging.getLogger(__name__)

#: The path Slack posts to in HTTP mode (slash command, interactivity and event subscription URLs).
EVENTS_PATH = "/slack/events"


def redelivery_key(body: dict[str, Any]) -> str | None:
    """What identifies one delivery of a payload: the event id, or the clicking user and action_ts."""
    if body.get("event_id"):
        return f"event:{body['event_id']}"
    acts = body.get("actions")
    if body.get("type") == "block_actions" and acts:
        user = (body.get("user") or {}).get("id", "")
        return f"action:{user}:{acts[0].get('action_id')}:{acts[0].get('action_ts')}"
    return None


def build_bolt_app(ctx: SlackContext, signing_secret: str) -> AsyncApp:
    """The Bolt app with RankZero's listeners; outgoing Web API calls go through ``ctx.client``."""
    app = AsyncApp(client=ctx.client, signing_secret=signing_secret, request_verification_enabled=True)

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

    failures.install(app, ctx.client)
    commands.register(app, ctx)
    actions.register(app, ctx)
    views.register(app, ctx)
    events.register(app, ctx)
    disputes.register(app, ctx)
    practice.register(app, ctx)
    return app


class SlackHttpServer:
    """Serves a Bolt app at ``EVENTS_PATH`` with aiohttp (Bolt's own aiohttp request conversion)."""

    def __init__(self, app: AsyncApp, host: str, port: int) -> None:
        self.app = app
        self._host = host
        self._port = port
        self._runner: web.AppRunner | None = None
        self._site: web.TCPSite | None = None

    async def _handle(self, request: web.Request) -> web.Response:
        bolt_req = await to_bolt_request(request)
        bolt_resp = await self.app.async_dispatch(bolt_req)
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
        web_app = web.Application()
        web_app.add_routes([web.post(EVENTS_PATH, self._handle)])
        self._runner = web.AppRunner(web_app, access_log=None)
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
    ) -> None:
        if app_token is None and not signing_secret:
            raise ConfigurationError(
                "Slack needs RANKZERO_SLACK_SIGNING_SECRET (HTTP mode) or RANKZERO_SLACK_APP_TOKEN "
                "(Socket Mode, xapp-...): find them under Basic Information of your Slack app"
            )
        self.ctx = ctx
        self.platform = SlackPlatform(ctx.client, admin_channel=admin_channel)
        # Socket Mode does not sign requests; Bolt still wants a secret, which is then unused.
        self.bolt = build_bolt_app(ctx, signing_secret or "socket-mode-unsigned")
        self._app_token = app_token
        self.http: SlackHttpServer | None = None if app_token else SlackHttpServer(self.bolt, host, port)
        self._socket: Any = None
        #: What /healthz reports: "not started", "token refused", "listening", "connected", "stopped".
        self.state = "not started"
        #: The bot's own user id (auth.test), e.g. to recognise the bot joining a channel.
        self.bot_user_id = ""

    async def start(self, services: Services) -> None:
        """Check the bot token (auth.test), attach the services, then listen (HTTP) or connect (Socket
        Mode). A refused token is a ConfigurationError, which ``serve`` turns into one line and exit 1.
        """
        await self.check_token()
        self.ctx.bind(services)
        self.ctx.deliveries.log = SqlDeliveryLog(services.app.engine)
        loaded = await disputes.drafts(self.ctx).load()  # admins' drafts from before a restart
        log.info("Slack: %d question drafts loaded", loaded)
        if self.http is not None:
            await self.http.start()
            self.state = "listening"
            log.warning("Slack HTTP mode: listening on port %d at %s", self.http.port, EVENTS_PATH)
            return
        from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler

        self._socket = AsyncSocketModeHandler(self.bolt, self._app_token)
        await self._socket.connect_async()
        self.state = "connected"
        log.warning("Slack Socket Mode: connected")

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
            return {"ok": ok, "mode": "http", "state": self.state if ok else "not listening"}
        client = getattr(self._socket, "client", None)
        connected = False
        if client is not None:
            try:
                connected = bool(await client.is_connected())
            except Exception:  # a half-closed session: report it as down, never fail the health check
                log.debug("socket state unknown", exc_info=True)
        return {"ok": connected, "mode": "socket", "state": "connected" if connected else "disconnected"}

    async def stop(self) -> None:
        """Stop listening or disconnect, cancel pending time-up timers, finish the drafts' writes."""
        self.state = "stopped"
        if self.ctx.bound:
            await disputes.drafts(self.ctx).flush()
        if self.http is not None:
            await self.http.stop()
        if self._socket is not None:
            await self._socket.close_async()
        await self.ctx.stop_timers()


def build_adapter(
    settings: Settings, *, client: AsyncWebClient | None = None, base_url: str | None = None
) -> SlackAdapter:
    """The adapter for ``settings`` (``client``/``base_url`` point the Web API elsewhere, e.g. a fake)."""
    if settings.slack_bot_token is None and client is None:
        raise ConfigurationError("Slack needs RANKZERO_SLACK_BOT_TOKEN (xoxb-..., OAuth & Permissions)")
    if client is None:
        token = settings.slack_bot_token.get_secret_value() if settings.slack_bot_token else None
        kwargs: dict[str, Any] = {"token": token}
        base_url = base_url or settings.slack_api_url
        if base_url:
            kwargs["base_url"] = base_url
        client = AsyncWebClient(**kwargs)
    failures.add_retries(client)
    ctx = SlackContext(client, admins=frozenset(settings.admins), timezone=settings.default_timezone)
    secret = settings.slack_signing_secret.get_secret_value() if settings.slack_signing_secret else None
    app_token = settings.slack_app_token.get_secret_value() if settings.slack_app_token else None
    return SlackAdapter(
        ctx,
        signing_secret=secret,
        app_token=app_token,
        host=settings.slack_host,
        port=settings.slack_port,
        admin_channel=settings.slack_admin_channel_id,
    )
