"""FleetRunnerClient: the RunnerClient port over several runners (a comma-separated RANKZERO_RUNNER_URL).

Each runner's ``GET /v1/health`` says what it has (GPUs, backends, limits, free slots). A job goes to a
runner that can reproduce it: at least the question's GPUs (and NCCL for a GPU DDP job), preferring one
with a free slot, then the smallest one that fits (a CPU question stays off the GPU runners, where
``backend: auto`` would pick NCCL and ``torch.cuda.is_available()`` would differ), then the least busy,
then the order of the setting. A runner that cannot be reached, or answers 5xx, 429, 401 or 403 (nothing
ran), is marked down and the job goes to the next; any verdict is final, and a 4xx about the request or
a timeout while the job ran is raised, never retried elsewhere (the job may have run).

The fleet's own health describes its largest runner (``fleet_size`` > 1), so "cannot reproduce here:
needs N GPUs" appears only when no runner of the fleet has them. A runner that has never answered since
the bot started counts for nothing until it does.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx

from bot.core.errors import ConfigurationError, RunnerUnavailableError
from bot.core.verdicts import RunnerHealth, RunSpec, RunVerdict
from bot.runner_client import (
    HttpRunnerClient,
    LocalRunnerClient,
    RunnerRefusedError,
    RunnerUnreachableError,
)

if TYPE_CHECKING:
    from bot.config import Settings

log = logging.getLogger(__name__)

#: More runners than this in one setting is a mistake (a pasted list), not a fleet.
MAX_RUNNERS = 32
#: HTTP answers after which the job surely did not run there, so another runner may take it.
FAILOVER_STATUSES = frozenset({401, 403, 429}) | frozenset(range(500, 600))
URL_VARIABLE = "RANKZERO_RUNNER_URL"
TOKEN_VARIABLE = "RANKZERO_RUNNER_TOKEN"  # noqa: S105 - the variable's name, not a secret
EXAMPLE = "http://gpu-2x:8765,http://cpu:8765"


@dataclass(frozen=True)
class RunnerEndpoint:
    """One runner of the setting: its base URL and bearer token (None: a loopback runner without one)."""

    url: str
    token: str | None = field(default=None, repr=False)


def _check_url(text: str, position: int) -> str:
    where = f"{URL_VARIABLE} entry {position}"
    try:
        url = httpx.URL(text)
    except httpx.InvalidURL as exc:
        raise ConfigurationError(f"{where} is not a URL ({exc}): use e.g. {EXAMPLE}") from None
    if url.scheme not in ("http", "https") or not url.host:
        shown = text if not url.userinfo else "(hidden: it carries credentials)"
        raise ConfigurationError(f"{where} {shown!r} is not an http(s) URL with a host: use e.g. {EXAMPLE}")
    if url.userinfo:
        # Userinfo is Basic auth, which the runner does not read; and the setting would leak it in logs.
        raise ConfigurationError(
            f"{where} carries credentials in the URL: put the token in {TOKEN_VARIABLE} instead"
        )
    if url.query or url.fragment:
        # Not echoed: a query is where a token pasted into the URL would sit (?token=...).
        raise ConfigurationError(f"{where} has a query or fragment: give the runner's base URL only")
    return text.rstrip("/")


def parse_runner_endpoints(urls: str, tokens: str | None) -> list[RunnerEndpoint]:
    """The runners of ``RANKZERO_RUNNER_URL`` with their tokens; ConfigurationError (one line) if wrong.

    ``tokens`` is one token for every runner, or, with several URLs, a comma-separated list of one token
    per URL in the same order (an empty item: that runner has none). With a single URL the token is used
    whole, as before fleets existed. Tokens are never shown in an error.
    """
    items = [item.strip() for item in urls.split(",")]
    if not any(items):
        raise ConfigurationError(f"{URL_VARIABLE} is empty: give one runner URL or several, e.g. {EXAMPLE}")
    if not all(items):
        raise ConfigurationError(
            f"{URL_VARIABLE} has an empty entry: separate runner URLs with single commas, e.g. {EXAMPLE}"
        )
    if len(items) > MAX_RUNNERS:
        raise ConfigurationError(f"{URL_VARIABLE} lists {len(items)} runners; at most {MAX_RUNNERS}")
    checked = [_check_url(item, i) for i, item in enumerate(items, 1)]
    seen: set[str] = set()
    for i, url in enumerate(checked, 1):
        if url in seen:
            raise ConfigurationError(f"{URL_VARIABLE} entry {i} repeats {url!r}: list each runner once")
        seen.add(url)
    if tokens is None or len(checked) == 1:
        return [RunnerEndpoint(url, tokens or None) for url in checked]
    given = [t.strip() for t in tokens.split(",")]
    if len(given) == 1:
        return [RunnerEndpoint(url, given[0] or None) for url in checked]
    if len(given) != len(checked):
        raise ConfigurationError(
            f"{TOKEN_VARIABLE} has {len(given)} comma-separated tokens for the {len(checked)} runners of "
            f"{URL_VARIABLE}: give one token for all, or one per URL in the same order"
        )
    return [RunnerEndpoint(url, token or None) for url, token in zip(checked, given, strict=True)]


@dataclass
class _Member:
    """One runner of the fleet and what the fleet knows about it."""

    index: int
    client: HttpRunnerClient
    last: RunnerHealth | None = None  # the last health it answered, kept while it is down
    up: bool = False
    checked_at: float | None = None
    error: str | None = None
    generation: int = 0  # bumped at each health answer
    sent_since_check: int = 0  # jobs sent since that answer and still running
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    @property
    def url(self) -> str:
        return self.client.url

    def free_slots(self) -> int:
        """Slots the runner reported free, less the jobs this client has sent it since."""
        capacity = (self.last.extra.get("capacity") if self.last else None) or {}
        reported = capacity.get("free_slots")
        # A runner from before capacity was reported: assume it takes one more.
        free = int(reported) if isinstance(reported, int) else 1
        return free - self.sent_since_check


def fits(health: RunnerHealth, spec: RunSpec) -> bool:
    """Whether a runner with ``health`` can reproduce ``spec``: the mode, the GPUs, NCCL for GPU DDP."""
    if health.modes and spec.mode not in health.modes:
        return False
    if health.hardware.gpus < spec.gpus:
        return False
    return not (spec.gpus > 0 and spec.mode == "ddp" and "nccl" not in health.backends)


def within_limits(health: RunnerHealth, spec: RunSpec) -> bool:
    """Whether the runner would accept the job rather than answer a ``rejected`` verdict."""
    nproc_ok = spec.mode != "ddp" or spec.nproc <= health.max_nproc
    return nproc_ok and spec.timeout_s <= health.max_timeout_s


class FleetRunnerClient:
    """Several runners behind the RunnerClient port. Use as ``async with FleetRunnerClient(endpoints)``.

    ``health_ttl_s``: how long a runner's health answer is trusted; ``down_retry_s``: how long a runner
    that failed is left alone before its health is asked again. ``transports`` (by URL) is for tests.
    """

    def __init__(
        self,
        endpoints: Sequence[RunnerEndpoint],
        *,
        health_ttl_s: float = 5.0,
        down_retry_s: float = 5.0,
        connect_timeout_s: float = 3.0,
        transports: Mapping[str, httpx.AsyncBaseTransport] | None = None,
    ) -> None:
        if not endpoints:
            raise ConfigurationError(f"{URL_VARIABLE}: a fleet needs at least one runner")
        transports = transports or {}
        self._members = [
            _Member(
                i,
                # The fleet is the retry: one quick second try on the same runner, then the next runner.
                HttpRunnerClient(
                    e.url,
                    e.token,
                    connect_timeout_s=connect_timeout_s,
                    retries=1,
                    retry_delay_s=0.2,
                    transport=transports.get(e.url),
                ),
            )
            for i, e in enumerate(endpoints)
        ]
        self._ttl = health_ttl_s
        self._down_retry = down_retry_s

    @property
    def urls(self) -> list[str]:
        """The runners' base URLs, in the setting's order."""
        return [m.url for m in self._members]

    async def __aenter__(self) -> FleetRunnerClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close every runner's connection pool."""
        for m in self._members:
            await m.client.aclose()

    # ------------------------------------------------------------------ health
    def _stale(self, m: _Member, now: float) -> bool:
        if m.checked_at is None:
            return True
        return now - m.checked_at >= (self._ttl if m.up else self._down_retry)

    async def _refresh(self, m: _Member) -> None:
        loop = asyncio.get_running_loop()
        if not self._stale(m, loop.time()):
            return
        async with m.lock:
            if not self._stale(m, loop.time()):  # another task refreshed it meanwhile
                return
            try:
                health = await m.client.health()
            except RunnerUnavailableError as exc:
                self._mark_down(m, exc)
                return
            m.last, m.up, m.error = health, True, None
            m.checked_at = loop.time()
            m.generation += 1
            m.sent_since_check = 0

    def _mark_down(self, m: _Member, exc: BaseException) -> None:
        if m.up or m.error is None:
            log.warning("runner %s is down: %s", m.url, exc)
        m.up, m.error = False, str(exc)
        m.checked_at = asyncio.get_running_loop().time()

    async def _refresh_all(self) -> None:
        await asyncio.gather(*(self._refresh(m) for m in self._members))

    def runners(self) -> list[dict[str, Any]]:
        """What the fleet knows of each runner (for logs and health pages)."""
        out = []
        for m in self._members:
            hw = m.last.hardware if m.last else None
            out.append(
                {
                    "url": m.url,
                    "up": m.up,
                    "gpus": hw.gpus if hw else None,
                    "hardware": hw.describe() if hw else None,
                    "free_slots": m.free_slots() if m.last else None,
                    "error": m.error,
                }
            )
        return out

    async def health(self) -> RunnerHealth:
        """The fleet as one runner: its largest runner's hardware, the union of modes and backends.

        Runners that are down count with the hardware they last reported (a job that needs them then
        fails as unavailable, not as "cannot reproduce"). RunnerUnavailableError when none answers.
        """
        await self._refresh_all()
        known = [m for m in self._members if m.last is not None]
        if not any(m.up for m in self._members) or not known:
            raise RunnerUnavailableError(
                f"none of the {len(self._members)} runners of {URL_VARIABLE} answered: "
                + "; ".join(f"{m.url}: {m.error}" for m in self._members)
            )
        healths = [m.last for m in known if m.last is not None]
        largest = max(healths, key=lambda h: h.hardware.gpus)
        modes = list(dict.fromkeys(mode for h in healths for mode in h.modes))
        backends = list(dict.fromkeys(b for h in healths for b in h.backends))
        return RunnerHealth(
            hardware=largest.hardware,
            modes=tuple(modes),
            backends=tuple(backends),
            sandboxed=all(h.sandboxed for h in healths),
            max_nproc=max(h.max_nproc for h in healths),
            max_timeout_s=max(h.max_timeout_s for h in healths),
            extra={"runners": self.runners()},
            fleet_size=len(self._members),
        )

    # ------------------------------------------------------------------ routing
    def route(self, spec: RunSpec) -> list[_Member]:
        """The runners that are up and can reproduce ``spec``, best first."""
        usable = [m for m in self._members if m.up and m.last is not None and fits(m.last, spec)]

        def preference(m: _Member) -> tuple[bool, bool, int, int, int]:
            assert m.last is not None
            free = m.free_slots()
            return (
                not within_limits(m.last, spec),  # a runner that would reject it only if none accepts
                free <= 0,
                m.last.hardware.gpus - spec.gpus,  # the smallest runner that fits
                -free,
                m.index,
            )

        return sorted(usable, key=preference)

    def _nobody_fits(self, spec: RunSpec) -> str:
        need = f"{spec.gpus} GPU{'s' if spec.gpus != 1 else ''}" if spec.gpus else "no GPU"
        why = []
        for m in self._members:
            if not m.up:
                why.append(f"{m.url} is down ({m.error})")
            elif m.last is not None:
                why.append(f"{m.url} has {m.last.hardware.describe()}, backends {', '.join(m.last.backends)}")
        return (
            f"no runner that is up can run this {spec.mode} job ({spec.nproc} ranks, {need}): "
            + "; ".join(why)
        )

    async def run(self, spec: RunSpec) -> RunVerdict:
        """Run on the best runner that can; on to the next while runners fail without a verdict."""
        await self._refresh_all()
        order = self.route(spec)
        if not order:
            raise RunnerUnavailableError(self._nobody_fits(spec))
        failures = []
        for m in order:
            generation = m.generation
            m.sent_since_check += 1
            try:
                verdict = await m.client.run(spec)
            except RunnerUnreachableError as exc:
                self._mark_down(m, exc)
                failures.append(f"{m.url}: {exc}")
                continue
            except RunnerRefusedError as exc:
                if exc.status_code not in FAILOVER_STATUSES:
                    raise  # about the request itself: another runner would say the same
                self._mark_down(m, exc)
                failures.append(f"{m.url}: {exc}")
                continue
            finally:
                if m.generation == generation:
                    m.sent_since_check -= 1
            if failures:
                log.info("job ran on %s after %d runner(s) failed", m.url, len(failures))
            return verdict
        raise RunnerUnavailableError(
            f"every runner that can run this job failed without a verdict: {'; '.join(failures)}"
        )


def runner_from_settings(settings: Settings) -> HttpRunnerClient | FleetRunnerClient | None:
    """The runner client RANKZERO_RUNNER_URL asks for: None, one HttpRunnerClient, or a fleet.

    A single URL gives exactly the client it always did; several give a FleetRunnerClient. Raises
    ConfigurationError (one line, naming the variable) for a malformed setting.
    """
    if not settings.runner_url:
        return None
    token = settings.runner_token.get_secret_value() if settings.runner_token else None
    endpoints = parse_runner_endpoints(settings.runner_url, token)
    if len(endpoints) == 1:
        return HttpRunnerClient(endpoints[0].url, endpoints[0].token)
    return FleetRunnerClient(endpoints)


#: The runner clients the composition root may open (and must close).
OwnedRunner = HttpRunnerClient | FleetRunnerClient | LocalRunnerClient
