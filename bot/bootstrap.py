"""The composition root: Settings -> engine -> units of work -> services, for play, serve and the CLI.

This is the one module that names concrete classes (SqlUnitOfWork, GroupCommit, HttpRunnerClient,
FleetRunnerClient, LocalRunnerClient, the platform router, the delivery log and draft repository the chat
adapters get as ports in :class:`Services`); everything else receives ports. Entry points call
``build_app`` (the CLI commands), ``build_services`` (``rankzero serve``: adds the platform router and the
scheduler) or ``open_runner`` (batch jobs that need only a runner); tests pass overrides (a clock, a
platform, a runner) instead of patching.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from sqlalchemy.ext.asyncio import AsyncEngine

from bot.adapters import registry
from bot.adapters.registry import Adapter
from bot.config import Settings
from bot.core.cards import (
    ChallengeCard,
    DeliveryNotice,
    LeaderboardCard,
    PracticeNudgeCard,
    ReminderCard,
    ResultsCard,
    TeamReportCard,
)
from bot.core.dispute_service import DisputeService
from bot.core.disputes import AdminNotice
from bot.core.fanout import FanoutGate, PlatformBudget, db_slots_for
from bot.core.models import ChannelRef, PlayerRef
from bot.core.outbox import OutboxTiming
from bot.core.ports import ChatPlatform, Clock, RunnerClient, SystemClock
from bot.core.practice import PracticeService
from bot.core.quota import RunnerQuota
from bot.core.schedule_service import ScheduleService
from bot.core.service import QuizService
from bot.core.tenancy import OutboundGate
from bot.core.web_links import WebLinks
from bot.metrics import BotMetrics, MeteredGate, MeteredPlatform
from bot.runner_client import HttpRunnerClient, LocalRunner, LocalRunnerClient
from bot.runner_fleet import FleetRunnerClient, OwnedRunner, runner_from_settings
from bot.services import App, Services
from bot.storage.db import EngineTimeouts, is_sqlite, make_engine, upgrade_async
from bot.storage.group_commit import GroupCommit, default_lanes
from bot.storage.repositories.deliveries import SqlDeliveryLog
from bot.storage.repositories.drafts import SqlDraftRepository
from bot.storage.repositories.form_drafts import SqlFormDraftRepository
from bot.storage.uow import SqlUnitOfWork, session_factory
from questions.loader import LoadedQuestion, default_bank_dir, load_paths

if TYPE_CHECKING:
    from slack_sdk.oauth.state_store.async_state_store import AsyncOAuthStateStore

    from bot.adapters.slack.stores import EncryptedInstallationStore


log = logging.getLogger(__name__)


def _units_of_work(engine: AsyncEngine) -> Callable[[], SqlUnitOfWork]:
    """The unit-of-work factory over ``engine`` that every service shares (each unit of work hands out
    the repositories: ``uow.plays``, ``uow.practice``...).

    The only place the unit-of-work class is constructed.
    """
    factory = session_factory(engine)
    return lambda: SqlUnitOfWork(factory)


def engine_timeouts(settings: Settings) -> EngineTimeouts:
    """The database bounds the settings give (RANKZERO_DB_*_TIMEOUT_S, RANKZERO_SQLITE_BUSY_TIMEOUT_S)."""
    return EngineTimeouts(
        connect_s=settings.db_connect_timeout_s,
        statement_s=settings.db_statement_timeout_s,
        pool_s=settings.db_pool_timeout_s,
        sqlite_busy_s=settings.sqlite_busy_timeout_s,
    )


def fanout_gate(settings: Settings) -> FanoutGate:
    """The gate of the scheduled posts (bot/core/fanout.py): the platforms' budgets from the settings,
    the database slots from the pool (SQLite: its one connection is shared in turn, so the slots bound how
    many jobs queue on it, the PostgreSQL pool's size less the reserve).
    """
    pool = settings.db_pool_size + settings.db_pool_overflow
    budgets = {
        "discord": PlatformBudget(settings.post_concurrency_discord, settings.post_rate_discord),
        "slack": PlatformBudget(settings.post_concurrency_slack, settings.post_rate_slack),
    }
    return FanoutGate(db_slots_for(pool, settings.post_db_reserve), budgets)


def _configured_runner(settings: Settings) -> HttpRunnerClient | FleetRunnerClient | None:
    """The runner (or fleet of runners) RANKZERO_RUNNER_URL names, or None when it is unset."""
    return runner_from_settings(settings)


async def build_app(
    settings: Settings,
    *,
    platform: ChatPlatform | None = None,
    clock: Clock | None = None,
    migrate: bool = True,
    runner: RunnerClient | None = None,
    local_runner: bool = False,
    outbound: OutboundGate | None = None,
    metrics: BotMetrics | None = None,
    seed: int | None = None,
    units_of_work: Callable[[AsyncEngine], Callable[[], SqlUnitOfWork]] | None = None,
) -> App:
    """Migrate the database (unless told not to) and wire the services.

    ``metrics``: the process's metrics (default: a registry of this app's own, see bot/metrics.py).
    ``seed`` fixes the quiz's and practice's random picks (default: unseeded; tests pass one).
    ``units_of_work`` makes the unit-of-work factory over the engine (default: a SqlUnitOfWork per call;
    a test wraps it, e.g. to refuse connections as a database outage does).

    ``runner`` defaults to the client RANKZERO_RUNNER_URL names (one runner, or a fleet) when set;
    otherwise, with ``local_runner``, to a ``rankzero-runner serve`` subprocess started on first use.
    ``outbound``: the allow-list's gate for scheduled posts (default: one over RANKZERO_ALLOWED_TENANTS).
    """
    if migrate:
        await upgrade_async(settings.database_url)
    engine = make_engine(
        settings.database_url,
        pool_size=settings.db_pool_size,
        max_overflow=settings.db_pool_overflow,
        timeouts=engine_timeouts(settings),
    )
    metrics = metrics or BotMetrics()
    pool = engine.sync_engine.pool
    # SQLite's pool is one connection whatever the settings (bot/storage/db.py says why).
    limit = 1 if is_sqlite(settings.database_url) else settings.db_pool_size + settings.db_pool_overflow
    metrics.watch_pool(lambda: int(getattr(pool, "checkedout", lambda: 0)()), limit)
    uow = (units_of_work or _units_of_work)(engine)
    clock = clock or SystemClock()
    service = QuizService(
        uow,
        clock,
        platform,
        problems_per_challenge=settings.problems_per_challenge,
        learned_difficulty_min_attempts=settings.learned_difficulty_min_attempts,
        seed=seed,
        # Players clicking together (right after the daily post) share transactions: group commit.
        transactions=GroupCommit(uow, lanes=default_lanes(engine)),
        telemetry=metrics,
        outbox=OutboxTiming(
            lease_s=settings.outbox_lease_s,
            retry_base_s=settings.outbox_retry_base_s,
            retry_max_s=settings.outbox_retry_max_s,
            give_up_s=settings.outbox_give_up_s,
        ),
    )
    practice = PracticeService(uow, clock, seed=seed)
    owned: OwnedRunner | None = None
    if runner is None:
        owned = _configured_runner(settings)
        if owned is None and local_runner:
            owned = LocalRunnerClient()
    runner = runner or owned
    quota = RunnerQuota(
        clock,
        per_hour=settings.runner_jobs_per_tenant_hour,
        concurrent=settings.runner_jobs_per_tenant_at_once,
    )
    disputes = DisputeService(
        uow,
        clock,
        runner,
        platform,
        runs_per_hour=settings.disputes_per_hour,
        quota=quota,
        outbox=service.outbox,
    )
    schedules = ScheduleService(
        uow,
        clock,
        service,
        platform,
        grace=dt.timedelta(minutes=settings.grace_minutes),
        default_timezone=settings.default_timezone,
        outbound=outbound or OutboundGate(settings.tenant_allow_list),
    )
    return App(
        engine,
        service,
        practice=practice,
        disputes=disputes,
        schedules=schedules,
        clock=clock,
        runner=owned,
        metrics=metrics,
    )


def import_specs(loaded: Iterable[LoadedQuestion]) -> list[dict[str, Any]]:
    """Loaded (validated) questions as spec dicts ready to import."""
    return [q.import_spec() for q in loaded]


def shipped_bank_specs() -> list[dict[str, Any]]:
    """The bank shipped in questions/bank, validated, as spec dicts ready to import."""
    return import_specs(load_paths([default_bank_dir()]))


@asynccontextmanager
async def open_runner(
    settings: Settings, *, max_concurrent: int, pool: str | None = None, say: Callable[[str], None]
) -> AsyncIterator[RunnerClient]:
    """A runner for a batch job (verify, build): the configured one, else a local runner started for it.

    ``pool``: the local runner's warm sandboxes (``ranks:count,...``; its default when None). ``say`` is
    told when a local runner is being started (it takes seconds).
    """
    configured = _configured_runner(settings)
    if configured is not None:
        async with configured as client:
            yield client
        return
    say("no RANKZERO_RUNNER_URL: starting a local runner…")
    local = (
        LocalRunner(pool=pool, max_concurrent=max_concurrent)
        if pool
        else LocalRunner(max_concurrent=max_concurrent)
    )
    async with local as (url, token), HttpRunnerClient(url, token) as client:
        yield client


# ---------------------------------------------------------------------- rankzero serve
class PlatformRouter:
    """The ChatPlatform of the service: each call goes to the adapter serving the channel's platform.

    A post to a channel of a tenant the allow-list does not serve (``outbound``) is refused here, the one
    door every post of the bot goes through: nothing is sent, the post reads as made without a message
    (None), and the first refusal of each tenant is logged.
    """

    def __init__(self, platforms: dict[str, ChatPlatform], outbound: OutboundGate | None = None) -> None:
        self._platforms = platforms
        self._outbound = outbound or OutboundGate()

    def _for(self, channel: ChannelRef) -> ChatPlatform | None:
        if not self._outbound.permits(channel.tenant):
            return None
        try:
            return self._platforms[channel.platform]
        except KeyError:
            raise LookupError(f"no adapter serves platform {channel.platform!r} in this process") from None

    async def post_challenge(self, channel: ChannelRef, card: ChallengeCard) -> str | None:
        """Post on the channel's platform."""
        platform = self._for(channel)
        return await platform.post_challenge(channel, card) if platform is not None else None

    async def post_results(self, channel: ChannelRef, card: ResultsCard, message_ref: str | None) -> None:
        """Post on the channel's platform."""
        if (platform := self._for(channel)) is not None:
            await platform.post_results(channel, card, message_ref)

    async def post_reminder(self, channel: ChannelRef, card: ReminderCard, message_ref: str | None) -> None:
        """Post on the channel's platform."""
        if (platform := self._for(channel)) is not None:
            await platform.post_reminder(channel, card, message_ref)

    async def post_weekly_summary(self, channel: ChannelRef, card: LeaderboardCard) -> None:
        """Post on the channel's platform."""
        if (platform := self._for(channel)) is not None:
            await platform.post_weekly_summary(channel, card)

    async def post_team_report(self, channel: ChannelRef, card: TeamReportCard) -> None:
        """Post on the channel's platform."""
        if (platform := self._for(channel)) is not None:
            await platform.post_team_report(channel, card)

    async def post_delivery_notice(self, channel: ChannelRef, notice: DeliveryNotice) -> None:
        """Tell the admins on the channel's platform (only there: another platform's admins are not its)."""
        if (platform := self._for(channel)) is not None:
            await platform.post_delivery_notice(channel, notice)

    async def post_admin_notice(self, notice: AdminNotice, channel: ChannelRef | None = None) -> None:
        """Tell the admins on the platform of the channel it arose in (another platform's admins run other
        teams: a flag of one tenant is not theirs); without a channel, on every platform.

        Routed rather than broadcast also keeps an outbox retry exact: a broadcast that failed on the
        second platform would repeat the notice on the first.
        """
        if channel is None:
            for platform in self._platforms.values():
                await platform.post_admin_notice(notice)
        elif (target := self._for(channel)) is not None:
            await target.post_admin_notice(notice, channel)

    async def send_practice_nudge(self, player: PlayerRef, card: PracticeNudgeCard) -> None:
        """DM the player on their platform (a player of a platform this process does not serve: error)."""
        platform = self._platforms.get(player.platform)
        if platform is None:
            raise LookupError(f"no adapter serves platform {player.platform!r} in this process")
        await platform.send_practice_nudge(player, card)

    def __getattr__(self, name: str) -> Any:
        # Calls not bound to a channel (e.g. an admin notice added to the port later) go to every adapter.
        if not name.startswith("post_"):
            raise AttributeError(name)

        async def broadcast(*args: Any, **kwargs: Any) -> None:
            for platform in self._platforms.values():
                method = getattr(platform, name, None)
                if method is not None:
                    await method(*args, **kwargs)

        return broadcast


