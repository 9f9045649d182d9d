"""aiosqlite with one trip to the connection's thread per statement.

aiosqlite runs every sqlite3 call on a worker thread, one queue hop each way per call (~0.1 ms on this
project's machines), and SQLAlchemy's aiosqlite adapter makes four such calls per statement: create a
cursor, execute, fetch the rows, close the cursor. A statement itself takes a few microseconds in SQLite,
so those hops were most of the answer path's time (profiled in benchmarks/engine.py: the event loop sat
idle waiting for the thread). ``OneHopConnection`` keeps aiosqlite's thread and queue (so SQLite never
blocks the event loop, not even while it waits on a lock held by another process) and runs
create/execute/fetch/close as one call on that thread.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

import aiosqlite


class OneHopCursor:
    """The part of aiosqlite's cursor SQLAlchemy uses; each execute is one call on the worker thread."""

    def __init__(self, connection: OneHopConnection) -> None:
        self._connection = connection
        self.description: Any = None
        self.rowcount = -1
        self.lastrowid: int | None = None
        self._rows: list[Any] = []

    async def execute(
        self, sql: str, parameters: Sequence[Any] | dict[str, Any] | None = None
    ) -> OneHopCursor:
        """Execute ``sql`` and fetch its rows (if any) in the same call on the worker thread."""
        conn = self._connection

        def run() -> tuple[Any, int, int | None, list[Any]]:
            cur = conn._conn.cursor()
            try:
                if parameters is None:
                    cur.execute(sql)
                else:
                    cur.execute(sql, parameters)
                rows = cur.fetchall() if cur.description else []
                return cur.description, cur.rowcount, cur.lastrowid, rows
            finally:
                cur.close()

        self.description, self.rowcount, self.lastrowid, self._rows = await conn._execute(run)  # type: ignore[no-untyped-call]
        return self

    async def executemany(self, sql: str, seq_of_parameters: Iterable[Any]) -> OneHopCursor:
        """Execute ``sql`` once per parameter set, in one call on the worker thread."""
        conn = self._connection

        def run() -> tuple[int, int | None]:
            cur = conn._conn.cursor()
            try:
                cur.executemany(sql, seq_of_parameters)
                return cur.rowcount, cur.lastrowid
            finally:
                cur.close()

        self.description = None
        self.rowcount, self.lastrowid = await conn._execute(run)  # type: ignore[no-untyped-call]
        return self

    async def fetchall(self) -> list[Any]:
        """The rows fetched by the last execute (no trip to the thread)."""
        rows, self._rows = self._rows, []
        return rows

    async def fetchone(self) -> Any:
        """The next row of the last execute, or None (SQLAlchemy's streaming results use these)."""
        return self._rows.pop(0) if self._rows else None

    async def fetchmany(self, size: int = 1) -> list[Any]:
        """The next ``size`` rows of the last execute."""
        rows, self._rows = self._rows[:size], self._rows[size:]
        return rows

    async def close(self) -> None:
        """Nothing to do: the sqlite3 cursor was closed on the worker thread."""


class OneHopConnection(aiosqlite.Connection):
    """An aiosqlite connection whose cursors execute and fetch in one call on the worker thread."""

    async def cursor(self) -> OneHopCursor:  # type: ignore[override]
        """A cursor (created without a trip to the thread: the sqlite3 one is made per statement)."""
        return OneHopCursor(self)


async def connect(database: str, *, busy_timeout_s: float) -> OneHopConnection:
    """Open ``database`` (a path or ``:memory:``) like ``aiosqlite.connect``, with one-hop cursors."""

    def connector() -> sqlite3.Connection:
        return sqlite3.connect(database, timeout=busy_timeout_s)

    connection = OneHopConnection(connector, 64)
    # Like SQLAlchemy's own aiosqlite connect: a connection never closed must not keep the process alive.
    # (aiosqlite 0.22's layout, pinned in pyproject.toml: the worker thread is an attribute.)
    connection._thread.daemon = True
    await connection
    return connection
