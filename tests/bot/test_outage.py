"""Scheduled jobs through a database outage, on SQLite and PostgreSQL.

The outage is injected at the unit-of-work boundary: while it lasts, opening a unit of work raises the
``OperationalError`` SQLAlchemy raises when the server refuses the connection (the message of asyncpg's
refused connect). Everything else is real: the database, APScheduler's triggers, the services.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError

from bot.core.models import ChannelRef
from bot.core.schedule_service import ScheduleService
from bot.core.service import QuizService
from bot.scheduling import RankZeroScheduler
from bot.serve import health_report
from bot.storage.db import make_engine
from bot.storage.uow import SqlUnitOfWork, session_factory
from tests.bootstrap import Env as AppEnv
from tests.bootstrap import build_test_app
from tests.conftest import ADMIN, CHANNEL, test_bank
from tests.fakes import FakePlatform, FrozenClock

UTC = dt.UTC


class Outage:
    """A switch: while on, every new unit of work fails as a refused database connection does."""

    def __init__(self) -> None:
        self.on = False
        self.refused = 0

    def wrap(self, factory: Any) -> Any:
        def uow() -> SqlUnitOfWork:
            if self.on:
                self.refused += 1
                raise OperationalError(
                    "SELECT 1",
                    None,
                    ConnectionRefusedError(111, "Connect call failed ('127.0.0.1', 5432)"),
                )
            return SqlUnitOfWork(factory)

        return uow


@dataclass
class Env(AppEnv):
    """The app, and the switch of the outage its units of work go through."""

    outage: Outage


@pytest.fixture
async def env(db_url: str, clock: FrozenClock, platform: FakePlatform) -> AsyncIterator[Env]:
    outage = Outage()
    app = await build_test_app(
        db_url,
        clock=clock,
        platform=platform,
        bank=test_bank(),
        units_of_work=lambda engine: outage.wrap(session_factory(engine)),
    )
    try:
        yield Env(app, platform, clock, outage)
    finally:
        await app.close()


def at(hour: int, minute: int, second: int = 0, day: int = 21) -> dt.datetime:
    return dt.datetime(2026, 11, day, hour, minute, second, tzinfo=UTC)


async def test_a_post_due_during_an_outage_is_made_once_the_database_answers(env: Env) -> None:
    env.clock.current = at(8, 0)
    await env.schedules.set_schedule(ADMIN, CHANNEL, post_time="09:00", timezone="UTC", window="8h")
    sched = RankZeroScheduler(env.schedules, env.clock, sync_interval_s=3600, retry_base_s=5, retry_max_s=60)
    await sched.start()
    pk = (await env.schedules.schedules())[0].channel_pk
    try:
        env.outage.on = True
        await env.at(sched, at(9, 0))
        assert env.platform.posts == [] and env.outage.refused > 0
        assert sched.next_run(f"retry:post:{pk}") == at(9, 0, 5), "first retry after 5 s"
        assert sched.failing[f"post:{pk}"]["failures"] == 1
        await env.at(sched, at(9, 0, 5))
        assert sched.next_run(f"retry:post:{pk}") == at(9, 0, 15), "backoff doubles"
        await env.at(sched, at(9, 0, 15))
        await env.at(sched, at(9, 0, 35))
        await env.at(sched, at(9, 1, 15))
        await env.at(sched, at(9, 2, 15))
        assert sched.next_run(f"retry:post:{pk}") == at(9, 3, 15), "backoff is capped at 60 s"
        assert env.platform.posts == []

        env.outage.on = False  # the database answers again
        await env.at(sched, at(9, 3, 15))
        assert len(env.platform.posts) == 1, "the post is made once the database answers"
        challenge = await env.quiz.get_challenge(env.platform.posts[0][1].challenge_id)
        assert challenge.day == dt.date(2026, 11, 21) and challenge.closes_at == at(17, 0)
        assert sched.failing == {} and sched.next_run(f"retry:post:{pk}") is None
        assert sched.next_run(f"close:{challenge.id}") == at(17, 0), "its window is armed"
        await env.at(sched, at(9, 30))
        assert len(env.platform.posts) == 1, "posted once"
    finally:
        await sched.shutdown()


async def test_an_outage_longer_than_the_grace_period_skips_the_post_and_stops_retrying(env: Env) -> None:
    env.clock.current = at(8, 0)
    await env.schedules.set_schedule(ADMIN, CHANNEL, post_time="09:00", timezone="UTC", window="8h")
    env.schedules.grace = dt.timedelta(minutes=10)
    sched = RankZeroScheduler(env.schedules, env.clock, sync_interval_s=3600, retry_base_s=60, retry_max_s=60)
    await sched.start()
    pk = (await env.schedules.schedules())[0].channel_pk
    try:
        env.outage.on = True
        await env.at(sched, at(9, 0))
        env.outage.on = False
        await env.at(sched, at(9, 20))  # the retry runs late, beyond the 10 min grace
        assert env.platform.posts == []
        assert sched.failing == {} and sched.next_run(f"retry:post:{pk}") is None
    finally:
        await sched.shutdown()


async def test_reminder_and_weekly_summary_due_during_an_outage_are_sent_after_it(env: Env) -> None:
    # Monday 23 November 2026: the weekly summary (mon) and the post are both at 09:00.
    env.clock.current = at(8, 0, day=23)
    await env.schedules.set_schedule(
        ADMIN, CHANNEL, post_time="09:00", timezone="UTC", window="60m", reminder="15m", weekly_summary="mon"
    )
    sched = RankZeroScheduler(env.schedules, env.clock, sync_interval_s=3600, retry_base_s=5, retry_max_s=30)
    await sched.start()
    pk = (await env.schedules.schedules())[0].channel_pk
    try:
        env.outage.on = True
        await env.at(sched, at(9, 0, day=23))
        assert env.platform.posts == [] and env.platform.summaries == []
        assert {f"post:{pk}", f"summary:{pk}"} <= set(sched.failing)
        env.outage.on = False
        await env.at(sched, at(9, 0, 5, day=23))
        assert len(env.platform.posts) == 1 and len(env.platform.summaries) == 1
        challenge_id = env.platform.posts[0][1].challenge_id

        env.outage.on = True
        await env.at(sched, at(9, 45, day=23))
        assert env.platform.reminders == []
        assert f"remind:{challenge_id}" in sched.failing
        env.outage.on = False
        await env.at(sched, at(9, 45, 5, day=23))
        assert [r[1].challenge_id for r in env.platform.reminders] == [challenge_id]

        env.outage.on = True
        await env.at(sched, at(10, 0, day=23))
        assert env.platform.results == [] and f"close:{challenge_id}" in sched.failing
        env.outage.on = False
        await env.at(sched, at(10, 0, 5, day=23))
        assert len(env.platform.results) == 1 and sched.failing == {}
        assert len(env.platform.summaries) == 1 and len(env.platform.reminders) == 1
    finally:
        await sched.shutdown()


async def test_an_outage_logs_one_line_per_failure_and_one_traceback(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    env.clock.current = at(8, 0)
    await env.schedules.set_schedule(ADMIN, CHANNEL, post_time="09:00", timezone="UTC", window="8h")
    sched = RankZeroScheduler(env.schedules, env.clock, sync_interval_s=3600, retry_base_s=5, retry_max_s=5)
    await sched.start()
    caplog.set_level(logging.INFO, logger="bot")
    try:
        env.outage.on = True
        for second in range(0, 60, 5):
            await env.at(sched, at(9, 0, second))
        failures = [r for r in caplog.records if "failed" in r.getMessage() and r.name == "bot.scheduling"]
        # The post and the sync job each fail every 5 s: 12 failures each, one line each.
        assert len([r for r in failures if "post:" in r.getMessage()]) == 12
        assert len([r for r in failures if "sync" in r.getMessage()]) == 12
        assert sum(1 for r in failures if r.exc_info) == 1, "the traceback is logged once"
        assert all("\n" not in r.getMessage() for r in failures), "one line per failure"
        assert "ConnectionRefusedError" in failures[-1].getMessage() or "Connect call failed" in (
            failures[-1].getMessage()
        )
    finally:
        await sched.shutdown()


async def test_healthz_is_not_ok_while_a_job_fails_and_shows_no_stale_error_after(env: Env) -> None:
    env.clock.current = at(8, 0)
    await env.schedules.set_schedule(ADMIN, CHANNEL, post_time="09:00", timezone="UTC", window="8h")
    sched = RankZeroScheduler(env.schedules, env.clock, sync_interval_s=3600, retry_base_s=5, retry_max_s=5)
    await sched.start()
    try:
        assert (await health_report(env.engine, sched))["ok"] is True
        env.outage.on = True
        await env.at(sched, at(9, 0))
        env.outage.on = False
        # The database answers again, but the missed post is not made yet: not ok, and it says why.
        body = await health_report(env.engine, sched)
        assert body["ok"] is False and body["database"]["ok"] is True
        assert "Connect call failed" in str(body["scheduler"]["failing"])
        await env.at(sched, at(9, 0, 5))
        body = await health_report(env.engine, sched)
        assert body["ok"] is True and body["scheduler"]["failing"] == {}
        assert "error" not in str(body).lower(), body
    finally:
        await sched.shutdown()


class TcpProxy:
    """A loopback TCP proxy in front of PostgreSQL: ``down()`` is a real outage (connections reset, new
    ones refused), ``up()`` brings the same port back."""

    def __init__(self, host: str, port: int) -> None:
        self._target = (host, port)
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self.port = 0

    async def up(self) -> None:
        self._server = await asyncio.start_server(self._pipe, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def down(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in list(self._writers):
            writer.transport.abort()
        await self._server.wait_closed()
        self._writers.clear()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self._target)
        except OSError:
            writer.transport.abort()
            return
        self._writers |= {writer, up_writer}

        async def copy(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                dst.transport.abort()

        await asyncio.gather(copy(reader, up_writer), copy(up_reader, writer))


@pytest.mark.postgres
async def test_a_real_postgres_outage_delays_the_post_until_the_server_answers(
    pg_database: str, clock: FrozenClock
) -> None:
    url = make_url(pg_database)
    proxy = TcpProxy(url.host or "127.0.0.1", url.port or 5432)
    await proxy.up()
    engine = make_engine(url.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False))
    factory = session_factory(engine)
    platform = FakePlatform()
    quiz = QuizService(lambda: SqlUnitOfWork(factory), clock, platform, seed=1)
    schedules = ScheduleService(lambda: SqlUnitOfWork(factory), clock, quiz, platform)
    channel = ChannelRef("test", "ws-outage", "outage", "outage")
    clock.current = at(8, 0)
    await quiz.admin_import(ADMIN, test_bank())
    await schedules.set_schedule(ADMIN, channel, post_time="09:00", timezone="UTC", window="8h")
    sched = RankZeroScheduler(schedules, clock, sync_interval_s=3600, retry_base_s=5, retry_max_s=5)
    await sched.start()
    try:
        await proxy.down()
        clock.current = at(9, 0)
        await sched.tick()
        assert platform.posts == [] and any(k.startswith("post:") for k in sched.failing)
        assert "ConnectionRefusedError" in str(sched.failing) or "Connect call failed" in str(sched.failing)
        await proxy.up()  # the same port: the server answers again
        clock.current = at(9, 0, 5)
        await sched.tick()
        assert [c.channel_id for c, _ in platform.posts] == ["outage"]
        assert sched.failing == {}
    finally:
        await sched.shutdown()
        await engine.dispose()
        await proxy.down()
