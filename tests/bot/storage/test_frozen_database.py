"""A database that stops answering (issue 25, section 2): a real frozen proxy in front of PostgreSQL.

The proxy (tests/frozen_proxy.py) accepts connections and bytes and forwards nothing: no refusal, no
reset, only silence. Without bounds every call then waits for ever. These tests check the bounds by the
state they leave, never by a wall-clock limit: a call fails with a timeout, a job is reported failing
with its deadline, the sync picks up a schedule change once the server answers, a shutdown names the work
it abandoned. ``guarded`` only keeps a regression from hanging the suite.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.bootstrap import build_app, engine_timeouts
from bot.config import Settings
from bot.core.models import ChannelRef
from bot.core.schedule_service import ScheduleService
from bot.core.service import QuizService
from bot.scheduling import RankZeroScheduler
from bot.serve import health_report
from bot.storage.db import EngineTimeouts, make_engine
from bot.storage.uow import SqlUnitOfWork, session_factory
from tests.conftest import ADMIN, test_bank
from tests.fakes import FakePlatform, FrozenClock
from tests.frozen_proxy import FrozenProxy, frozen_proxy

T = TypeVar("T")
UTC = dt.UTC
#: Only against a hang of the code under test (a regression), never an assertion on speed.
HANG_GUARD_S = 120
CHANNEL = ChannelRef("test", "ws-frozen", "frozen", "frozen")


async def guarded(awaitable: Awaitable[T]) -> T:
    """``awaitable``'s result; a hang (a regression) fails as one, never as the TimeoutError tested for."""
    guard = asyncio.timeout(HANG_GUARD_S)
    try:
        async with guard:
            return await awaitable
    except TimeoutError:
        if guard.expired():
            raise AssertionError(f"still waiting after {HANG_GUARD_S} s: it hangs") from None
        raise


def at(hour: int, minute: int, second: int = 0) -> dt.datetime:
    return dt.datetime(2026, 11, 21, hour, minute, second, tzinfo=UTC)


@pytest.fixture
def proxy(pg_database: str) -> Iterator[FrozenProxy]:
    with frozen_proxy(pg_database) as started:
        yield started


@dataclass
class Frozen:
    """Services through the proxy (this process) and straight to the server (another process)."""

    proxy: FrozenProxy
    engine: AsyncEngine
    schedules: ScheduleService
    elsewhere: ScheduleService
    clock: FrozenClock


def _schedules(engine: AsyncEngine, clock: FrozenClock) -> ScheduleService:
    factory = session_factory(engine)
    quiz = QuizService(lambda: SqlUnitOfWork(factory), clock, FakePlatform(), seed=1)
    return ScheduleService(lambda: SqlUnitOfWork(factory), clock, quiz, FakePlatform())


@pytest.fixture
async def frozen(pg_database: str, proxy: FrozenProxy, clock: FrozenClock) -> AsyncIterator[Frozen]:
    # No driver bound on statements here: what ends a frozen job in these tests is the job's deadline.
    engine = make_engine(proxy.url(pg_database), timeouts=EngineTimeouts(statement_s=None))
    direct = make_engine(pg_database)
    async with direct.begin() as conn:
        await conn.execute(text("TRUNCATE channels, schedules RESTART IDENTITY CASCADE"))
    elsewhere = _schedules(direct, clock)
    yield Frozen(proxy, engine, _schedules(engine, clock), elsewhere, clock)
    proxy.thaw()
    await engine.dispose()
    await direct.dispose()


async def test_a_frozen_sync_fails_at_its_deadline_health_names_it_and_it_recovers(frozen: Frozen) -> None:
    frozen.clock.current = at(8, 0)
    await frozen.elsewhere.set_schedule(ADMIN, CHANNEL, post_time="09:00", timezone="UTC", window="8h")
    sched = RankZeroScheduler(
        frozen.schedules, frozen.clock, sync_interval_s=30, retry_base_s=5, retry_max_s=5, job_deadline_s=1
    )
    await sched.start()
    try:
        pk = (await frozen.elsewhere.schedules())[0].channel_pk
        assert sched.next_run(f"post:{pk}") == at(9, 0)

        frozen.proxy.freeze()
        frozen.clock.current = at(8, 0, 30)  # the sync is due; its first statement never gets an answer
        await guarded(sched.tick())
        failing = sched.failing["sync"]
        assert "JobDeadlineError" in failing["error"] and "1 s deadline" in failing["error"], failing
        assert sched.next_run("retry:sync") == at(8, 0, 35)
        body = await guarded(health_report(frozen.engine, sched))
        assert body["ok"] is False and "sync" in body["scheduler"]["failing"]
        assert body["database"]["ok"] is False and "no answer within" in body["database"]["error"]

        # Another process moves the post to 10:30 meanwhile; the server answers again afterwards.
        await frozen.elsewhere.set_schedule(ADMIN, CHANNEL, post_time="10:30")
        frozen.proxy.thaw()
        frozen.clock.current = at(8, 0, 35)
        await guarded(sched.tick())
        assert "sync" not in sched.failing, sched.failing
        # The outbox's pass (every 15 s) that ran into the freeze too recovers at its next run.
        frozen.clock.current = at(8, 0, 45)
        await guarded(sched.tick())
        assert sched.failing == {}, sched.failing
        assert sched.next_run(f"post:{pk}") == at(10, 30), "the change made during the freeze is picked up"
        body = await guarded(health_report(frozen.engine, sched))
        assert body["ok"] is True, body
    finally:
        frozen.proxy.thaw()
        await guarded(sched.shutdown())


