"""SQLite for SQLAlchemy's aiosqlite dialect, with one trip to the database thread per statement.

sqlite3 is blocking, so an async driver runs it on a worker thread, one queue hop each way per call (~0.1
ms on this project's machines). SQLAlchemy's aiosqlite adapter makes four such calls per statement (create
a cursor, execute, fetch the rows, close the cursor), and a statement itself takes a few microseconds in
SQLite, so those hops were most of the answer path's time (profiled with benchmarks/engine.py: the event
loop sat idle waiting for the thread). Here create/execute/fetch/close are one call on the thread.

Public APIs only: the stdlib's sqlite3, one thread per connection fed through a ``queue.SimpleQueue`` whose
results come back with ``loop.call_soon_threadsafe`` (so SQLite never blocks the event loop, not even while
it waits on a lock held by another process; lighter than ``run_in_executor``, whose concurrent future is
chained to an asyncio one per call: ~10-15 % of the answer path), handed to SQLAlchemy
through ``create_async_engine(async_creator=...)``; the object returned offers the methods SQLAlchemy's
aiosqlite adapter calls on an aiosqlite connection (aiosqlite's public method names). It replaces a
subclass of ``aiosqlite.Connection`` that used aiosqlite's private ``_conn``/``_execute``/``_thread``.

Not offered: setting ``isolation_level`` through SQLAlchemy (its aiosqlite adapter reaches into aiosqlite's
private queue for that): connections are opened in autocommit mode (``isolation_level=None``) and
``bot.storage.db`` issues BEGIN IMMEDIATE itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import sqlite3
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")

#: A call for the connection's thread: the function, its arguments, and who hears its outcome (or None).
_Call = tuple[Callable[..., Any], tuple[Any, ...], Callable[[Any, BaseException | None], None] | None]


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    # On the event loop: a caller that was cancelled meanwhile no longer wants the outcome.
    if future.cancelled():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


class SqliteThread:
    """One thread that runs calls in order (a sqlite3 connection must stay on the thread that opened it)."""

    def __init__(self) -> None:
        self._calls: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        # A daemon thread: an engine never disposed must not keep the interpreter alive at exit.
        self.thread = threading.Thread(target=self._serve, name="rankzero-sqlite", daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while (call := self._calls.get()) is not None:
            fn, args, deliver = call
            try:
                result, error = fn(*args), None
            except BaseException as exc:  # handed to the awaiting caller, whatever it is
                result, error = None, exc
            if deliver is not None:
                deliver(result, error)

    def submit(self, fn: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        """Queue ``fn(*args)``; the returned future (of the running loop) gets its outcome."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()

        def deliver(result: Any, error: BaseException | None) -> None:
            # A closed loop (RuntimeError) means nobody awaits this call any more.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_settle, future, result, error)

        self._calls.put((fn, args, deliver))
        return future

    def post(self, fn: Callable[[], Any]) -> None:
        """Queue ``fn()`` without waiting for its outcome (callable without an event loop)."""
        self._calls.put((fn, (), None))

    def shutdown(self) -> None:
        """End the thread once the calls queued before are done."""
        self._calls.put(None)


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
            cur = conn.sqlite.cursor()
            try:
                if parameters is None:
                    cur.execute(sql)
                else:
                    cur.execute(sql, parameters)
                rows = cur.fetchall() if cur.description else []
                return cur.description, cur.rowcount, cur.lastrowid, rows
            finally:
                cur.close()

        self.description, self.rowcount, self.lastrowid, self._rows = await conn.run(run)
        return self

    async def executemany(self, sql: str, seq_of_parameters: Iterable[Any]) -> OneHopCursor:
        """Execute ``sql`` once per parameter set, in one call on the worker thread."""
        conn = self._connection

        def run() -> tuple[int, int | None]:
            cur = conn.sqlite.cursor()
            try:
                cur.executemany(sql, seq_of_parameters)
                return cur.rowcount, cur.lastrowid
            finally:
                cur.close()

        self.description = None
        self.rowcount, self.lastrowid = await conn.run(run)
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


