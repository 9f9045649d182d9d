"""bot/storage/sqlite_driver.py under SQLAlchemy: what the adapter reads from a cursor, and one worker-thread
call per statement."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import text

from bot.storage import sqlite_driver
from bot.storage.db import make_engine


async def test_one_hop_cursor_serves_sqlalchemy(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite+aiosqlite:///{tmp_path / 'd.db'}")
    calls = 0
    real = sqlite_driver.OneHopConnection._execute

    async def counting(self: object, fn: object, *args: object, **kw: object) -> object:
        nonlocal calls
        calls += 1
        return await real(self, fn, *args, **kw)

    sqlite_driver.OneHopConnection._execute = counting  # type: ignore[method-assign]
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
    finally:
        sqlite_driver.OneHopConnection._execute = real  # type: ignore[method-assign]
        await engine.dispose()
