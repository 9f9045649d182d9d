"""The test variant of the composition root: tests wire the services through bot/bootstrap.py, as
``rankzero`` and ``serve`` do, with fakes passed in where the process would have real things (a frozen
clock, a platform that records posts, a scripted runner, a fixed seed) instead of building the services by
hand or patching them afterwards.

- :func:`build_test_app`: ``build_app`` over a migrated test database (the services of the CLI).
- :func:`build_test_services`: ``build_services`` for chat adapters (what ``serve`` hands them).
- :class:`Env` and :func:`open_env`: a test app with its fakes, for the service-level tests.
"""

from __future__ import annotations

import copy
import datetime as dt
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, overload

from sqlalchemy.ext.asyncio import AsyncEngine

from bot.bootstrap import build_app, build_services
from bot.config import Settings
from bot.core.ports import ChatPlatform, RunnerClient
from bot.metrics import BotMetrics
from bot.services import App, Services
from bot.storage.uow import SqlUnitOfWork
from tests.conftest import ADMIN, test_bank
from tests.fakes import FakePlatform, FrozenClock

if TYPE_CHECKING:
    from bot.adapters.registry import Adapter
    from bot.core.dispute_service import DisputeService
    from bot.core.practice import PracticeService
    from bot.core.schedule_service import ScheduleService
    from bot.core.service import QuizService
    from bot.scheduling import RankZeroScheduler

#: The seed every test app's random picks use, so that a test sees the same questions each run.
SEED = 1


def settings_for(database_url: str, **overrides: Any) -> Settings:
    """Settings over ``database_url`` with ``overrides``, from no .env file (a developer's own settings
    file must not change what a test sees)."""
    return Settings(_env_file=None, database_url=database_url, **overrides)  # type: ignore[call-arg]


async def _import(app: App, bank: Sequence[dict[str, Any]] | None) -> None:
    if bank:
        # A copy: a module's bank constant stays as written whatever the import does with its specs.
        await app.service.admin_import(ADMIN, copy.deepcopy(list(bank)))


async def build_test_app(
    database_url: str,
    *,
    clock: FrozenClock,
    platform: ChatPlatform | None = None,
    runner: RunnerClient | None = None,
    bank: Sequence[dict[str, Any]] | None = None,
    units_of_work: Callable[[AsyncEngine], Callable[[], SqlUnitOfWork]] | None = None,
    **settings: Any,
) -> App:
    """``build_app`` over a migrated database with the test's fakes, ``bank`` imported by the operator;
    ``settings`` are Settings fields (problems_per_challenge, disputes_per_hour, outbox_retry_base_s...).
    The caller closes the app (``await app.close()``)."""
    app = await build_app(
        settings_for(database_url, **settings),
        platform=platform,
        clock=clock,
        migrate=False,
        runner=runner,
        seed=SEED,
        units_of_work=units_of_work,
    )
    try:
        await _import(app, bank)
    except BaseException:
        await app.close()
        raise
    return app


async def build_test_services(
    database_url: str,
    adapters: Sequence[Adapter],
    *,
    clock: FrozenClock,
    runner: RunnerClient | None = None,
    bank: Sequence[dict[str, Any]] | None = None,
    metrics: BotMetrics | None = None,
    **settings: Any,
) -> Services:
    """``build_services`` for ``adapters`` over a migrated database (posts go through the platform router
    to the adapters, as in ``serve``), ``bank`` imported, ``metrics`` the process's (default: new ones).
    The caller closes ``services.app``."""
    services = await build_services(
        settings_for(database_url, **settings),
        adapters,
        clock=clock,
        migrate=False,
        runner=runner,
        seed=SEED,
        metrics=metrics,
    )
    try:
        await _import(services.app, bank)
    except BaseException:
        await services.app.close()
        raise
    return services


@dataclass
class Env:
    """A test app and the fakes it was built with; subclasses add a module's own helpers."""

    app: App
    platform: FakePlatform
    clock: FrozenClock
    #: The platforms the scheduler serves, as ``serve`` builds it (None: every platform).
    platforms: ClassVar[frozenset[str] | None] = None

    @property
    def quiz(self) -> QuizService:
        return self.app.service

    @property
    def schedules(self) -> ScheduleService:
        return self.app.schedules

    @property
    def disputes(self) -> DisputeService:
        return self.app.disputes

    @property
    def practice(self) -> PracticeService:
        return self.app.practice

    @property
    def engine(self) -> AsyncEngine:
        return self.app.engine

    async def scheduler(self) -> RankZeroScheduler:
        """A started scheduler over the schedules (the caller shuts it down)."""
        from bot.scheduling import RankZeroScheduler

        sched = RankZeroScheduler(self.schedules, self.clock, platforms=self.platforms, sync_interval_s=60)
        await sched.start()
        return sched

    async def at(self, sched: RankZeroScheduler, when: dt.datetime) -> None:
        """Move the clock and run what is due."""
        self.clock.current = when
        await sched.tick()


EnvT = TypeVar("EnvT", bound=Env)


# Overloaded so that a call without ``kind`` is typed as a plain Env (a TypeVar cannot take a default).
@overload
def open_env(
    db_url: str,
    clock: FrozenClock,
    platform: FakePlatform,
    *,
    kind: type[EnvT],
    bank: Sequence[dict[str, Any]] | None = None,
    **build: Any,
) -> AbstractAsyncContextManager[EnvT]: ...


@overload
def open_env(
    db_url: str,
    clock: FrozenClock,
    platform: FakePlatform,
    *,
    bank: Sequence[dict[str, Any]] | None = None,
    **build: Any,
) -> AbstractAsyncContextManager[Env]: ...


def open_env(
    db_url: str,
    clock: FrozenClock,
    platform: FakePlatform,
    *,
    kind: type[Env] = Env,
    bank: Sequence[dict[str, Any]] | None = None,
    **build: Any,
) -> AbstractAsyncContextManager[Env]:
    """A test app (as ``kind``) on ``db_url`` posting to ``platform``, the test bank unless ``bank`` is
    given (``[]``: none); ``build`` goes to :func:`build_test_app` (runner, units_of_work, settings)."""
    return _open_env(db_url, clock, platform, kind, bank, build)


@asynccontextmanager
async def _open_env(
    db_url: str,
    clock: FrozenClock,
    platform: FakePlatform,
    kind: type[Env],
    bank: Sequence[dict[str, Any]] | None,
    build: dict[str, Any],
) -> AsyncIterator[Env]:
    app = await build_test_app(
        db_url, clock=clock, platform=platform, bank=test_bank() if bank is None else bank, **build
    )
    try:
        yield kind(app, platform, clock)
    finally:
        await app.close()
