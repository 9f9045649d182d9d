"""Composition: Settings -> engine -> unit of work -> service. Used by the CLI and by tests."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy.ext.asyncio import AsyncEngine

from bot.config import Settings
from bot.core.dispute_service import DisputeService
from bot.core.ports import ChatPlatform, Clock, RunnerClient, SystemClock
from bot.core.practice import PracticeService
from bot.core.service import QuizService
from bot.runner_client import HttpRunnerClient, LocalRunnerClient
from bot.storage.db import make_engine, upgrade_async
from bot.storage.group_commit import GroupCommit, default_lanes
from bot.storage.uow import SqlUnitOfWork, session_factory
from questions.loader import default_bank_dir, load_paths


@dataclass
class App:
    """The wired application: its engine (to dispose) and its service."""

    engine: AsyncEngine
    service: QuizService
    #: Practice modes (quiz, flashcard review, explain); never touches standings.
    practice: PracticeService = field(kw_only=True)
    #: Disputes, previews, verification and answer corrections (bot/core/dispute_service.py).
    disputes: DisputeService = field(kw_only=True)
    #: The runner client build_app opened (closed with the app), if any.
    runner: HttpRunnerClient | LocalRunnerClient | None = field(default=None, kw_only=True)

    async def close(self) -> None:
        """Release database connections (and the runner client's)."""
        if self.runner is not None:
            await self.runner.aclose()
        await self.engine.dispose()


async def build_app(
    settings: Settings,
    *,
    platform: ChatPlatform | None = None,
    clock: Clock | None = None,
    migrate: bool = True,
    runner: RunnerClient | None = None,
    local_runner: bool = False,
) -> App:
    """Migrate the database (unless told not to) and wire the service.

    ``runner`` defaults to an HttpRunnerClient on RANKZERO_RUNNER_URL when that is set; otherwise, with
    ``local_runner``, to a ``rankzero-runner serve`` subprocess started on first use.
    """
    if migrate:
        await upgrade_async(settings.database_url)
    engine = make_engine(settings.database_url)
    factory = session_factory(engine)
    service = QuizService(
        lambda: SqlUnitOfWork(factory),
        clock or SystemClock(),
        platform,
        problems_per_challenge=settings.problems_per_challenge,
        # Players clicking together (right after the daily post) share transactions: group commit.
        transactions=GroupCommit(lambda: SqlUnitOfWork(factory), lanes=default_lanes(engine)),
    )
    practice = PracticeService(lambda: SqlUnitOfWork(factory), clock or SystemClock())
    owned: HttpRunnerClient | LocalRunnerClient | None = None
    if runner is None and settings.runner_url:
        token = settings.runner_token.get_secret_value() if settings.runner_token else None
        owned = HttpRunnerClient(settings.runner_url, token)
    elif runner is None and local_runner:
        owned = LocalRunnerClient()
    runner = runner or owned
    disputes = DisputeService(
        lambda: SqlUnitOfWork(factory),
        clock or SystemClock(),
        runner,
        platform,
        runs_per_hour=settings.disputes_per_hour,
    )
    return App(engine, service, practice=practice, disputes=disputes, runner=owned)


def shipped_bank_specs() -> list[dict[str, object]]:
    """The bank shipped in questions/bank, validated, as spec dicts ready to import."""
    return [q.spec.model_dump(mode="json", exclude_none=True) for q in load_paths([default_bank_dir()])]
