"""HTTP API: ``POST /v1/runs`` answers a verdict, ``GET /v1/health`` the runner's capabilities.

The request and response models below are the contract: the OpenAPI schema FastAPI derives from them
(``GET /openapi.json``, with the token) is what the bot's client is tested against
(tests/bot/test_runner_contract.py); runner/README.md documents it for people.  The server side of abuse
(idle connections, slow headers, descriptor exhaustion) is handled by :func:`server_config`.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import resource
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any, Literal

import h11
import uvicorn
from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ConfigDict, Field
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.config import LOGGING_CONFIG
from uvicorn.protocols.http.h11_impl import H11Protocol

from runner.config import MAX_CODE_BYTES
from runner.logs import REQUEST_ID
from runner.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from runner.metrics import RunnerMetrics
from runner.service import RunnerService, RunRequest
from runner.verdict import Mode

log = logging.getLogger(__name__)

# The whole body may carry JSON escapes around the code (a NUL is 6 bytes as \u0000): allow some slack
# for them, and refuse anything bigger before reading it.
MAX_BODY_BYTES = 8 * MAX_CODE_BYTES
UNAUTHORIZED = "missing or wrong bearer token"


# --- the contract ----------------------------------------------------------------------------------------


class RunBody(BaseModel):
    """Body of ``POST /v1/runs``."""

    model_config = ConfigDict(extra="forbid")

    code: str = Field(description="The snippet, run as the file main.py (__name__ == '__main__').")
    mode: Literal["python", "dp", "ddp"] = "python"
    nproc: int = Field(default=1, ge=1, le=64, description="Ranks for ddp; python and dp always run 1.")
    backend: Literal["auto", "gloo", "nccl"] = "auto"
    timeout_s: float | None = Field(default=None, gt=0, le=3600, description="Default: the runner's.")
    init_process_group: bool = False


class HardwareModel(BaseModel):
    """What the runner executes on."""

    gpus: int
    names: list[str]
    torch: str
    cuda: str | None


class SandboxModel(BaseModel):
    """Which sandbox engine ran the job and whether it really isolated it."""

    engine: str
    isolated: bool


class ExceptionModel(BaseModel):
    """The exception a rank died of; ``line`` in the snippet, or null if raised elsewhere."""

    type: str
    message: str
    line: int | None


class ChildStuckAtModel(BaseModel):
    """Where a process the rank started (an mp.spawn child) was blocked."""

    pid: int
    function: str
    line: int
    call: str | None


class StuckAtModel(BaseModel):
    """Where a stopped rank was blocked, and where the processes it started were."""

    function: str
    line: int
    call: str | None
    children: list[ChildStuckAtModel] = []


class RankModel(BaseModel):
    """One rank's exit, output and diagnosis."""

    rank: int
    exit_code: int | None
    signal: int | None
    stdout: str
    stderr: str
    truncated: bool
    exception: ExceptionModel | None
    stuck_at: StuckAtModel | None


class VerdictModel(BaseModel):
    """The answer to one run (job failures are verdicts too)."""

    status: Literal["ok", "error", "timeout", "crashed", "oom", "output_limit", "unsupported", "rejected"]
    mode: Literal["python", "dp", "ddp"]
    nproc: int
    backend: str | None
    elapsed_s: float
    hardware: HardwareModel
    sandbox: SandboxModel
    root_cause_rank: int | None
    notes: list[str]
    ranks: list[RankModel]


class RefillModel(BaseModel):
    """The warm pool's refill: failures are retried with back-off."""

    ok: bool
    consecutive_failures: int
    last_error: str | None
    last_error_at: str | None = Field(description="ISO 8601, UTC")
    retry_in_s: float | None


class PoolModel(BaseModel):
    """Warm sandboxes by capacity (the most ranks one can fork)."""

    targets: dict[str, int]
    ready: dict[str, int]
    warming: dict[str, int]
    served_warm: int
    served_cold: int
    served_light: int
    served_claimed: int = Field(
        description="jobs that found no ready sandbox and took the one being warmed (in served_warm too)"
    )
    waited_s: float = Field(description="seconds jobs waited for a warm-up (claimed or cold), all together")
    refill: RefillModel


class HealthSandboxModel(SandboxModel):
    """Sandbox engine, plus the cgroup version in use (0 = none)."""

    cgroup: int


class LimitsModel(BaseModel):
    """Limits of this runner."""

    max_nproc: int
    max_timeout_s: float
    default_timeout_s: float
    memory_mb_per_rank: int
    max_code_bytes: int
    output_cap_bytes: int


