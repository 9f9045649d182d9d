"""``rankzero serve``: one asyncio process running the enabled chat adapters, the scheduler and /healthz.

The process runner: it binds the health endpoint, starts the adapters, runs the scheduler until SIGINT or
SIGTERM and stops everything in reverse order. What it runs is wired by bot/bootstrap.py
(``build_services``: QuizService + ScheduleService posting through a PlatformRouter that sends each
channel's posts to its adapter, and the RankZeroScheduler).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
import signal
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.adapters.registry import Adapter
from bot.adapters.web.server import WebPageServer
from bot.bootstrap import build_services
from bot.config import Settings
from bot.core.errors import RankZeroError
from bot.core.ports import Clock
from bot.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from bot.metrics import BotMetrics
from bot.scheduling import CANCEL_GRACE_S, RankZeroScheduler
from bot.services import Services

log = logging.getLogger(__name__)

#: The least time a shutdown step gets even when the bound is spent (closing sockets is quick).
MIN_STEP_S = 0.5


class AdapterStartError(RankZeroError):
    """A chat adapter could not start (bad token, platform unreachable): ``serve`` exits with its reason."""


class ShutdownAbandonedError(RankZeroError):
    """``serve`` stopped within its bound (RANKZERO_SHUTDOWN_TIMEOUT_S) by abandoning work still running."""


#: How long /healthz waits for the database's answer (connecting included) before it reports it down.
HEALTH_DB_TIMEOUT_S = 5.0


# ---------------------------------------------------------------------- /healthz
class HealthPortError(RankZeroError):
    """The health port cannot be bound (another ``rankzero serve`` on this host holds it, usually)."""


async def _starting() -> dict[str, Any]:
    return {"ok": False, "state": "starting"}


#: How long a client may take to send its request line and headers, and how many header lines it may send.
HEAD_TIMEOUT_S = 5.0
MAX_HEADER_LINES = 64

#: Paths answered with the whole report (200 when ``ok``, else 503): ``/readyz`` for an orchestrator's
#: readiness probe, ``/healthz`` as before.
REPORT_PATHS = frozenset({"/healthz", "/readyz"})


class HealthServer:
    """Health over HTTP: ``GET /healthz`` and ``GET /readyz`` (scheduler state, next runs, database
    reachability, adapters: 200 or 503), ``GET /livez`` (200 whenever the event loop answers) and, given
    ``metrics``, ``GET /metrics`` (Prometheus' text format; bot/metrics.py).

    ``/livez`` is the liveness probe: it asks nothing of the database or the platforms, so an outage of
    either never restarts the process (a restart would not fix them); a stuck event loop fails it.
    ``/metrics`` needs no credentials, like the probes: its labels name platforms, post and job kinds and
    API routes, never a tenant, a user or a token, and its size does not grow with them.
    ``serve`` binds it before anything else (so a second process on the host stops before it migrates,
    posts or connects to a platform); until the scheduler runs the report answers 503 ``starting``.
    """

    def __init__(
        self,
        report: Callable[[], Awaitable[dict[str, Any]]] | None,
        port: int,
        host: str = "127.0.0.1",
        metrics: BotMetrics | None = None,
    ) -> None:
        self._report = report or _starting
        self._metrics = metrics
        self._port = port
        self._host = host
        self._server: asyncio.Server | None = None
        #: The report being computed: every request meanwhile waits for it, so a flood of probes holds
        #: at most one database connection at a time (not one each, out of the pool players need).
        self._computing: asyncio.Future[dict[str, Any]] | None = None

    def set_report(self, report: Callable[[], Awaitable[dict[str, Any]]]) -> None:
        """Answer with ``report`` from now on (once the scheduler runs)."""
        self._report = report
        self._computing = None

    async def shared_report(self) -> dict[str, Any]:
        """The report, computed once at a time: requests arriving while it is computed share it."""
        if self._computing is None or self._computing.done():
            self._computing = asyncio.ensure_future(self._report())
        # Shielded: a prober that hangs up does not cancel the check the others are waiting for.
        return await asyncio.shield(self._computing)

    @property
    def port(self) -> int:
        """The bound port (useful with port 0 in tests)."""
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self) -> None:
        """Listen on the host and port; HealthPortError (one clear line) when the port is taken."""
        try:
            self._server = await asyncio.start_server(self._handle, self._host, self._port)
        except OSError as exc:
            raise HealthPortError(
                f"the health port {self._host}:{self._port} cannot be opened ({exc.strerror or exc}): "
                "another `rankzero serve` on this host uses it? Give each one its own RANKZERO_HEALTH_PORT, "
                "or 0 for no health endpoint"
            ) from None

    async def stop(self) -> None:
        """Stop listening."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            # One bound for the whole request head, and a cap on its lines: a prober sends a few, and a
            # client trickling header lines must not hold the handler (the port may face a pod network).
            async with asyncio.timeout(HEAD_TIMEOUT_S):
                request = await reader.readline()
                for _ in range(MAX_HEADER_LINES):
                    if await reader.readline() in (b"\r\n", b"\n", b""):
                        break  # headers are not needed
                else:
                    return
            parts = request.decode(errors="replace").split()
            path = parts[1].split("?")[0] if len(parts) >= 2 else ""
            body: dict[str, Any]
            served = {*REPORT_PATHS, "/livez", *(("/metrics",) if self._metrics is not None else ())}
            if len(parts) >= 2 and parts[0] == "GET" and path == "/metrics" and self._metrics is not None:
                await self._send(writer, "200 OK", self._metrics.render(), METRICS_CONTENT_TYPE)
                return
            if len(parts) < 2 or parts[0] != "GET" or path not in served:
                status, body = "404 Not Found", {"error": f"only GET {', '.join(sorted(served))} are served"}
            elif path == "/livez":
                status, body = "200 OK", {"ok": True, "alive": True}
            else:
                body = await self.shared_report()
                status = "200 OK" if body["ok"] else "503 Service Unavailable"
            await self._send(writer, status, json.dumps(body).encode(), "application/json")
        except (TimeoutError, ConnectionError, ValueError):  # ValueError: a line over the reader's limit
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    @staticmethod
    async def _send(writer: asyncio.StreamWriter, status: str, payload: bytes, content_type: str) -> None:
        head = (
            f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n"
        )
        writer.write(head.encode() + payload)
        await writer.drain()


async def health_report(
    engine: AsyncEngine, scheduler: RankZeroScheduler, adapters: Sequence[Adapter] = ()
) -> dict[str, Any]:
    """The /healthz body: ``ok`` is false when the database does not answer (within
    :data:`HEALTH_DB_TIMEOUT_S`), the scheduler stopped, a scheduled job is failing (it is being retried;
    ``scheduler.failing`` says which and why; a job cancelled at its deadline is one), a job is stuck past
    its deadline (``scheduler.stuck``), or an adapter that reports its state (``async health() -> {"ok":
    ...}``) says it is down.

    A job's error stays only while the job fails: once its retry succeeds it is gone, so the report never
    shows an old error beside ``ok: true``.
    """
    database: dict[str, Any] = {"ok": True}
    try:
        # The bound covers the connect and the pool checkout too: a frozen server holds either as long as
        # a statement, and the report must come back while the prober still waits for it.
        async with asyncio.timeout(HEALTH_DB_TIMEOUT_S), engine.connect() as conn:
            await conn.execute(text("SELECT 1"))
    except TimeoutError:
        database = {"ok": False, "error": f"no answer within {HEALTH_DB_TIMEOUT_S:g} s"}
    except Exception as exc:  # any failure means unreachable; the message says which
        database = {"ok": False, "error": f"{type(exc).__name__}: {exc}".splitlines()[0][:300]}
    state = scheduler.state()
    report: dict[str, Any] = {"database": database, "scheduler": state}
    platforms: dict[str, Any] = {}
    for adapter in adapters:
        health = getattr(adapter, "health", None)
        if callable(health):
            # Slack reports through a coroutine (it may ask its socket), Discord synchronously.
            found = health()
            platforms[adapter.name] = await found if inspect.isawaitable(found) else found
    if platforms:
        report["adapters"] = platforms
    up = all(p.get("ok") for p in platforms.values())
    ok = (
        database["ok"]
        and state["state"] == "running"
        and not state.get("failing")
        and not state.get("stuck")
        and up
    )
    return {"ok": ok, **report}


# ---------------------------------------------------------------------- main loop
async def _start_adapters(
    adapters: Sequence[Adapter], services: Services, started: list[Adapter], stop: asyncio.Event
) -> bool:
    """Start the adapters in order (appending each to ``started``); False if ``stop`` was set first.

    An adapter may keep retrying a platform it cannot reach (Slack Socket Mode does, forever), so the
    start races the stop signal: SIGTERM from a supervisor must end the process in every state.
    """

    async def start_all() -> None:
        for adapter in adapters:
            await _start_adapter(adapter, services)
            started.append(adapter)

    starting = asyncio.ensure_future(start_all())
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({starting, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
    if starting.done():
        starting.result()  # an AdapterStartError propagates
        return True
    log.warning("rankzero serve: stop requested while the chat adapters were starting")
    starting.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await starting
    return False


async def _start_adapter(adapter: Adapter, services: Services) -> None:
    """Start one adapter; a failure stops what it opened and becomes one clear AdapterStartError."""
    try:
        await adapter.start(services)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            await adapter.stop()  # stopped while connecting: close what it opened
        raise
    except Exception as exc:  # login refused, DNS, connection: all mean "this platform is not reachable"
        log.debug("the %s adapter failed to start", adapter.name, exc_info=True)
        with contextlib.suppress(Exception):
            await adapter.stop()  # e.g. close the HTTP session a failed login left open
        raise AdapterStartError(
            f"the {adapter.name} adapter could not start ({type(exc).__name__}: {exc}); check its "
            "token and that the platform is reachable from this machine"
        ) from None


async def open_health(settings: Settings, metrics: BotMetrics | None = None) -> HealthServer | None:
    """Bind /healthz (answering ``starting``) and /metrics if a port is set: the first thing serve does."""
    if not settings.health_port:
        return None
    health = HealthServer(None, settings.health_port, settings.health_host, metrics)
    await health.start()
    log.info(
        "health endpoint on http://%s:%d/healthz (and /readyz, /livez, /metrics)",
        settings.health_host,
        health.port,
    )
    return health


class WebPortError(RankZeroError):
    """The web page's port cannot be bound."""


async def open_web(settings: Settings, services: Services) -> WebPageServer | None:
    """Serve the read-only web page (bot/adapters/web) when it is on (RANKZERO_WEB_SECRET and
    RANKZERO_PUBLIC_URL); None when it is off.
    """
    if services.web_links is None:
        return None
    page = WebPageServer(
        services.web_links,
        services.quiz,
        host=settings.web_host,
        port=settings.web_port,
        timezone=settings.default_timezone,
        allowed=settings.tenant_allow_list,
    )
    try:
        await page.start()
    except OSError as exc:
        raise WebPortError(
            f"the web page's port {settings.web_host}:{settings.web_port} cannot be opened "
            f"({exc.strerror or exc}): give it another RANKZERO_WEB_PORT"
        ) from None
    log.info(
        "web page on http://%s:%d/web/ (links point at %s)", settings.web_host, page.port, settings.public_url
    )
    return page


async def serve(
    settings: Settings,
    adapters: Sequence[Adapter],
    *,
    clock: Clock | None = None,
    migrate: bool = True,
    health: HealthServer | None = None,
    metrics: BotMetrics | None = None,
) -> None:
    """Run until SIGINT/SIGTERM: adapters, scheduler and /healthz in one event loop.

    ``health``: the endpoint the caller bound already (else it is bound here, before anything else).
    ``metrics``: the process's metrics, the ones ``health`` serves (default: new ones, served here).
    """
    metrics = metrics or BotMetrics()
    health = health or await open_health(settings, metrics)
    try:
        services = await build_services(settings, adapters, clock=clock, migrate=migrate, metrics=metrics)
    except BaseException:
        if health is not None:
            await health.stop()
        raise
    try:
        page = await open_web(settings, services)
    except BaseException:
        if health is not None:
            await health.stop()
        await services.app.close()
        raise
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    started: list[Adapter] = []
    try:
        # Both starts race the stop signal: an adapter may retry an unreachable platform for ever, and the
        # scheduler's start reads the database (overdue windows, missed posts), which may not answer.
        if await _start_adapters(adapters, services, started, stop) and await _until_stopped(
            services.scheduler.start(), stop, "the scheduler was starting"
        ):
            if health is not None:
                health.set_report(lambda: health_report(services.app.engine, services.scheduler, started))
            names = ", ".join(a.name for a in adapters)
            log.warning("rankzero serve: running (%s); jobs: %s", names, services.scheduler.state()["jobs"])
            await stop.wait()
    finally:
        log.warning("rankzero serve: stopping")
        if page is not None:
            await page.stop()  # bounded by its runner's own shutdown timeout
        abandoned = await _shutdown(settings.shutdown_timeout_s, health, services, started)
    if abandoned:
        # Reached only after a requested stop (an error on its way out is the one reported): exit 1.
        raise ShutdownAbandonedError(
            f"stopped within {settings.shutdown_timeout_s:g} s (RANKZERO_SHUTDOWN_TIMEOUT_S) by abandoning: "
            f"{', '.join(abandoned)}"
        )


async def _until_stopped(work: Awaitable[None], stop: asyncio.Event, what: str) -> bool:
    """Run ``work`` unless ``stop`` is set first (then cancel it and return False)."""
    working = asyncio.ensure_future(work)
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({working, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
    if working.done():
        working.result()
        return True
    log.warning("rankzero serve: stop requested while %s", what)
    working.cancel()
    await asyncio.wait({working}, timeout=CANCEL_GRACE_S)
    return False


async def _shutdown(
    timeout_s: float, health: HealthServer | None, services: Services, started: Sequence[Adapter]
) -> list[str]:
    """Stop the health endpoint, the scheduler, the adapters and the database within ``timeout_s``.

    Each step gets what is left of the bound (the scheduler all but a reserve for the others); a step that
    overruns is abandoned, named in the returned list and in one log line, and the next step runs.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    # Adapters and the engine get a share of their own: a scheduler that needs all its time must not
    # leave a chat connection open or the pool undisposed.
    reserve = min(5.0, timeout_s / 3)
    abandoned: list[str] = []
    if health is not None:
        await health.stop()
    # The scheduler's own cancel grace comes out of its share too.
    wait = max(0.0, deadline - reserve - CANCEL_GRACE_S - loop.time())
    for job in await services.scheduler.shutdown(wait):
        abandoned.append(f"scheduled {job}")
    steps: list[tuple[str, Callable[[], Awaitable[None]]]] = [
        (f"stopping the {a.name} adapter", a.stop) for a in reversed(started)
    ]
    steps.append(("closing the database connections", services.app.close))
    for what, step in steps:
        try:
            async with asyncio.timeout_at(max(deadline, loop.time() + MIN_STEP_S)):
                await step()
        except TimeoutError:
            abandoned.append(what)
        except Exception:  # one step's failure must not keep the others from running
            log.warning("rankzero serve: %s failed", what, exc_info=True)
    if abandoned:
        log.error(
            "rankzero serve: stopped within %g s; abandoned: %s (the database or a platform did not answer)",
            timeout_s,
            ", ".join(abandoned),
        )
    else:
        log.warning("rankzero serve: stopped")
    return abandoned
