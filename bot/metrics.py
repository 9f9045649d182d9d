"""Prometheus metrics of the bot: one registry per process, made by the composition root and passed down.

``rankzero serve`` serves them at ``GET /metrics`` on its health server (bot/serve.py). Every metric lives
in the registry of one :class:`BotMetrics` (never prometheus_client's global default registry), so two
processes in one test run, or two tests, never see each other's counts.

Label values are bounded by construction: platform names (the adapters of this build), post kinds, job
kinds (the scheduler's job id prefixes), refusal reasons and API route templates (ids and tokens replaced,
see :func:`route_template`). No label carries a tenant, a channel, a user or any text a user wrote, so the
page can be scraped without exposing who plays, and its size does not grow with the number of tenants.
The README's "Metrics" section lists each metric with its type, labels and meaning.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from bot.core.cards import (
    ChallengeCard,
    DeliveryNotice,
    LeaderboardCard,
    PracticeNudgeCard,
    ReminderCard,
    ResultsCard,
    TeamReportCard,
)
from bot.core.disputes import AdminNotice
from bot.core.models import ChannelRef, PlayerRef, Tenant
from bot.core.tenancy import OutboundGate, TenantAllowList

if TYPE_CHECKING:
    from bot.core.ports import ChatPlatform

T = TypeVar("T")

#: The Content-Type of :meth:`BotMetrics.render`: Prometheus' classic text format (0.0.4), which is what
#: ``generate_latest`` writes and what every Prometheus version reads.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

#: Discord and Slack give an interaction 3 s to be acknowledged: the buckets are fine around it.
ACK_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 2.5, 3.0, 5.0, 10.0)
#: A scheduled job normally starts within a second of its slot; minutes mean the loop or the host stalled,
#: hours a post made at start for a slot missed while no process ran (within the grace period).
LAG_BUCKETS = (0.01, 0.1, 0.5, 1.0, 2.5, 5.0, 15.0, 30.0, 60.0, 300.0, 900.0, 3600.0)

#: At most this many characters of a label value (a route template, a method name).
MAX_LABEL = 80
_WORD = re.compile(r"[a-z_@.-]{1,40}")


def bounded_label(value: str) -> str:
    """``value`` as a label: printable ASCII only and at most :data:`MAX_LABEL` characters ("other" when
    nothing printable remains), so that no client-controlled text can make the page large or odd.
    """
    kept = "".join(c for c in value if " " < c < "\x7f" or c == " ")[:MAX_LABEL].strip()
    return kept or "other"


def route_template(method: str, path: str) -> str:
    """An API call as a bounded label: ``POST /channels/:id/messages`` for ``POST /channels/123/messages``.

    Every path segment that is not a lowercase word (ids, snowflakes) is replaced by ``:id``, and the
    interaction and webhook tokens by ``:token``: the label set stays that of the API's routes, whatever
    the ids, and a token in the URL never reaches the metrics page.
    """
    raw = [p for p in path.split("?")[0].split("/") if p]
    # Discord's REST paths start with /api/v10: the version adds nothing to the route.
    while raw and (raw[0] == "api" or re.fullmatch(r"v\d{1,3}", raw[0])):
        raw.pop(0)
    parts = [p if _WORD.fullmatch(p) else ":id" for p in raw]
    for i in range(2, len(parts)):
        # /interactions/<id>/<token>/..., /webhooks/<application id>/<token>/...: a token, however short.
        if parts[i - 2] in ("interactions", "webhooks") and parts[i - 1] == ":id":
            parts[i] = ":token"
    return bounded_label(f"{method.upper()[:10]} /{'/'.join(parts[:8])}")


class BotMetrics:
    """The bot's metrics (see the module doc), in a registry of their own.

    Implements the core's Telemetry port (:meth:`answer_recorded`); the platform router, the scheduler
    and the adapters call the other methods.
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        r = self.registry
        # prometheus_client adds the ``_total`` suffix to counters on the page.
        self.posts = Counter(
            "rankzero_posts",
            "Posts the chat platform accepted, by platform and kind",
            ["platform", "kind"],
            registry=r,
        )
        self.posts_refused = Counter(
            "rankzero_posts_refused",
            "Posts not made: the tenant is not allowed (tenant_not_allowed) or the platform refused or "
            "failed the call (platform_error)",
            ["platform", "reason"],
            registry=r,
        )
        self.answers = Counter(
            "rankzero_answers",
            "Answers recorded (redeliveries not counted), by platform and result",
            ["platform", "result"],
            registry=r,
        )
        self.ack_seconds = Histogram(
            "rankzero_interaction_ack_seconds",
            "Seconds from receiving an interaction (click, command, form) to acknowledging it",
            ["platform"],
            buckets=ACK_BUCKETS,
            registry=r,
        )
        self.rate_limit_retries = Counter(
            "rankzero_rate_limit_retries",
            "Platform API calls answered 429 and retried, by platform and method (route template)",
            ["platform", "method"],
            registry=r,
        )
        self.scheduler_lag = Histogram(
            "rankzero_scheduler_lag_seconds",
            "Seconds between a scheduled job's due time and its start, by job kind",
            ["job"],
            buckets=LAG_BUCKETS,
            registry=r,
        )
        self.db_pool_in_use = Gauge(
            "rankzero_db_pool_connections_in_use",
            "Database connections checked out of this process's pool",
            registry=r,
        )
        self.db_pool_limit = Gauge(
            "rankzero_db_pool_connections_max",
            "The most connections this process's pool opens (size + overflow)",
            registry=r,
        )

    # ------------------------------------------------------------------ what the callers report
    def answer_recorded(self, platform: str, correct: bool) -> None:
        """An answer was stored (the core's Telemetry port)."""
        self.answers.labels(bounded_label(platform), "correct" if correct else "wrong").inc()

    def post_made(self, platform: str, kind: str) -> None:
        """The platform accepted a post."""
        self.posts.labels(bounded_label(platform), kind).inc()

    def post_refused(self, platform: str, reason: str) -> None:
        """A post was not made (``reason``: tenant_not_allowed or platform_error)."""
        self.posts_refused.labels(bounded_label(platform), reason).inc()

    def acknowledged(self, platform: str, seconds: float) -> None:
        """An interaction was acknowledged ``seconds`` after it arrived."""
        self.ack_seconds.labels(bounded_label(platform)).observe(max(0.0, seconds))

    def rate_limited(self, platform: str, method: str) -> None:
        """A platform call was answered 429 and will be retried."""
        self.rate_limit_retries.labels(bounded_label(platform), bounded_label(method)).inc()

    def job_started(self, job_id: str, lag_s: float) -> None:
        """A scheduler job started ``lag_s`` after it was due (labelled by kind: ``post`` of ``post:3``)."""
        kind = job_id.removeprefix("retry:").partition(":")[0]
        self.scheduler_lag.labels(bounded_label(kind)).observe(max(0.0, lag_s))

    def watch_pool(self, checked_out: Callable[[], int], limit: int) -> None:
        """Read the pool's checked-out connections at each scrape (``checked_out``)."""
        self.db_pool_in_use.set_function(lambda: float(checked_out()))
        self.db_pool_limit.set(limit)

    def render(self) -> bytes:
        """The metrics page (Prometheus' text format, :data:`CONTENT_TYPE`)."""
        return generate_latest(self.registry)


