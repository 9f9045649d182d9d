"""Migration 0014: the outbox takes weekly summaries (no challenge) and admin notices, and counts the
accepted parts of a post in several messages; a downgrade drops the rows 0013 cannot hold.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy.exc
from alembic import command

from bot.storage.db import alembic_config, upgrade
from tests.migration_data import BACKENDS, fetch_rows, fresh_database, run_sql

CHANNEL: tuple[str, dict[str, object]] = (
    "INSERT INTO channels (id, platform, workspace_id, channel_id, timezone, created_at) "
    "VALUES (1, 'discord', '42', '7', 'UTC', '2026-11-23 09:00:00')",
    {},
)
ROW = (
    "INSERT INTO outbox (tenant, channel_pk, challenge_id, kind, key, payload, status, attempts, "
    "next_attempt_at, created_at) VALUES ('discord:42', 1, NULL, :kind, :key, '{}', 'pending', 0, "
    "'2026-11-23 09:00:00', '2026-11-23 09:00:00')"
)


@pytest.fixture(params=BACKENDS)
def fresh_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    yield from fresh_database(request.param, tmp_path, "outbox_parts")


def test_summary_rows_and_parts_then_back(fresh_url: str) -> None:
    upgrade(fresh_url, "0015")
    asyncio.run(run_sql(fresh_url, CHANNEL, (ROW, {"kind": "summary", "key": "1:w:2026-W47"})))
    [row] = asyncio.run(fetch_rows(fresh_url, "SELECT kind, challenge_id, parts_sent FROM outbox"))
    assert row == {"kind": "summary", "challenge_id": None, "parts_sent": 0}
    with pytest.raises(sqlalchemy.exc.IntegrityError):  # still a closed list of kinds
        asyncio.run(run_sql(fresh_url, (ROW, {"kind": "tweet", "key": "x"})))
    command.downgrade(alembic_config(fresh_url), "0014")
    assert asyncio.run(fetch_rows(fresh_url, "SELECT id FROM outbox")) == []  # 0014 has no such rows
    with pytest.raises(sqlalchemy.exc.IntegrityError):
        asyncio.run(run_sql(fresh_url, (ROW, {"kind": "summary", "key": "1:w:2026-W48"})))
    upgrade(fresh_url, "head")
    asyncio.run(run_sql(fresh_url, (ROW, {"kind": "notice", "key": "3"})))