class CapacityModel(BaseModel):
    """How much work this runner takes: what a bot routing between several runners reads."""

    cpu_cores: int = Field(description="CPU affinity, capped by the container's cgroup v2 CPU quota")
    max_concurrent_jobs: int = Field(description="jobs run at once (--max-concurrent); more wait")
    free_slots: int = Field(description="max_concurrent_jobs less the jobs running or waiting, at least 0")
    queued_jobs: int = Field(description="jobs admitted that wait for a slot")


class HealthModel(BaseModel):
    """``GET /v1/health``: ``status`` is ``degraded`` while the warm pool cannot refill (jobs still run)."""

    status: Literal["ok", "degraded"]
    hardware: HardwareModel
    test_advertised: bool = Field(
        description="true when `hardware` is a shape given by --test-advertise-gpus (testing only), "
        "not what the runner really has"
    )
    capacity: CapacityModel
    backends: list[str]
    modes: list[str]
    sandbox: HealthSandboxModel
    pool: PoolModel
    limits: LimitsModel
    running_jobs: int


class ErrorModel(BaseModel):
    """A refused request."""

    detail: str


class FieldErrorModel(BaseModel):
    """One invalid field: ``loc`` names it (``["nproc"]``)."""

    loc: list[str | int]
    msg: str
    type: str


class ValidationErrorModel(BaseModel):
    """A request whose fields are missing, of the wrong type, out of range or unknown."""

    detail: list[FieldErrorModel]


# --- authentication --------------------------------------------------------------------------------------


def _token_ok(header: str | None, token: str | None) -> bool:
    if token is None:
        return True
    scheme, _, given = (header or "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode())


class _TokenFirst:
    """Refuse a request without the token before anything reads its body (ASGI middleware).

    The route dependency (HTTPBearer) checks again and documents the scheme in the OpenAPI schema; this
    layer only makes sure that an unauthenticated client cannot make the server parse anything.
    """

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not (scope.get("method") == "GET" and scope.get("path") in OPEN_PATHS):
            header = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"authorization"), None)
            if not _token_ok(header, self.token):
                response = JSONResponse(
                    {"detail": UNAUTHORIZED}, status_code=401, headers={"WWW-Authenticate": "Bearer"}
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


# The kubelet's probes carry no token; these two answer with nothing about the host or its jobs.
PROBES = frozenset({"/livez", "/readyz"})
# /metrics needs no token either: the bearer token lets its holder run code here, and a scraper must not
# need that. The page holds counts and latencies under bounded labels (runner/metrics.py), nothing a job
# printed; deploy/'s NetworkPolicy should let only the bot and the monitoring system reach the port.
OPEN_PATHS = PROBES | {"/metrics"}

BEARER = HTTPBearer(auto_error=False, description="The runner's token (RANKZERO_RUNNER_TOKEN).")


class RequireToken:
    """Route dependency: the bearer token (documented in the OpenAPI schema as the HTTPBearer scheme)."""

    def __init__(self, token: str | None) -> None:
        self.token = token

    async def __call__(
        self, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(BEARER)]
    ) -> None:
        """Refuse with 401 unless the token matches (or the server has none)."""
        given = f"Bearer {credentials.credentials}" if credentials is not None else None
        if not _token_ok(given, self.token):
            raise HTTPException(401, UNAUTHORIZED, headers={"WWW-Authenticate": "Bearer"})


# --- the app ---------------------------------------------------------------------------------------------


def _field_errors(exc: RequestValidationError) -> JSONResponse:
    """Map FastAPI's validation failure onto the contract: 400 for a body that is no JSON object, else 422.

    The offending input is never echoed back (it may be large or deeply nested).
    """
    errors = list(exc.errors())
    for error in errors:
        loc = tuple(error.get("loc", ()))
        if error.get("type") == "json_invalid":
            reason = (error.get("ctx") or {}).get("error", "JSON decode error")
            return JSONResponse({"detail": f"body is not valid JSON: {reason} at {loc[-1]}"}, status_code=400)
        if loc == ("body",) and error.get("type") in ("model_attributes_type", "dict_type", "missing"):
            return JSONResponse({"detail": "body must be a JSON object"}, status_code=400)
    fields = [
        {
            "loc": [p for p in error.get("loc", ()) if p != "body"][:8],
            "msg": str(error.get("msg", ""))[:300],
            "type": str(error.get("type", "")),
        }
        for error in errors[:20]
    ]
    return JSONResponse({"detail": fields}, status_code=422)


