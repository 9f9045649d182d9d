"""Alembic: upgrade head on an empty database, then the models and migrations agree (alembic check)."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from alembic import command
from sqlalchemy.engine import make_url

from bot.storage.db import alembic_config, upgrade
from tests.conftest import PG_URL, _pg_admin


def _check(url: str) -> None:
    upgrade(url)
    command.check(alembic_config(url))  # raises if autogenerate would emit any operation


def test_sqlite_upgrade_and_check(tmp_path: Path) -> None:
    _check(f"sqlite+aiosqlite:///{tmp_path / 'm.db'}")


@pytest.mark.postgres
def test_postgres_upgrade_and_check(pg_database: str) -> None:
    name = f"rz_mig_{uuid.uuid4().hex[:8]}"
    asyncio.run(_pg_admin(f'CREATE DATABASE "{name}"'))
    try:
        _check(make_url(PG_URL).set(database=name).render_as_string(hide_password=False))
    finally:
        asyncio.run(_pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