class MeteredPlatform:
    """A ChatPlatform that counts each post its inner platform made or failed (one per adapter)."""

    def __init__(self, inner: ChatPlatform, name: str, metrics: BotMetrics) -> None:
        self._inner = inner
        self._name = name
        self._metrics = metrics

    async def _count(self, kind: str, call: Callable[[], Awaitable[T]]) -> T:
        try:
            result = await call()
        except Exception:
            self._metrics.post_refused(self._name, "platform_error")
            raise
        self._metrics.post_made(self._name, kind)
        return result

    async def post_challenge(self, channel: ChannelRef, card: ChallengeCard) -> str | None:
        """Post through the inner platform, counted."""
        return await self._count("challenge", lambda: self._inner.post_challenge(channel, card))

    async def post_results(self, channel: ChannelRef, card: ResultsCard, message_ref: str | None) -> None:
        """Post through the inner platform, counted."""
        await self._count("results", lambda: self._inner.post_results(channel, card, message_ref))

    async def post_reminder(self, channel: ChannelRef, card: ReminderCard, message_ref: str | None) -> None:
        """Post through the inner platform, counted."""
        await self._count("reminder", lambda: self._inner.post_reminder(channel, card, message_ref))

    async def post_weekly_summary(self, channel: ChannelRef, card: LeaderboardCard) -> None:
        """Post through the inner platform, counted."""
        await self._count("weekly_summary", lambda: self._inner.post_weekly_summary(channel, card))

    async def post_team_report(self, channel: ChannelRef, card: TeamReportCard) -> None:
        """Post through the inner platform, counted."""
        await self._count("team_report", lambda: self._inner.post_team_report(channel, card))

    async def post_admin_notice(self, notice: AdminNotice, channel: ChannelRef | None = None) -> None:
        """Post through the inner platform, counted."""
        await self._count("admin_notice", lambda: self._inner.post_admin_notice(notice, channel))

    async def post_delivery_notice(self, channel: ChannelRef, notice: DeliveryNotice) -> None:
        """Post through the inner platform, counted (the outbox telling admins a post failed)."""
        await self._count("delivery_notice", lambda: self._inner.post_delivery_notice(channel, notice))

    async def send_practice_nudge(self, player: PlayerRef, card: PracticeNudgeCard) -> None:
        """Send through the inner platform, counted."""
        await self._count("practice_nudge", lambda: self._inner.send_practice_nudge(player, card))

    def __getattr__(self, name: str) -> object:
        # Calls the port may gain later pass through uncounted rather than fail.
        return getattr(self._inner, name)


class MeteredGate(OutboundGate):
    """The allow-list's gate for the bot's own posts, counting each post it refuses."""

    def __init__(self, allowed: TenantAllowList | None, metrics: BotMetrics) -> None:
        super().__init__(allowed)
        self._metrics = metrics

    def permits(self, tenant: Tenant) -> bool:
        """Whether the bot may post to ``tenant``; a refusal is counted (tenant_not_allowed)."""
        allowed = super().permits(tenant)
        if not allowed:
            self._metrics.post_refused(tenant.platform, "tenant_not_allowed")
        return allowed
