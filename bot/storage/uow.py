"""SqlUnitOfWork: the UnitOfWork port over SQLAlchemy's AsyncSession (one session per use case).

It holds the transaction and nothing else: ``async with`` opens it, a clean exit commits, an exception
rolls back. The repositories it hands out (``uow.challenges``, ``uow.plays``...; bot/storage/repositories/)
all work on that one session through a shared ``SqlContext``.
"""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING

from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from bot.core.ports import TransientConflictError, UnitOfWork
from bot.storage.repositories.challenges import SqlChallengeRepository
from bot.storage.repositories.corrections import SqlCorrectionRepository
from bot.storage.repositories.difficulty import SqlDifficultyRepository
from bot.storage.repositories.disputes import SqlDisputeRepository
from bot.storage.repositories.outbox import SqlOutboxRepository
from bot.storage.repositories.players import SqlPlayerRepository
from bot.storage.repositories.plays import SqlPlayRepository
from bot.storage.repositories.practice import SqlPracticeRepository, SqlPracticeSettingsRepository
from bot.storage.repositories.questions import SqlQuestionRepository
from bot.storage.repositories.schedules import SqlScheduleRepository
from bot.storage.repositories.standings import SqlStandingRepository
from bot.storage.sql import TRANSIENT_SQLSTATES, SqlContext, sqlstate


class SqlUnitOfWork:
    """One transaction on one AsyncSession. Use ``async with SqlUnitOfWork(factory) as uow``."""

    def __init__(self, factory: async_sessionmaker[AsyncSession]) -> None:
        self._factory = factory
        self._db = db = SqlContext()
        #: True while several jobs share this transaction (bot.storage.group_commit): no job may then
        #: commit or roll back on its own.
        self.shared = False
        self.players = SqlPlayerRepository(db)
        self.questions = SqlQuestionRepository(db)
        self.challenges = SqlChallengeRepository(db)
        self.schedules = SqlScheduleRepository(db)
        self.plays = SqlPlayRepository(db)
        self.standings = SqlStandingRepository(db)
        self.disputes = SqlDisputeRepository(db)
        self.corrections = SqlCorrectionRepository(db, self.challenges, self.plays)
        self.practice = SqlPracticeRepository(db)
        self.practice_settings = SqlPracticeSettingsRepository(db)
        self.outbox = SqlOutboxRepository(db)
        self.difficulty = SqlDifficultyRepository(db)

    @property
    def s(self) -> AsyncSession:
        """The open session (only inside ``async with``)."""
        return self._db.s

    async def __aenter__(self) -> SqlUnitOfWork:
        session = self._db.session = self._factory()
        await session.begin()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        session = self.s
        try:
            if exc_type is None and session.in_transaction():
                await session.commit()
            else:
                await session.rollback()
        except DBAPIError as error:
            if sqlstate(error) in TRANSIENT_SQLSTATES:
                raise TransientConflictError(str(error.orig)) from error
            raise
        finally:
            await session.close()
            self._db.session = None
        if isinstance(exc, DBAPIError) and sqlstate(exc) in TRANSIENT_SQLSTATES:
            raise TransientConflictError(str(exc.orig)) from exc

    async def commit(self) -> None:
        """Commit and open the next transaction on the same session."""
        self._own_transaction("commit")
        await self.s.commit()
        await self.s.begin()

    async def rollback(self) -> None:
        """Roll back and open the next transaction."""
        self._own_transaction("roll back")
        await self.s.rollback()
        await self.s.begin()

    def _own_transaction(self, what: str) -> None:
        if self.shared:
            # GroupCommit reruns the job in a transaction of its own, where this is allowed.
            raise RuntimeError(f"a job cannot {what} a transaction it shares with other jobs")

    async def next_job(self) -> None:
        """Between two jobs of a shared transaction: write pending objects, forget cached ones."""
        await self.s.flush()
        self.s.expunge_all()


def session_factory(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    """A session factory whose objects stay usable after commit (we return plain values anyway)."""
    return async_sessionmaker(engine, expire_on_commit=False, autobegin=False)


if TYPE_CHECKING:  # mypy proves here that the class (and each repository it hands out) fits its port

    def _fits_port(uow: SqlUnitOfWork) -> UnitOfWork:
        return uow
