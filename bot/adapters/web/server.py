"""The read-only web page's HTTP server (issue 30 §3): ``GET /web/<token>`` in ``rankzero serve``.

A token (bot/core/web_links.py) names one channel of one tenant and its expiry under an HMAC of the
server's secret; the page reads that channel only. A forged or altered link gets 403, an expired one 410,
each with a plain page saying to ask the bot again; a tenant no longer served (RANKZERO_ALLOWED_TENANTS)
gets 403 too. Every answer, refusals included, carries a strict Content-Security-Policy (no script, the
one stylesheet by hash, images only inline), ``nosniff``, ``Referrer-Policy: no-referrer`` (the token is
in the URL) and ``Cache-Control: private, no-store``. Only GET and HEAD are served; a request line with a
long path or query is refused before anything is read.

It listens on its own port (RANKZERO_WEB_HOST/RANKZERO_WEB_PORT) rather than the health port (loopback,
for probes, with no TLS proxy in front) or Slack's (which exists only in Slack HTTP mode).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from aiohttp import web

from bot.adapters import charts
from bot.adapters.chart_drawing import ChartUnavailableError, draw
from bot.adapters.web.page import STYLE_HASH, channel_document, refusal_page
from bot.core.errors import RankZeroError
from bot.core.service import QuizService
from bot.core.tenancy import TenantAllowList
from bot.core.web_links import ASK_AGAIN, PATH_PREFIX, LinkRefusedError, LinkTarget, WebLinks
from bot.core.web_page import channel_page

log = logging.getLogger(__name__)

#: The longest path plus query answered (a link is ~200 characters); longer is 414 before any work.
MAX_TARGET = 1024
#: Pages drawn at once (each reads the database and draws a heatmap); more wait, up to the queue bound.
MAX_AT_ONCE = 4
#: Requests waiting for a drawing slot before new ones are told to come back (503).
MAX_WAITING = 32

#: Seconds a page being drawn gets to finish when serve stops (aiohttp's default is 60).
STOP_S = 2.0

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        f"default-src 'none'; img-src data:; style-src {STYLE_HASH}; base-uri 'none'; "
        "form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "private, no-store",
    "X-Frame-Options": "DENY",
}

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def html_response(status: int, text: str) -> web.Response:
    """An HTML answer with the security headers."""
    return web.Response(
        status=status, text=text, content_type="text/html", charset="utf-8", headers=SECURITY_HEADERS
    )


def refused(status: int, title: str, message: str) -> web.Response:
    """A plain refusal page saying what to do."""
    return html_response(status, refusal_page(title, message, ASK_AGAIN))


@web.middleware
async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Bounds and methods first; aiohttp's own errors (404, 405) become plain pages with the headers."""
    if len(request.raw_path) > MAX_TARGET:
        return refused(414, "Link too long", "this address is longer than any RankZero link")
    if request.method not in ("GET", "HEAD"):
        response = refused(405, "Read-only", "this page can only be read")
        response.headers["Allow"] = "GET, HEAD"
        return response
    try:
        return await handler(request)
    except web.HTTPException as exc:
        return refused(exc.status, exc.reason, "there is no page at this address")
    except Exception:  # a bug or a database error: logged here, never a traceback to the browser
        log.exception("the web page failed")
        return refused(500, "Not available", "the page could not be drawn; reload in a minute")


class WebPageServer:
    """Serves the pages of the links ``links`` signs, reading through ``quiz``."""

    def __init__(
        self,
        links: WebLinks,
        quiz: QuizService,
        *,
        host: str = "127.0.0.1",
        port: int = 8790,
        timezone: str = "UTC",
        allowed: TenantAllowList | None = None,
    ) -> None:
        self.links = links
        self.quiz = quiz
        self.timezone = timezone
        self.allowed = allowed or TenantAllowList()
        self._host = host
        self._port = port
        self._runner: web.AppRunner | None = None
        self._slots = asyncio.Semaphore(MAX_AT_ONCE)
        self._waiting = 0

    def app(self) -> web.Application:
        """The aiohttp application (tests drive it with aiohttp's test client)."""
        # No body is read: GET and HEAD only; a small cap for anything aiohttp reads anyway.
        web_app = web.Application(client_max_size=4096, middlewares=[guard])
        web_app.add_routes([web.get(PATH_PREFIX + "{token}", self._page)])
        return web_app

    async def _page(self, request: web.Request) -> web.Response:
        try:
            target = self.links.check(request.match_info["token"])
        except LinkRefusedError as exc:
            if exc.expired:
                return refused(410, "Link expired", str(exc))
            return refused(403, "Link refused", str(exc))
        if not self.allowed.allows(target.channel().tenant):
            return refused(403, "Link refused", "this bot no longer serves that server or workspace")
        if self._waiting >= MAX_WAITING:
            response = refused(503, "Busy", "too many pages are being drawn right now; reload in a minute")
            response.headers["Retry-After"] = "30"
            return response
        self._waiting += 1
        try:
            async with self._slots:
                return await self._draw(target)
        finally:
            self._waiting -= 1

    async def _draw(self, target: LinkTarget) -> web.Response:
        try:
            page = await channel_page(self.quiz, target, self.timezone)
        except RankZeroError as exc:  # e.g. the database's timeout, told as the bot tells it
            log.warning("the web page of %s could not be read: %s", target.platform, exc)
            return refused(503, "Not available", "the page could not be read; reload in a minute")
        heatmap: tuple[bytes, str] | None = None
        why: str | None = None
        if page.report.cells:
            try:
                chart = await draw(charts.team_heatmap, page.report)
                heatmap = (chart.png, chart.alt_text)
            except ChartUnavailableError as exc:
                why = str(exc)
        return html_response(200, channel_document(page, heatmap, why))

    @property
    def port(self) -> int:
        """The bound port (useful with port 0)."""
        assert self._runner is not None
        for address in self._runner.addresses:
            return int(address[1])
        raise RuntimeError("not listening")

    async def start(self) -> None:
        """Listen on the host and port."""
        # No access log: every line would hold a token, a credential until it expires.
        self._runner = web.AppRunner(self.app(), access_log=None, shutdown_timeout=STOP_S)
        await self._runner.setup()
        try:
            await web.TCPSite(self._runner, self._host, self._port).start()
        except BaseException:  # a taken port: release what setup opened before the caller says why
            await self.stop()
            raise

    async def stop(self) -> None:
        """Stop listening."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