def create_app(
    service: RunnerService,
    token: str | None,
    manage_service: bool = True,
    metrics: RunnerMetrics | None = None,
) -> FastAPI:
    """Build the app. With ``manage_service`` the app starts and stops the service with its lifespan.
    ``metrics``: what ``GET /metrics`` serves (default: a registry of this app's own).

    The interactive docs (/docs, /redoc) are off; the schema is served at ``/openapi.json`` to token
    holders only.

    Over 60 lines (about 100) because FastAPI's routes are closures over ``service`` and ``token`` declared in
    the factory; each route itself is a few lines, and splitting the factory would only pass both around.
    """

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if manage_service:
            service.start()
        try:
            yield
        finally:
            if manage_service:
                service.close()

    app = FastAPI(
        title="RankZero runner",
        version="1",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        max_body_size=MAX_BODY_BYTES,
        # Clients send no cookies and the token is a header a browser cannot add cross-site, so a body
        # without a Content-Type is parsed as JSON, as the contract always allowed.
        strict_content_type=False,
    )
    app.add_middleware(_TokenFirst, token=token)
    metrics = metrics or RunnerMetrics(service)
    auth = [Depends(RequireToken(token))]
    refused: dict[int | str, dict[str, Any]] = {401: {"model": ErrorModel, "description": UNAUTHORIZED}}

    @app.exception_handler(RequestValidationError)
    async def validation_failed(_: Request, exc: RequestValidationError) -> JSONResponse:
        return _field_errors(exc)

    @app.get("/openapi.json", include_in_schema=False, dependencies=auth)
    async def openapi() -> JSONResponse:
        """The OpenAPI schema (the contract), for token holders."""
        return JSONResponse(app.openapi())

    @app.get("/livez", include_in_schema=False)
    async def livez() -> JSONResponse:
        """Liveness, without a token: the event loop answers (a stuck loop fails the probe)."""
        return JSONResponse({"status": "alive"})

    @app.get("/readyz", include_in_schema=False)
    async def readyz() -> JSONResponse:
        """Readiness, without a token: the warm pool has warmed a sandbox and its refill is not failing."""
        ready, reason = service.pool.readiness()
        return JSONResponse(
            {"status": "ready" if ready else "not ready", "reason": reason}, status_code=200 if ready else 503
        )

    @app.get("/metrics", include_in_schema=False)
    async def prometheus() -> Response:
        """Prometheus metrics, without a token (see OPEN_PATHS)."""
        return Response(metrics.render(), media_type=METRICS_CONTENT_TYPE)

    @app.get("/v1/health", response_model=HealthModel, dependencies=auth, responses=refused)
    async def health() -> Any:
        """Capabilities: hardware, backends, sandbox engine, pool state, limits."""
        return service.health()

    @app.post(
        "/v1/runs",
        response_model=VerdictModel,
        dependencies=auth,
        responses={
            **refused,
            400: {"model": ErrorModel, "description": "the body is not a JSON object"},
            413: {"model": ErrorModel, "description": "code over 64 KiB, or a body over 512 KiB"},
            503: {"model": ErrorModel, "description": "no sandbox can be started now; nothing ran"},
            422: {"model": ValidationErrorModel, "description": "a field is missing, wrong or unknown"},
        },
    )
    async def create_run(body: RunBody) -> Any:
        """Run a snippet and answer its verdict (job failures are verdicts with HTTP 200)."""
        if len(body.code.encode("utf-8", "surrogatepass")) > MAX_CODE_BYTES:
            return JSONResponse(
                {"detail": f"code is over {MAX_CODE_BYTES} bytes ({MAX_CODE_BYTES // 1024} KiB)"},
                status_code=413,
            )
        request = RunRequest(
            code=body.code,
            mode=Mode(body.mode),
            nproc=body.nproc,
            backend=body.backend,
            timeout_s=body.timeout_s,
            init_process_group=body.init_process_group,
        )
        started = time.monotonic()
        # This request's log lines (and its job thread's: to_thread copies the context) carry its id.
        REQUEST_ID.set(f"run:{uuid.uuid4().hex[:12]}")
        try:
            verdict = await service.run_async(request)
        except (OSError, RuntimeError) as exc:
            # No sandbox could be started (descriptors or memory exhausted, bwrap failing): nothing ran,
            # so this is no verdict; the client may retry later.
            metrics.refused.inc()
            log.error("run refused, no sandbox: %s", exc)
            return JSONResponse(
                {"detail": f"the runner cannot start a sandbox now ({type(exc).__name__}: {str(exc)[:300]})"},
                status_code=503,
                headers={"Retry-After": "5"},
            )
        metrics.verdict(verdict, time.monotonic() - started)
        log.info("run mode=%s nproc=%d -> %s", body.mode, body.nproc, verdict.status.value)
        return verdict.to_dict()

    return app


