"""Migration 0018: schedules get the team report opt-in (off on every existing schedule, and only with a
weekly summary day), the outbox takes the ``team_report`` kind; a downgrade drops both.
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

CHANNELS: tuple[str, dict[str, object]] = (
    "INSERT INTO channels (id, platform, workspace_id, channel_id, timezone, created_at) VALUES "
    "(1, 'discord', '42', '7', 'UTC', '2026-11-23 09:00:00'), "
    "(2, 'slack', 'T1', 'C1', 'UTC', '2026-11-23 09:00:00')",
    {},
)
SCHEDULES: tuple[str, dict[str, object]] = (
    "INSERT INTO schedules (channel_pk, post_hour, post_minute, timezone, days, problems, summary_day, "
    "paused, updated_at, version) VALUES "
    "(1, 9, 0, 'UTC', '12345', 5, 1, false, '2026-11-23 09:00:00', 3), "
    "(2, 8, 30, 'UTC', '1234567', 3, NULL, false, '2026-11-23 09:00:00', 1)",
    {},
)
ROW = (
    "INSERT INTO outbox (tenant, channel_pk, challenge_id, kind, key, payload, status, attempts, "
    "next_attempt_at, created_at, parts_sent) VALUES ('discord:42', 1, NULL, :kind, :key, '{}', 'pending', "
    "0, '2026-11-23 09:00:00', '2026-11-23 09:00:00', 0)"
)


@pytest.fixture(params=BACKENDS)
def fresh_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    yield from fresh_database(request.param, tmp_path, "team_report")


def _schedules(url: str) -> list[dict[str, object]]:
    return asyncio.run(
        fetch_rows(url, "SELECT channel_pk, summary_day, team_report, version FROM schedules ORDER BY 1")
    )


def test_existing_schedules_stay_off_and_the_report_needs_a_summary_day(fresh_url: str) -> None:
    upgrade(fresh_url, "0016")
    asyncio.run(run_sql(fresh_url, CHANNELS, SCHEDULES, (ROW, {"kind": "summary", "key": "1:w:2026-W47"})))
    with pytest.raises(sqlalchemy.exc.IntegrityError):  # 0016 has no such kind
        asyncio.run(run_sql(fresh_url, (ROW, {"kind": "team_report", "key": "1:w:2026-W47"})))
    upgrade(fresh_url, "0018")
    assert [(r["channel_pk"], bool(r["team_report"]), r["version"]) for r in _schedules(fresh_url)] == [
        (1, False, 3),
        (2, False, 1),
    ]
    asyncio.run(run_sql(fresh_url, ("UPDATE schedules SET team_report = true WHERE channel_pk = 1", {})))
    with pytest.raises(sqlalchemy.exc.IntegrityError):  # channel 2 has no weekly summary day
        asyncio.run(run_sql(fresh_url, ("UPDATE schedules SET team_report = true WHERE channel_pk = 2", {})))
    with pytest.raises(sqlalchemy.exc.IntegrityError):  # nor can channel 1 lose its day under the report
        asyncio.run(run_sql(fresh_url, ("UPDATE schedules SET summary_day = NULL WHERE channel_pk = 1", {})))
    with pytest.raises(sqlalchemy.exc.IntegrityError):  # never NULL
        asyncio.run(run_sql(fresh_url, ("UPDATE schedules SET team_report = NULL WHERE channel_pk = 2", {})))
    asyncio.run(run_sql(fresh_url, (ROW, {"kind": "team_report", "key": "1:w:2026-W47"})))
    with pytest.raises(sqlalchemy.exc.IntegrityError):  # once per channel and week
        asyncio.run(run_sql(fresh_url, (ROW, {"kind": "team_report", "key": "1:w:2026-W47"})))
    with pytest.raises(sqlalchemy.exc.IntegrityError):  # still a closed list of kinds
        asyncio.run(run_sql(fresh_url, (ROW, {"kind": "tweet", "key": "x"})))
    command.downgrade(alembic_config(fresh_url), "0016")
    kinds = asyncio.run(fetch_rows(fresh_url, "SELECT kind FROM outbox"))
    assert kinds == [{"kind": "summary"}]  # the report rows went; the summary stays
    assert "team_report" not in _schedules_columns(fresh_url)
    upgrade(fresh_url, "0018")
    assert [bool(r["team_report"]) for r in _schedules(fresh_url)] == [False, False]


def _schedules_columns(url: str) -> set[str]:
    [row] = asyncio.run(fetch_rows(url, "SELECT * FROM schedules WHERE channel_pk = 1"))
    return set(row)