async def test_the_settings_bound_every_call_on_a_frozen_database(
    pg_database: str, proxy: FrozenProxy
) -> None:
    settings = Settings(
        database_url=proxy.url(pg_database),
        db_connect_timeout_s=1,
        db_statement_timeout_s=1,
        db_pool_timeout_s=1,
    )
    app = await build_app(settings, migrate=False)
    try:
        await app.service.admin_import(ADMIN, test_bank())  # a warm pooled connection, then the freeze
        proxy.freeze()
        # A pooled connection (its pre-ping, then the statement) and a new one (its connect) both fail.
        with pytest.raises(TimeoutError):
            await guarded(app.service.leaderboard(CHANNEL))
        with pytest.raises(TimeoutError):
            await guarded(app.service.leaderboard(CHANNEL))
        assert proxy.held_connections >= 1, "a new connection was tried, and given up"
        proxy.thaw()
        board = await guarded(app.service.leaderboard(CHANNEL))
        assert board.total_players == 0, "after the thaw the same engine answers"
    finally:
        proxy.thaw()
        await app.close()


def test_the_settings_name_every_bound() -> None:
    settings = Settings(
        db_connect_timeout_s=3, db_statement_timeout_s=4, db_pool_timeout_s=5, sqlite_busy_timeout_s=6
    )
    assert engine_timeouts(settings) == EngineTimeouts(connect_s=3, statement_s=4, pool_s=5, sqlite_busy_s=6)
    defaults = Settings()
    assert (defaults.job_deadline_s, defaults.handler_deadline_s, defaults.shutdown_timeout_s) == (
        120,
        60,
        15,
    )
    with pytest.raises(ValueError, match="db_statement_timeout_s"):
        Settings(db_statement_timeout_s=0)


async def test_the_sqlite_busy_timeout_is_the_setting(db: str) -> None:
    app = await build_app(Settings(database_url=db, sqlite_busy_timeout_s=0.25), migrate=False)
    try:
        async with app.engine.connect() as conn:
            assert (await conn.execute(text("PRAGMA busy_timeout"))).scalar() == 250
        # Another process holds the write lock: the write gives up after the busy timeout, with an error.
        other = sqlite3.connect(db.removeprefix("sqlite+aiosqlite:///"), isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(Exception, match="locked"):
                await guarded(app.service.admin_import(ADMIN, test_bank()))
        finally:
            other.execute("ROLLBACK")
            other.close()
    finally:
        await app.close()


async def test_a_job_stuck_past_its_deadline_is_unhealthy_and_shutdown_abandons_it(
    db: str, clock: FrozenClock
) -> None:
    """A job whose cleanup waits on the silent database again cannot be cancelled: it is reported
    ``stuck`` (health 503, naming it) and a bounded shutdown abandons it instead of waiting."""
    released = asyncio.Event()
    cancelled = asyncio.Event()

    async def silent() -> Any:
        try:
            await asyncio.Event().wait()  # a statement the server never answers
        except asyncio.CancelledError:
            cancelled.set()
            await released.wait()  # the rollback that follows, on the same silent connection
            raise

    engine = make_engine(db)
    schedules = _schedules(engine, clock)
    sched = RankZeroScheduler(schedules, clock, sync_interval_s=60, job_deadline_s=0.2)
    await sched.start()
    try:
        schedules.end_windowless = silent  # type: ignore[method-assign]  # the sync's first call
        clock.current = clock.now() + dt.timedelta(seconds=60)
        sched.jobs.run_due()  # starts the sync, as the wake-up task would
        await guarded(cancelled.wait())
        while "sync" not in sched.state()["stuck"]:  # stuck once the deadline has passed
            await asyncio.sleep(0.05)
        body = await health_report(engine, sched)
        assert body["ok"] is False and body["database"]["ok"] is True
        assert body["scheduler"]["stuck"]["sync"]["deadline_s"] == 0.2
        abandoned = await guarded(sched.shutdown(timeout_s=0.1))
        assert abandoned == ["sync"]
    finally:
        released.set()
        await engine.dispose()


async def test_the_practice_batches_have_until_their_next_run(db: str, clock: FrozenClock) -> None:
    """The nudge batch (one DM per player) is not cut at the job deadline meant for single posts."""
    finished = asyncio.Event()

    async def slow_nudges() -> None:
        await asyncio.sleep(0.5)  # longer than the job deadline below, far shorter than the hour
        finished.set()

    engine = make_engine(db)
    sched = RankZeroScheduler(_schedules(engine, clock), clock, nudge=slow_nudges, job_deadline_s=0.1)
    try:
        await guarded(sched.start())  # the start sends the nudges once
        assert finished.is_set() and "nudge" not in sched.failing
    finally:
        await sched.shutdown()
        await engine.dispose()