#: How long an OAuth ``state`` (install link) is good for, seconds.
SLACK_STATE_TTL_S = 600


def slack_oauth_stores(
    settings: Settings, engine: AsyncEngine
) -> tuple[EncryptedInstallationStore, AsyncOAuthStateStore]:
    """slack_sdk's async SQLAlchemy installation and state stores over our engine (their tables come from
    migration 0008). They are async (AsyncEngine), so the event loop never blocks on them; expired OAuth
    states are deleted as new ones are issued.
    """
    from bot.adapters.slack.stores import PurgingOAuthStateStore

    assert settings.slack_client_id is not None
    return (
        slack_installation_store(settings, engine),
        PurgingOAuthStateStore(expiration_seconds=SLACK_STATE_TTL_S, engine=engine),
    )


def slack_installation_store(settings: Settings, engine: AsyncEngine) -> EncryptedInstallationStore:
    """slack_sdk's installation store with the tokens encrypted by RANKZERO_SECRET_KEY (SecretKeyError, a
    ConfigurationError, when it is missing or malformed).
    """
    from bot.adapters.slack.stores import EncryptedInstallationStore
    from bot.secret_box import SecretBox

    key = settings.secret_key.get_secret_value() if settings.secret_key else None
    box = SecretBox.required(key, "Slack OAuth mode (each workspace's bot token is kept in the database)")
    return EncryptedInstallationStore(client_id=settings.slack_client_id or "", engine=engine, box=box)


