"""What the composition root hands out: the wired application (:class:`App`) and what chat adapters get at
start (:class:`Services`).

These two holders live apart from bot/bootstrap.py so that adapters can name them in type hints without
importing the composition root (which imports the adapter registry): no import circle, and adapters see
storage only as the ports these fields carry.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from bot.runner_client import LocalRunnerClient

if TYPE_CHECKING:
    from slack_sdk.oauth.installation_store.async_installation_store import AsyncInstallationStore
    from slack_sdk.oauth.state_store.async_state_store import AsyncOAuthStateStore
    from sqlalchemy.ext.asyncio import AsyncEngine

    from bot.commands.dedup import DeliveryLog
    from bot.core.dispute_service import DisputeService
    from bot.core.ports import Clock
    from bot.core.practice import PracticeService
    from bot.core.repositories.drafts import DraftRepository
    from bot.core.repositories.form_drafts import FormDraftRepository
    from bot.core.schedule_service import ScheduleService
    from bot.core.service import QuizService
    from bot.core.web_links import WebLinks
    from bot.metrics import BotMetrics
    from bot.runner_fleet import OwnedRunner
    from bot.scheduling import RankZeroScheduler


@dataclass
class App:
    """The wired application: its engine (to dispose), its clock and its services."""

    engine: AsyncEngine
    service: QuizService
    #: Practice modes (quiz, flashcard review, explain); never touches standings.
    practice: PracticeService = field(kw_only=True)
    #: Disputes, previews, verification and answer corrections (bot/core/dispute_service.py).
    disputes: DisputeService = field(kw_only=True)
    #: Channel schedules (set, show, pause; the scheduled posts when ``rankzero serve`` runs them).
    schedules: ScheduleService = field(kw_only=True)
    #: The clock every service was given (the console game and practice sessions use it too).
    clock: Clock = field(kw_only=True)
    #: The runner client build_app opened (closed with the app), if any.
    runner: OwnedRunner | None = field(default=None, kw_only=True)
    #: The process's metrics (bot/metrics.py): what the services count; ``serve`` serves them.
    metrics: BotMetrics | None = field(default=None, kw_only=True)

    @property
    def runner_is_local(self) -> bool:
        """True when disputes start a local ``rankzero-runner serve`` on first use (it takes seconds)."""
        return isinstance(self.runner, LocalRunnerClient)

    async def close(self) -> None:
        """Release database connections (and the runner client's)."""
        if self.runner is not None:
            await self.runner.aclose()
        await self.engine.dispose()


@dataclass
class Services:
    """What adapters get at start: the use cases (schedule admin commands call ``schedules``) and the
    storage they need as ports (adapters import no storage: the ``adapters-know-no-storage`` contract).
    """

    quiz: QuizService
    schedules: ScheduleService
    scheduler: RankZeroScheduler
    app: App
    #: Delivery keys every process sees (redelivered events dropped across processes and restarts).
    deliveries: DeliveryLog | None = None
    #: Where admins' question drafts are written through (bot/adapters/drafts.py's DraftStore).
    drafts: DraftRepository | None = None
    #: What admins typed into question forms, kept a day (Discord reopens a lost form filled in).
    form_drafts: FormDraftRepository | None = None
    #: Slack OAuth mode: each workspace's install and bot token, and the OAuth states (in our database).
    slack_installations: AsyncInstallationStore | None = None
    slack_oauth_states: AsyncOAuthStateStore | None = None
    #: The process's metrics: adapters report acknowledgements and rate-limit retries here.
    metrics: BotMetrics | None = None
    #: Signs the read-only web page's links (None: the page is off; RANKZERO_WEB_SECRET is unset).
    web_links: WebLinks | None = None