class OneHopConnection:
    """A sqlite3 connection owned by one worker thread; every call is one trip to that thread."""

    def __init__(self, connection: sqlite3.Connection, thread: SqliteThread) -> None:
        #: The sqlite3 connection: use it only inside ``run`` (it belongs to the worker thread).
        self.sqlite = connection
        self._thread = thread
        self._closed = False

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(*args)`` on the connection's thread and return its result."""
        if self._closed:
            raise sqlite3.ProgrammingError("Cannot operate on a closed database.")
        return await self._thread.submit(fn, *args)

    async def run_to_end(self, fn: Callable[[], None]) -> None:
        """Run ``fn()`` on the connection's thread to its end even when the caller is cancelled meanwhile.

        For the calls that put a connection back in order (rollback, close). SQLAlchemy's pool makes them
        when a connection comes back, and logs any exception they raise, a cancellation too, as an error
        with its traceback ("Exception during reset or similar", "Exception closing connection"), then
        throws the connection away with its transaction in an unknown state. A task cancelled at that
        moment (``serve`` stopping while a job returns its connection) is a normal stop, not an error: the
        call finishes (a local SQLite rollback or close, no network), returns normally, and the
        cancellation is requested again so that the task's next await raises it (or, with none left, the
        task ends cancelled), without counting it twice for ``asyncio.timeout``'s ``uncancel`` checks.
        """
        if self._closed:
            raise sqlite3.ProgrammingError("Cannot operate on a closed database.")
        future = self._thread.submit(fn)
        cancelled = False
        while True:
            try:
                await asyncio.shield(future)
                break
            except asyncio.CancelledError:
                cancelled = True
                if future.done():  # it ended in the same turn of the loop as the cancellation came
                    break
        future.result()  # the call's own error, if it had one
        if cancelled and (task := asyncio.current_task()) is not None:
            task.uncancel()  # the request we swallowed ...
            task.cancel()  # ... is made again, so the count stays as the canceller left it

    async def cursor(self) -> OneHopCursor:
        """A cursor (created without a trip to the thread: the sqlite3 one is made per statement)."""
        return OneHopCursor(self)

    async def execute(
        self, sql: str, parameters: Sequence[Any] | dict[str, Any] | None = None
    ) -> OneHopCursor:
        """Execute one statement on a new cursor (aiosqlite's ``Connection.execute``)."""
        return await OneHopCursor(self).execute(sql, parameters)

    async def commit(self) -> None:
        """Commit the current transaction."""
        await self.run(self.sqlite.commit)

    async def rollback(self) -> None:
        """Roll the current transaction back."""
        await self.run_to_end(self.sqlite.rollback)

    async def create_function(self, *args: Any, **kwargs: Any) -> None:
        """Register a SQL function (SQLAlchemy registers ``regexp``)."""
        await self.run(lambda: self.sqlite.create_function(*args, **kwargs))

    @property
    def isolation_level(self) -> str | None:
        """sqlite3's isolation level (None: autocommit, BEGIN is ours)."""
        return self.sqlite.isolation_level

    async def close(self) -> None:
        """Close the connection and end its thread (a second close does nothing)."""
        if self._closed:
            return
        try:
            await self.run_to_end(self.sqlite.close)
        finally:
            self._closed = True
            self._thread.shutdown()

    def stop(self) -> None:
        """Close without waiting (SQLAlchemy's terminate, e.g. a connection dropped by a cancelled task)."""
        if not self._closed:
            self._closed = True
            self._thread.post(self.sqlite.close)
            self._thread.shutdown()


async def connect(database: str, *, busy_timeout_s: float) -> OneHopConnection:
    """Open ``database`` (a path or ``:memory:``) in autocommit mode on a thread of its own."""
    # One thread per connection: a sqlite3 connection must stay on the thread that opened it.
    thread = SqliteThread()

    def opened() -> sqlite3.Connection:
        return sqlite3.connect(database, timeout=busy_timeout_s, isolation_level=None)

    try:
        connection = await thread.submit(opened)
    except BaseException:
        thread.shutdown()
        raise
    return OneHopConnection(connection, thread)
