"""HttpRunnerClient: the RunnerClient port over the runner's HTTP contract (runner/README.md).

Connection failures are retried a few times (the runner may be restarting); HTTP answers are never
retried: a verdict is final, and a 4xx says the request itself is wrong. Every failure becomes a
RunnerUnavailableError that says what went wrong and which setting fixes it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import shutil
import socket
import sys
from pathlib import Path
from typing import Any

import httpx

from bot.core.errors import RunnerUnavailableError
from bot.core.verdicts import (
    Hardware,
    RankException,
    RankOutcome,
    RunnerHealth,
    RunSpec,
    RunVerdict,
    StuckAt,
)

log = logging.getLogger(__name__)

#: Seconds the runner may take beyond a job's own timeout (it answers within timeout + 3 s, plus HTTP).
RESPONSE_SLACK_S = 15.0
#: The contract's keys this client reads (the contract test checks the runner sends exactly these).
VERDICT_KEYS = frozenset(
    {
        "status",
        "mode",
        "nproc",
        "backend",
        "elapsed_s",
        "hardware",
        "sandbox",
        "root_cause_rank",
        "notes",
        "ranks",
    }
)
RANK_KEYS = frozenset(
    {"rank", "exit_code", "signal", "stdout", "stderr", "truncated", "exception", "stuck_at"}
)
HARDWARE_KEYS = frozenset({"gpus", "names", "torch", "cuda"})
HEALTH_KEYS = frozenset(
    {
        "status",
        "hardware",
        "test_advertised",
        "capacity",
        "backends",
        "modes",
        "sandbox",
        "pool",
        "limits",
        "running_jobs",
    }
)
#: ``capacity`` in the health answer: what a fleet routes on (bot/runner_fleet.py).
CAPACITY_KEYS = frozenset({"cpu_cores", "max_concurrent_jobs", "free_slots", "queued_jobs"})


class RunnerUnreachableError(RunnerUnavailableError):
    """No connection to the runner (refused, reset, dropped before an answer): no verdict came back."""


class RunnerRefusedError(RunnerUnavailableError):
    """The runner answered with an HTTP error instead of a verdict; ``status_code`` says which."""

    def __init__(self, message: str, status_code: int) -> None:
        super().__init__(message)
        self.status_code = status_code


def _hardware(data: dict[str, Any]) -> Hardware:
    return Hardware(
        gpus=int(data.get("gpus", 0)),
        names=tuple(str(n) for n in data.get("names") or ()),
        torch=str(data.get("torch", "?")),
        cuda=data.get("cuda"),
    )


def verdict_from_json(data: dict[str, Any]) -> RunVerdict:
    """Build a RunVerdict from the contract's JSON; KeyError/TypeError/ValueError if it does not fit."""
    ranks = []
    for r in data["ranks"]:
        exc = r.get("exception")
        stuck = r.get("stuck_at")
        ranks.append(
            RankOutcome(
                rank=int(r["rank"]),
                exit_code=r.get("exit_code"),
                signal=r.get("signal"),
                stdout=str(r.get("stdout", "")),
                stderr=str(r.get("stderr", "")),
                truncated=bool(r.get("truncated", False)),
                exception=RankException(str(exc["type"]), str(exc["message"]), exc.get("line"))
                if exc
                else None,
                stuck_at=StuckAt(str(stuck["function"]), int(stuck["line"]), stuck.get("call"))
                if stuck
                else None,
            )
        )
    sandbox = data.get("sandbox") or {}
    return RunVerdict(
        status=str(data["status"]),
        mode=str(data["mode"]),
        nproc=int(data["nproc"]),
        backend=data.get("backend"),
        elapsed_s=float(data.get("elapsed_s", 0.0)),
        hardware=_hardware(data["hardware"]),
        sandboxed=bool(sandbox.get("isolated", False)),
        root_cause_rank=data.get("root_cause_rank"),
        notes=tuple(str(n) for n in data.get("notes") or ()),
        ranks=tuple(ranks),
    )