def build_adapters(settings: Settings, *, console: bool = False) -> list[Adapter]:
    """The chat adapters configured in ``settings`` (plus the terminal when ``console``).

    The registry imports only the configured platforms' packages; ConfigurationError names a configured
    platform whose adapter is missing from this build.
    """
    return registry.build_adapters(settings, console=console)


def _optimizer_job(app: App, served: frozenset[str]) -> Callable[[], Awaitable[object]] | None:
    """The daily per-player FSRS fit, when the optional optimizer is installed (else None: defaults)."""
    from bot.practice_optimizer import INSTALL_HINT, FsrsOptimizer, optimizer_available

    if not optimizer_available():
        log.info("FSRS optimisation not installed (%s): players keep the default parameters", INSTALL_HINT)
        return None
    optimizer = FsrsOptimizer()

    async def fit_all() -> object:
        return await app.practice.optimize_all(optimizer, platforms=served)

    return fit_all


async def build_services(
    settings: Settings,
    adapters: Sequence[Adapter],
    *,
    clock: Clock | None = None,
    migrate: bool = True,
    metrics: BotMetrics | None = None,
    runner: RunnerClient | None = None,
    seed: int | None = None,
) -> Services:
    """Wire the services for ``adapters`` (migrating the database first unless told not to).

    ``metrics``: the process's metrics, which ``serve`` also serves at /metrics (default: new ones).
    ``runner`` and ``seed``: as :func:`build_app` takes them (tests pass a scripted runner and a seed).
    """
    from bot.scheduling import RankZeroScheduler  # APScheduler: only a serving process needs it

    clock = clock or SystemClock()
    metrics = metrics or BotMetrics()
    # One gate for the router and the scheduler, so that a dropped tenant is logged (and counted) once.
    outbound = MeteredGate(settings.tenant_allow_list, metrics)
    metered: dict[str, ChatPlatform] = {
        a.name: MeteredPlatform(a.platform, a.name, metrics) for a in adapters
    }
    router = PlatformRouter(metered, outbound)
    app = await build_app(
        settings,
        platform=router,
        clock=clock,
        migrate=migrate,
        outbound=outbound,
        metrics=metrics,
        runner=runner,
        seed=seed,
    )
    served = frozenset(a.name for a in adapters)
    scheduler = RankZeroScheduler(
        app.schedules,
        clock,
        platforms=served,
        owns=shards.owns if (shards := settings.discord_shard_set) is not None else None,
        sync_interval_s=settings.schedule_sync_s,
        job_deadline_s=settings.job_deadline_s,
        outbox_interval_s=settings.outbox_interval_s,
        nudge=lambda: app.practice.send_nudges(router, platforms=served),
        optimize=_optimizer_job(app, served),
        on_job_start=metrics.job_started,
        fanout=fanout_gate(settings),
    )
    installations, states = (None, None)
    if settings.slack_oauth:
        try:
            installations, states = slack_oauth_stores(settings, app.engine)
            await installations.check_key()  # a wrong key is refused at start, not at the first post
        except BaseException:
            await app.close()
            raise
    return Services(
        app.service,
        app.schedules,
        scheduler,
        app,
        deliveries=SqlDeliveryLog(app.engine),
        drafts=SqlDraftRepository(app.engine),
        form_drafts=SqlFormDraftRepository(app.engine),
        slack_installations=installations,
        slack_oauth_states=states,
        metrics=metrics,
        web_links=web_links(settings, clock),
    )


def web_links(settings: Settings, clock: Clock) -> WebLinks | None:
    """The web page's link signer, or None when the page is off (no secret or no public URL)."""
    if not settings.web_enabled:
        return None
    assert settings.web_secret is not None and settings.public_url is not None
    lifetime = dt.timedelta(days=settings.web_link_days)
    return WebLinks(settings.web_secret.get_secret_value(), settings.public_url, lifetime, clock)
