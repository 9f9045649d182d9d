"""Composition: Settings -> engine -> unit of work -> service. Used by the CLI and by tests."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy.ext.asyncio import AsyncEngine

from bot.config import Settings
from bot.core.ports import ChatPlatform, Clock, SystemClock
from bot.core.practice import PracticeService
from bot.core.service import QuizService
from bot.storage.db import make_engine, upgrade_async
from bot.storage.practice import SqlPracticeUnitOfWork
from bot.storage.uow import SqlUnitOfWork, session_factory
from questions.loader import default_bank_dir, load_paths


@dataclass
class App:
    """The wired application: its engine (to dispose) and its service."""

    engine: AsyncEngine
    service: QuizService
    #: Practice modes (quiz, flashcard review, explain); never touches standings.
    practice: PracticeService = field(kw_only=True)

    async def close(self) -> None:
        """Release database connections."""
        await self.engine.dispose()


async def build_app(
    settings: Settings,
    *,
    platform: ChatPlatform | None = None,
    clock: Clock | None = None,
    migrate: bool = True,
) -> App:
    """Migrate the database (unless told not to) and wire the service."""
    if migrate:
        await upgrade_async(settings.database_url)
    engine = make_engine(settings.database_url)
    factory = session_factory(engine)
    service = QuizService(
        lambda: SqlUnitOfWork(factory),
        clock or SystemClock(),
        platform,
        problems_per_challenge=settings.problems_per_challenge,
    )
    practice = PracticeService(lambda: SqlPracticeUnitOfWork(factory), clock or SystemClock())
    return App(engine, service, practice=practice)


def shipped_bank_specs() -> list[dict[str, object]]:
    """The bank shipped in questions/bank, validated, as spec dicts ready to import."""
    return [q.spec.model_dump(mode="json", exclude_none=True) for q in load_paths([default_bank_dir()])]