def health_from_json(data: dict[str, Any]) -> RunnerHealth:
    """Build RunnerHealth from ``GET /v1/health``."""
    limits = data.get("limits") or {}
    return RunnerHealth(
        hardware=_hardware(data["hardware"]),
        modes=tuple(data.get("modes") or ()),
        backends=tuple(data.get("backends") or ()),
        sandboxed=bool((data.get("sandbox") or {}).get("isolated", False)),
        max_nproc=int(limits.get("max_nproc", 8)),
        max_timeout_s=float(limits.get("max_timeout_s", 300.0)),
        extra={k: v for k, v in data.items() if k in ("pool", "running_jobs", "capacity", "test_advertised")},
    )


class HttpRunnerClient:
    """Talks to one runner over HTTP. Use as ``async with HttpRunnerClient(url, token) as runner``."""

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        *,
        connect_timeout_s: float = 5.0,
        retries: int = 3,
        retry_delay_s: float = 0.5,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise RunnerUnavailableError(
                f"runner URL {base_url!r} is not an http(s) URL: set RANKZERO_RUNNER_URL to e.g. "
                "http://127.0.0.1:8765"
            )
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._url = base_url.rstrip("/")
        self._connect_timeout = connect_timeout_s
        self._retries = max(0, retries)
        self._delay = retry_delay_s
        self._http = httpx.AsyncClient(
            base_url=self._url,
            headers=headers,
            transport=transport,
            timeout=httpx.Timeout(30.0, connect=connect_timeout_s),
        )

    async def __aenter__(self) -> HttpRunnerClient:
        return self

    @property
    def url(self) -> str:
        """The runner's base URL (without a trailing slash)."""
        return self._url

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def _request(self, method: str, path: str, *, timeout_s: float, body: Any = None) -> Any:
        """One call; connection errors are retried, any HTTP answer is final."""
        attempt = 0
        while True:
            try:
                response = await self._http.request(
                    method,
                    path,
                    json=body,
                    timeout=httpx.Timeout(timeout_s, connect=self._connect_timeout),
                )
                break
            # Refused, reset or closed without an answer: the runner is down or going down (a reset
            # is what a client sees when the runner is killed with the connection open). Its jobs die
            # with it, so asking again, or another runner, cannot run a job twice.
            except (httpx.NetworkError, httpx.ConnectTimeout, httpx.RemoteProtocolError) as exc:
                attempt += 1
                if attempt > self._retries:
                    raise RunnerUnreachableError(
                        f"the runner at {self._url} is unreachable ({type(exc).__name__}: {exc}); "
                        "start it with `rankzero-runner serve` or fix RANKZERO_RUNNER_URL"
                    ) from exc
                log.info("runner %s unreachable (%s), retry %d", self._url, exc, attempt)
                await asyncio.sleep(self._delay * attempt)
            except httpx.TimeoutException as exc:
                raise RunnerUnavailableError(
                    f"the runner at {self._url} did not answer {method} {path} within {timeout_s:.0f} s"
                ) from exc
        if response.status_code == 401:
            raise RunnerRefusedError(
                f"the runner at {self._url} refused our bearer token (401): set RANKZERO_RUNNER_TOKEN to "
                "the token the runner was started with",
                401,
            )
        if response.status_code != 200:
            raise RunnerRefusedError(
                f"the runner at {self._url} answered {response.status_code} to {method} {path}: "
                f"{response.text[:500]}",
                response.status_code,
            )
        try:
            return response.json()
        except ValueError as exc:
            raise RunnerUnavailableError(
                f"the runner at {self._url} answered {method} {path} with something that is not JSON"
            ) from exc

    async def health(self) -> RunnerHealth:
        """``GET /v1/health``."""
        data = await self._request("GET", "/v1/health", timeout_s=10.0)
        try:
            return health_from_json(data)
        except (KeyError, TypeError, ValueError) as exc:
            raise RunnerUnavailableError(f"the runner's health answer breaks the contract: {exc!r}") from exc

    async def run(self, spec: RunSpec) -> RunVerdict:
        """``POST /v1/runs`` with the question's launch settings; the verdict, whatever the job did."""
        body = {
            "code": spec.code,
            "mode": spec.mode,
            "nproc": spec.nproc if spec.mode == "ddp" else 1,
            "timeout_s": spec.timeout_s,
            "init_process_group": spec.init_process_group if spec.mode == "ddp" else False,
        }
        data = await self._request("POST", "/v1/runs", timeout_s=spec.timeout_s + RESPONSE_SLACK_S, body=body)
        try:
            return verdict_from_json(data)
        except (KeyError, TypeError, ValueError) as exc:
            raise RunnerUnavailableError(f"the runner's verdict breaks the contract: {exc!r}") from exc


