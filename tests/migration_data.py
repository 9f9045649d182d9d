"""Shared by the data-migration tests: a fresh database per backend, and plain SQL in and out.

A data migration is tested by upgrading a database to the revision before it, writing rows as an older
version would (plain SQL, since today's models describe today's schema), upgrading, and reading the rows
back. Each test module makes its ``fresh_url`` fixture with :func:`fresh_database`.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from bot.storage.db import make_engine
from tests.conftest import PG_URL, _pg_admin, _pg_available

#: The backends every data-migration test runs on (PostgreSQL marked, so it can be selected or left out).
BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


def fresh_database(backend: str, tmp_path: Path, name: str) -> Iterator[str]:
    """Yield an empty database's URL on ``backend``, named after ``name``; PostgreSQL's is dropped after."""
    if backend == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / f'{name}.db'}"
        return
    problem = _pg_available()
    if problem is not None:
        pytest.skip(f"no PostgreSQL: {problem}")
    database = f"rz_{name}_{uuid.uuid4().hex[:8]}"
    asyncio.run(_pg_admin(f'CREATE DATABASE "{database}"'))
    try:
        yield make_url(PG_URL).set(database=database).render_as_string(hide_password=False)
    finally:
        asyncio.run(_pg_admin(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)'))


async def run_sql(
    url: str, *statements: tuple[str, Sequence[Mapping[str, object]] | Mapping[str, object]]
) -> None:
    """Run each ``(sql, params)`` in one transaction."""
    engine = make_engine(url)
    async with engine.begin() as conn:
        for sql, params in statements:
            await conn.execute(text(sql), params)
    await engine.dispose()


async def fetch_rows(url: str, sql: str) -> list[dict[str, object]]:
    """The rows of a query, as dicts."""
    engine = make_engine(url)
    async with engine.connect() as conn:
        rows = [dict(r._mapping) for r in await conn.execute(text(sql))]
    await engine.dispose()
    return rows
