"""SqlUnitOfWork.record_answer on SQLite (three statements) and PostgreSQL (one statement of CTEs): the
edge cases a race produces, which the service tests reach only by timing."""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from bot.core.ports import AttemptConflictError, TransientConflictError
from bot.core.repositories import AnswerWrite
from bot.core.service import QuizService
from bot.core.standings import standing_keys
from bot.storage.db import make_engine
from bot.storage.uow import SqlUnitOfWork, session_factory
from tests.conftest import ADMIN, CHANNEL, START, actor, test_bank
from tests.fakes import FrozenClock


@pytest.fixture
async def setup(db_url: str, clock: FrozenClock) -> AsyncIterator[tuple[QuizService, SqlUnitOfWork, str]]:
    engine = make_engine(db_url)
    factory = session_factory(engine)
    svc = QuizService(lambda: SqlUnitOfWork(factory), clock, None, seed=1)
    await svc.admin_import(ADMIN, test_bank())
    yield svc, SqlUnitOfWork(factory), db_url
    await engine.dispose()


async def _count(url: str, sql: str) -> int:
    engine = make_engine(url)
    try:
        async with engine.connect() as conn:
            return int(await conn.scalar(text(sql)) or 0)
    finally:
        await engine.dispose()


async def test_record_answer_writes_ends_and_refuses_a_taken_attempt(
    setup: tuple[QuizService, SqlUnitOfWork, str],
) -> None:
    svc, uow, url = setup
    ch, _ = await svc.open_challenge(CHANNEL)
    p = ch.problems[0]
    await svc.start_problem(actor("ann"), p.id)
    await svc.start_problem(actor("bob"), p.id)
    at = START + dt.timedelta(seconds=10)
    async with uow:
        ann = await uow.plays.play_context(p.id, actor("ann").player)
        bob = await uow.plays.play_context(p.id, actor("bob").player)
    assert ann and ann.session and ann.player_pk and bob and bob.session and bob.player_pk
    keys = standing_keys(ch.channel_pk, ch.channel, ch.day)

    def write(session_id: int, player_pk: int, key: str) -> AnswerWrite:
        return AnswerWrite(
            session_id, player_pk, p.question.version_id, 1, "A", True, at, 10_000, key, "correct", 150, keys
        )

    async with uow:
        assert await uow.plays.record_answer(write(ann.session.id, ann.player_pk, "k-ann")) is True
    assert await _count(url, "SELECT count(*) FROM standings") == 6
    assert await _count(url, "SELECT count(*) FROM standings WHERE points = 150 AND correct = 1") == 6

    # The same attempt number again (a concurrent click that lost): refused, nothing written.
    with pytest.raises(AttemptConflictError):
        async with uow:
            await uow.plays.record_answer(write(ann.session.id, ann.player_pk, "k-ann-2"))
    assert await _count(url, "SELECT count(*) FROM attempts") == 1
    assert await _count(url, "SELECT sum(points) FROM standings") == 6 * 150

    # A session ended meanwhile (the challenge closed): the attempt is kept, the end and standings not.
    async with uow:
        assert await uow.plays.finish_session(bob.session.id, "timeout", 0, at)
    async with uow:
        assert await uow.plays.record_answer(write(bob.session.id, bob.player_pk, "k-bob")) is False
    assert await _count(url, "SELECT count(*) FROM attempts") == 2
    assert await _count(url, f"SELECT count(*) FROM standings WHERE player_pk = {bob.player_pk}") == 0
    timed_out = f"SELECT count(*) FROM play_sessions WHERE id = {bob.session.id} AND outcome = 'timeout'"
    assert await _count(url, timed_out) == 1


async def test_play_context_counts_finished_problems_of_this_challenge_only(
    setup: tuple[QuizService, SqlUnitOfWork, str], clock: FrozenClock
) -> None:
    """The answer path skips the completion check from this count: other days must not leak into it."""
    svc, uow, _ = setup
    kim = actor("kim")
    yesterday, _ = await svc.open_challenge(CHANNEL)
    for p in yesterday.problems:
        await svc.start_problem(kim, p.id)
        await svc.answer(kim, p.id, "A")
    clock.advance(24 * 3600)
    today, _ = await svc.open_challenge(CHANNEL)
    assert today.id != yesterday.id
    first, second = today.problems[0], today.problems[1]
    await svc.start_problem(kim, first.id)
    async with uow:
        ctx = await uow.plays.play_context(first.id, kim.player, "k", for_answer=True)
    assert ctx is not None and ctx.finished == 0, "yesterday's five finished problems are not today's"
    await svc.answer(kim, first.id, "A")
    await svc.start_problem(kim, second.id)
    async with uow:
        ctx = await uow.plays.play_context(second.id, kim.player, "k2", for_answer=True)
    assert ctx is not None and ctx.finished == 1


@pytest.mark.postgres
async def test_a_transaction_postgresql_aborts_for_a_deadlock_becomes_a_transient_conflict(
    pg_database: str,
) -> None:
    """SQLSTATE 40P01 (deadlock detected; 40001 likewise) leaves the unit of work as TransientConflictError,
    which close_challenge retries; any other database error passes through unchanged."""
    engine = make_engine(pg_database)
    uow = SqlUnitOfWork(session_factory(engine))
    raising = "DO $$ BEGIN RAISE EXCEPTION '{}' USING ERRCODE = '{}'; END $$"
    try:
        with pytest.raises(TransientConflictError) as caught:
            async with uow:
                await uow.s.execute(text(raising.format("simulated", "40P01")))
        assert "simulated" in str(caught.value)
        with pytest.raises(DBAPIError):
            async with uow:
                await uow.s.execute(text(raising.format("other", "22012")))
    finally:
        await engine.dispose()
