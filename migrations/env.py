"""Alembic environment: async engine, URL from settings (or the Config), batch mode for SQLite.

On PostgreSQL the whole upgrade holds a transaction-level advisory lock, so processes starting together on
a fresh database (two ``rankzero serve``) migrate one after the other: the second finds the schema at head
instead of failing on ``CREATE TABLE alembic_version``. A SQLite file gets the same from an exclusive
``flock`` on a lock file beside it: its write lock comes only with the first DDL statement, after every
process has already read "no version yet" and planned the whole upgrade.
"""

import asyncio
import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from alembic import context
from alembic.autogenerate.api import AutogenContext
from sqlalchemy import text
from sqlalchemy.engine import Connection, make_url

from bot.storage.db import is_sqlite, make_engine
from bot.storage.models import Base, UtcDateTime

config = context.config
target_metadata = Base.metadata
#: The advisory lock key of migrations (any constant shared by every RankZero process: "RZ" "migr").
MIGRATION_LOCK_KEY = 0x525A_6D69_6772


def _url() -> str:
    url = config.get_main_option("sqlalchemy.url")
    if url:
        return url
    from bot.config import Settings

    return Settings().database_url


def _render_item(type_: str, obj: Any, autogen_context: AutogenContext) -> str | Literal[False]:
    # Migrations must not import our models: render the UTC decorator as the plain column type.
    if type_ == "type" and isinstance(obj, UtcDateTime):
        return "sa.DateTime(timezone=True)"
    return False


def _configure(connection: Connection | None = None, url: str | None = None) -> None:
    context.configure(
        connection=connection,
        url=url,
        target_metadata=target_metadata,
        # SQLite cannot ALTER most things: batch mode copies the table instead.
        render_as_batch=is_sqlite(url or _url()),
        compare_type=True,
        render_item=_render_item,
    )


def run_offline() -> None:
    """Emit SQL without a database."""
    _configure(url=_url())
    with context.begin_transaction():
        context.run_migrations()


def _run_sync(connection: Connection) -> None:
    _configure(connection=connection)
    with context.begin_transaction():
        if connection.dialect.name == "postgresql":
            # Released at commit or rollback, so a killed process can never leave it held.
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY})
        context.run_migrations()


@contextlib.contextmanager
def _sqlite_file_lock(url: str) -> Iterator[None]:
    """Hold an exclusive lock on ``<database file>.migrate.lock`` (SQLite files only; else nothing)."""
    database = make_url(url).database if is_sqlite(url) else None
    if not database or database == ":memory:" or database.startswith("file:"):
        yield
        return
    with open(Path(database).with_name(Path(database).name + ".migrate.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, also if the process dies
        yield


async def run_online() -> None:
    """Run against the database."""
    url = _url()
    with _sqlite_file_lock(url):
        engine = make_engine(url)
        async with engine.connect() as connection:
            await connection.run_sync(_run_sync)
            await connection.commit()
        await engine.dispose()


if context.is_offline_mode():
    run_offline()
else:
    asyncio.run(run_online())
