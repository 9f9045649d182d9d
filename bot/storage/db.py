"""Engine creation and migrations for SQLite (embedded default) and PostgreSQL."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import AsyncAdaptedQueuePool

from bot.storage import sqlite_driver

log = logging.getLogger(__name__)

MIGRATIONS_DIR = Path(__file__).resolve().parents[2] / "migrations"


def is_sqlite(url: str) -> bool:
    """True for a SQLite URL."""
    return make_url(url).get_backend_name() == "sqlite"


#: SQLite's files beside the database (write-ahead log, shared-memory index), created as it runs.
SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")


def private_sqlite(database: str) -> None:
    """Keep an embedded database readable by its owner only: it holds Slack tokens (encrypted), players'
    names and answers.

    The folder is created 0700 (and RankZero's default data folder is narrowed to 0700 if an older version
    made it 0755). The database file is created 0600 here, before SQLite opens it (SQLite would create it
    0644 under the usual umask 022), and an existing one is narrowed to 0600. The WAL and SHM files SQLite
    creates beside it later take the database file's permissions whatever the umask (SQLite's unix VFS
    fchmods them to match), so they are 0600 too, without changing the process-wide umask, which the
    runner processes this one may start also inherit. A folder the user chose for the file is left as is.
    """
    from bot.config import default_data_dir

    path = Path(database)
    folder = path.parent
    if not folder.exists():
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    elif folder.resolve() == default_data_dir().resolve():
        _narrow(folder, 0o700)
    with contextlib.suppress(FileExistsError):  # an empty file is an empty database to SQLite
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    for file in (path, *(Path(f"{database}{suffix}") for suffix in SQLITE_SIDE_FILES)):
        if file.exists():
            _narrow(file, 0o600)


def _narrow(path: Path, mode: int) -> None:
    """Narrow ``path`` to ``mode`` when it is looser; a file we may not change is logged, not fatal."""
    try:
        if stat.S_IMODE(path.stat().st_mode) & ~mode:
            path.chmod(mode)
    except OSError as exc:
        log.warning("could not make %s private (%s): other users of this machine may read it", path, exc)


@dataclass(frozen=True)
class EngineTimeouts:
    """How long a connection may wait on the database, per backend (seconds; None: no bound).

    The defaults are what migrations and batch commands use: no statement bound (a migration may wait on
    another process's advisory lock for as long as that one migrates). ``rankzero serve`` and the
    commands pass the settings' bounds (bot/bootstrap.py), so a server that stops answering fails each call
    instead of holding it forever.
    """

    #: Opening a PostgreSQL connection (asyncpg's ``timeout``).
    connect_s: float | None = 60.0
    #: One PostgreSQL statement, counted on the client (asyncpg's ``command_timeout``): unlike the
    #: server's statement_timeout it also ends a wait on a server or network that sends nothing back.
    statement_s: float | None = None
    #: Waiting for a free pooled connection (None: the backend's generous default, see make_engine).
    pool_s: float | None = None
    #: SQLite's busy timeout: how long a statement waits for another process's lock on the file.
    sqlite_busy_s: float = 30.0


def make_engine(
    url: str, *, pool_size: int = 10, max_overflow: int | None = None, timeouts: EngineTimeouts | None = None
) -> AsyncEngine:
    """Create an async engine with the settings each backend needs for concurrent players.

    PostgreSQL: a pool of ``pool_size`` connections kept open, plus up to ``max_overflow`` more in a burst
    (default: as many again; RANKZERO_DB_POOL_SIZE and RANKZERO_DB_POOL_OVERFLOW in ``rankzero serve``).

    SQLite: WAL (readers never block the writer), a busy timeout, foreign keys on, and every transaction
    opened with BEGIN IMMEDIATE, so two writers queue on the lock instead of failing with "database is
    locked" when a read transaction tries to upgrade to a write. ``timeouts`` bounds every wait on the
    database (EngineTimeouts' defaults when None).
    """
    timeouts = timeouts or EngineTimeouts()
    if is_sqlite(url):
        database = make_url(url).database
        if database and database != ":memory:" and not database.startswith("file:"):
            private_sqlite(database)
        # One connection: every transaction takes the write lock (BEGIN IMMEDIATE) anyway, and waiting in
        # the pool's queue is fair and cheap, while extra connections would poll SQLite's busy handler
        # (measured in benchmarks/engine.py: p99 5.4 s with 15 connections, 71 ms with one).
        # Units of work must therefore never nest within one task.
        path = database or ":memory:"
        busy_s = timeouts.sqlite_busy_s

        async def connect() -> sqlite_driver.OneHopConnection:
            # One thread hop per statement instead of the four of aiosqlite under SQLAlchemy (see
            # sqlite_driver; README, Performance: dropping it cost about a third of the answer rate).
            return await sqlite_driver.connect(path, busy_timeout_s=busy_s)

        engine = create_async_engine(
            url,
            async_creator=connect,
            poolclass=AsyncAdaptedQueuePool,
            pool_size=1,
            max_overflow=0,
            pool_timeout=300 if timeouts.pool_s is None else timeouts.pool_s,
        )

        @event.listens_for(engine.sync_engine, "connect")
        def _on_connect(dbapi_conn: Any, _record: Any) -> None:
            # The driver opens connections in autocommit mode, so BEGIN is ours (see _on_begin).
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute(f"PRAGMA busy_timeout={int(busy_s * 1000)}")
            cur.close()

        @event.listens_for(engine.sync_engine, "begin")
        def _on_begin(conn: Any) -> None:
            conn.exec_driver_sql("BEGIN IMMEDIATE")

        return engine
    connect_args: dict[str, Any] = {}
    if timeouts.connect_s is not None:
        connect_args["timeout"] = timeouts.connect_s
    if timeouts.statement_s is not None:
        connect_args["command_timeout"] = timeouts.statement_s
    # A generous pool timeout by default: under a burst, waiting for a connection beats failing the
    # player's click.
    return create_async_engine(
        url,
        pool_size=pool_size,
        max_overflow=pool_size if max_overflow is None else max_overflow,
        pool_timeout=120 if timeouts.pool_s is None else timeouts.pool_s,
        pool_pre_ping=True,
        connect_args=connect_args,
    )


def alembic_config(url: str) -> Any:
    """An Alembic Config pointing at our migrations, for ``url``."""
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def upgrade(url: str, revision: str = "head") -> None:
    """Run ``alembic upgrade`` (synchronous; call it outside a running event loop or in a thread)."""
    from alembic import command

    if is_sqlite(url):
        database = make_url(url).database
        if database and database != ":memory:" and not database.startswith("file:"):
            private_sqlite(database)
    command.upgrade(alembic_config(url), revision)
    log.info("database at %s upgraded to %s", make_url(url).render_as_string(hide_password=True), revision)


async def upgrade_async(url: str, revision: str = "head") -> None:
    """Run migrations from async code (Alembic's env.py starts its own event loop, so use a thread)."""
    await asyncio.to_thread(upgrade, url, revision)
