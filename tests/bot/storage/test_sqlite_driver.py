"""bot/storage/sqlite_driver.py under SQLAlchemy: what the adapter reads from a cursor, one trip to the
connection's thread per statement, and the thread's lifecycle."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from bot.storage import sqlite_driver
from bot.storage.db import make_engine


async def test_one_hop_cursor_serves_sqlalchemy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    engine = make_engine(f"sqlite+aiosqlite:///{tmp_path / 'd.db'}")
    calls = 0
    real = sqlite_driver.OneHopConnection.run

    async def counting(self: sqlite_driver.OneHopConnection, fn: Any, *args: Any) -> Any:
        nonlocal calls
        calls += 1
        return await real(self, fn, *args)

    monkeypatch.setattr(sqlite_driver.OneHopConnection, "run", counting)
    try:
        async with engine.begin() as conn:
            await conn.execute(text("CREATE TABLE t (id INTEGER PRIMARY KEY, k TEXT UNIQUE, n INTEGER)"))
            calls = 0
            inserted = await conn.execute(
                text("INSERT INTO t (k, n) VALUES (:k, :n) RETURNING id"), {"k": "a", "n": 1}
            )
            assert inserted.scalar_one() == 1
            assert calls == 1, "execute + fetch + close in one call on the worker thread"
            rows = [{"k": f"m{i}", "n": i} for i in range(5)]
            many = await conn.execute(text("INSERT INTO t (k, n) VALUES (:k, :n)"), rows)
            assert many.rowcount == 5
            updated = await conn.execute(text("UPDATE t SET n = n + 1 WHERE n >= 3"))
            assert updated.rowcount == 2
            nothing = await conn.execute(
                text("INSERT INTO t (k, n) VALUES ('a', 9) ON CONFLICT DO NOTHING RETURNING id")
            )
            assert nothing.first() is None
            streamed = await conn.stream(text("SELECT k FROM t ORDER BY id"))
            assert [row.k async for row in streamed] == ["a", "m0", "m1", "m2", "m3", "m4"]
        async with engine.connect() as conn:
            assert await conn.scalar(text("SELECT sum(n) FROM t")) == 1 + 0 + 1 + 2 + 4 + 5
            # BEGIN IMMEDIATE is ours (autocommit driver): a failed transaction leaves nothing behind.
        with pytest.raises(Exception, match="UNIQUE"):
            async with engine.begin() as conn:
                await conn.execute(text("INSERT INTO t (k, n) VALUES ('z', 0)"))
                await conn.execute(text("INSERT INTO t (k, n) VALUES ('a', 0)"))
        async with engine.connect() as conn:
            assert await conn.scalar(text("SELECT count(*) FROM t WHERE k = 'z'")) == 0
            assert await conn.scalar(text("PRAGMA journal_mode")) == "wal"
            assert await conn.scalar(text("PRAGMA foreign_keys")) == 1
    finally:
        await engine.dispose()


async def test_sqlite_runs_on_the_connection_thread_and_close_ends_it(tmp_path: Path) -> None:
    conn = await sqlite_driver.connect(str(tmp_path / "x.db"), busy_timeout_s=1)
    loop_thread = threading.get_ident()
    ran_on = await conn.run(threading.get_ident)
    assert ran_on != loop_thread, "SQLite never runs on the event loop's thread"
    cur = await conn.execute("SELECT 1 AS one")
    assert cur.description[0][0] == "one" and await cur.fetchall() == [(1,)]
    assert conn.isolation_level is None
    await conn.close()
    await conn.close()  # a second close is harmless, as with aiosqlite
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):
        await conn.execute("SELECT 1")
    await asyncio.sleep(0.05)
    assert not any(t.name.startswith("rankzero-sqlite") and t.ident == ran_on for t in threading.enumerate())


async def test_a_locked_database_waits_on_the_thread_not_the_loop(tmp_path: Path) -> None:
    """Another process's write lock: the busy wait blocks the connection's thread, never the event loop."""
    path = tmp_path / "locked.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE t (n INTEGER)")
    holder.execute("BEGIN IMMEDIATE")
    conn = await sqlite_driver.connect(str(path), busy_timeout_s=0.5)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    task = asyncio.create_task(ticker())
    try:
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            await conn.execute("BEGIN IMMEDIATE")
        assert ticks >= 10, "the event loop kept running during the 0.5 s busy wait"
    finally:
        task.cancel()
        holder.close()
        await conn.close()


async def test_a_rollback_cancelled_on_its_way_still_rolls_back_and_the_task_ends_cancelled(
    tmp_path: Path,
) -> None:
    conn = await sqlite_driver.connect(str(tmp_path / "r.db"), busy_timeout_s=1)
    gate = threading.Event()
    try:
        await conn.execute("CREATE TABLE t (n INTEGER)")
        await conn.execute("BEGIN IMMEDIATE")
        await conn.execute("INSERT INTO t VALUES (1)")
        blocker = asyncio.ensure_future(conn.run(gate.wait))  # the thread is busy: the rollback queues
        rolling = asyncio.ensure_future(conn.rollback())
        await asyncio.sleep(0)
        rolling.cancel()
        await asyncio.sleep(0)
        assert not rolling.done(), "the rollback waits for its call on the thread"
        gate.set()
        await blocker
        with pytest.raises(asyncio.CancelledError):
            await rolling  # the cancellation is passed on once the rollback is done
        assert not await conn.run(lambda: conn.sqlite.in_transaction)
        assert await (await conn.execute("SELECT count(*) FROM t")).fetchall() == [(0,)]
    finally:
        gate.set()
        await conn.close()


async def test_a_timeout_around_a_rollback_still_reads_as_a_timeout(tmp_path: Path) -> None:
    """The swallowed cancellation is asked again without being counted twice (``asyncio.timeout``)."""
    conn = await sqlite_driver.connect(str(tmp_path / "t.db"), busy_timeout_s=1)
    gate = threading.Event()
    try:
        blocker = asyncio.ensure_future(conn.run(gate.wait))

        async def bounded() -> None:
            async with asyncio.timeout(0):
                await conn.rollback()
                gate.set()  # not reached: the timeout's cancellation comes at the next await
                await asyncio.sleep(0)

        waiting = asyncio.ensure_future(bounded())
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        gate.set()
        await blocker
        with pytest.raises(TimeoutError):
            await waiting
    finally:
        gate.set()
        await conn.close()