def _free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def runner_executable() -> str:
    """The ``rankzero-runner`` script next to this interpreter (the venv's), else the one on PATH."""
    beside = Path(sys.executable).parent / "rankzero-runner"
    if beside.exists():
        return str(beside)
    found = shutil.which("rankzero-runner")
    if found is None:
        raise RunnerUnavailableError(
            "no runner configured (RANKZERO_RUNNER_URL) and `rankzero-runner` is not installed: "
            "pip install -e '.[runner]'"
        )
    return found


class LocalRunner:
    """A ``rankzero-runner serve`` subprocess on a free loopback port with a random token.

    ``async with LocalRunner() as (url, token)`` starts it and waits until ``/v1/health`` answers; leaving
    the block stops it (SIGTERM, then SIGKILL after a grace period).
    """

    def __init__(
        self, *, pool: str = "1:1,2:1", max_concurrent: int = 4, start_timeout_s: float = 90.0
    ) -> None:
        self._pool = pool
        self._max_concurrent = max_concurrent
        self._start_timeout = start_timeout_s
        self._proc: asyncio.subprocess.Process | None = None
        self.url = ""
        self.token = secrets.token_urlsafe(24)

    async def __aenter__(self) -> tuple[str, str]:
        port = _free_loopback_port()
        self.url = f"http://127.0.0.1:{port}"
        env = {**os.environ, "RANKZERO_RUNNER_TOKEN": self.token}
        self._proc = await asyncio.create_subprocess_exec(
            runner_executable(),
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--pool",
            self._pool,
            "--max-concurrent",
            str(self._max_concurrent),
            "--log-level",
            "WARNING",
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            await self._wait_ready()
        except BaseException:
            await self.stop()
            raise
        return self.url, self.token

    async def _wait_ready(self) -> None:
        assert self._proc is not None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._start_timeout
        async with HttpRunnerClient(self.url, self.token, retries=0, connect_timeout_s=1.0) as client:
            while True:
                if self._proc.returncode is not None:
                    err = b""
                    if self._proc.stderr is not None:
                        err = await self._proc.stderr.read()
                    raise RunnerUnavailableError(
                        f"the local runner exited with status {self._proc.returncode}: "
                        f"{err.decode(errors='replace').strip()[-800:]}"
                    )
                try:
                    await client.health()
                    return
                except RunnerUnavailableError:
                    if loop.time() > deadline:
                        raise RunnerUnavailableError(
                            f"the local runner did not answer on {self.url} "
                            f"within {self._start_timeout:.0f} s"
                        ) from None
                    await asyncio.sleep(0.2)

    async def stop(self) -> None:
        """Stop the subprocess (idempotent)."""
        proc, self._proc = self._proc, None
        if proc is None or proc.returncode is not None:
            return
        proc.terminate()
        try:
            await asyncio.wait_for(proc.wait(), timeout=15)
        except TimeoutError:
            proc.kill()
            await proc.wait()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


class LocalRunnerClient:
    """A RunnerClient that starts a LocalRunner on first use (for the console when no runner is set).

    Starting takes a few seconds (the runner checks its sandbox), so nothing starts until a dispute,
    a preview or a verification actually needs it. ``aclose()`` stops the subprocess.
    """

    def __init__(self, *, pool: str = "1:1,2:1", max_concurrent: int = 4) -> None:
        self._local = LocalRunner(pool=pool, max_concurrent=max_concurrent)
        self._client: HttpRunnerClient | None = None
        self._lock = asyncio.Lock()

    async def _ready(self) -> HttpRunnerClient:
        async with self._lock:
            if self._client is None:
                log.info("starting a local runner (no RANKZERO_RUNNER_URL configured)")
                url, token = await self._local.__aenter__()
                self._client = HttpRunnerClient(url, token)
            return self._client

    async def health(self) -> RunnerHealth:
        """``GET /v1/health`` on the local runner."""
        return await (await self._ready()).health()

    async def run(self, spec: RunSpec) -> RunVerdict:
        """``POST /v1/runs`` on the local runner."""
        return await (await self._ready()).run(spec)

    async def aclose(self) -> None:
        """Close the client and stop the runner if it was started."""
        if self._client is not None:
            await self._client.aclose()
            self._client = None
        await self._local.stop()