# --- the server ------------------------------------------------------------------------------------------


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline for each request and a cap on open connections.

    uvicorn has neither: about 1,000 connections that never finish their headers held as many descriptors
    until the runner could not open the pipes of a job.  Here a request (headers and body) must arrive
    within ``request_timeout_s`` of the connection, or of the previous response on a kept-alive one, or
    the connection is closed.  Over ``max_connections``, the longest-waiting connection that has not sent
    a whole request yet is closed to make room (the newcomer if there is none), so a flood of idle
    connections can neither exhaust descriptors nor lock out clients that send their request at once.
    Configure through :func:`server_config`.
    """

    request_timeout_s = 10.0
    max_connections = 256

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Accept, arm the request deadline, and make room if over the cap."""
        self.accepted_at = time.monotonic()
        self.request_timer: asyncio.TimerHandle | None = None
        super().connection_made(transport)
        if len(self.connections) > self.max_connections:
            waiting = [
                c
                for c in self.connections
                if isinstance(c, GuardedH11Protocol) and c is not self and c.request_timer is not None
            ]
            victim = min(waiting, key=lambda c: c.accepted_at) if waiting else self
            log.warning("over %d connections: closing a connection without a request", self.max_connections)
            victim.transport.abort()
            if victim is self:
                return
        self._arm()

    def data_received(self, data: bytes) -> None:
        """Parse as uvicorn does; the deadline ends once the whole request has arrived."""
        super().data_received(data)
        if self.conn.their_state not in (h11.IDLE, h11.SEND_BODY):
            self._disarm()

    def on_response_complete(self) -> None:
        """A kept-alive connection gets a fresh deadline for its next request."""
        super().on_response_complete()
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        """Forget the deadline."""
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self.accepted_at = time.monotonic()
        self.request_timer = self.loop.call_later(self.request_timeout_s, self._too_slow)

    def _disarm(self) -> None:
        timer = getattr(self, "request_timer", None)
        if timer is not None:
            timer.cancel()
        self.request_timer = None

    def _too_slow(self) -> None:
        self.request_timer = None
        if not self.transport.is_closing():
            self.transport.abort()


def descriptor_budget(max_concurrent_jobs: int, max_nproc: int, pooled: int) -> int:
    """Descriptors the runner itself needs, beside its connections.

    Every job and warm sandbox holds 3 pipes per rank and a few more (twice as many while a sandbox
    starts), plus the interpreter's own.
    """
    per_sandbox = 2 * (3 * max_nproc + 4)
    return 128 + (max_concurrent_jobs + pooled + 1) * per_sandbox


def server_config(
    app: FastAPI,
    host: str,
    port: int,
    *,
    max_connections: int,
    request_timeout_s: float,
    reserved_fds: int,
    log_level: str = "info",
    own_log_config: bool = True,
) -> uvicorn.Config:
    """A uvicorn configuration that bounds what clients can hold: connections, time, header sizes.

    Raises the soft descriptor limit to the hard one, and clamps ``max_connections`` (with a warning) so
    that connections can never take the descriptors the jobs need; refuses (ValueError) when even 16
    connections would not fit. ``own_log_config``: uvicorn's own log handlers (else its loggers go
    through the root logger's, e.g. the JSON lines of runner/logs.py).
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        soft = hard
    room = soft - reserved_fds
    if room < 16:
        raise ValueError(
            f"the descriptor limit ({soft}) leaves no room for connections after the {reserved_fds} the "
            "jobs need: raise it (ulimit -n) or lower --max-concurrent"
        )
    if max_connections > room:
        log.warning(
            "--max-connections %d clamped to %d by the descriptor limit %d", max_connections, room, soft
        )
        max_connections = room
    protocol = type(
        "RunnerH11Protocol",
        (GuardedH11Protocol,),
        {"request_timeout_s": request_timeout_s, "max_connections": max_connections},
    )
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        http=protocol,
        log_level=log_level,
        log_config=LOGGING_CONFIG if own_log_config else None,
        timeout_keep_alive=5,
        # Every request is one JSON body under 512 KiB: headers beyond 16 KiB are refused with 400.
        h11_max_incomplete_event_size=16 * 1024,
        # Connections and requests in flight; over it uvicorn answers 503 rather than queueing more.
        limit_concurrency=max_connections + 16,
        backlog=128,
        server_header=False,
    )
