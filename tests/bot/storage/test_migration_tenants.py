"""Migration 0010: existing disputes and flags are assigned to their tenant, nothing else moves, and it
goes back down. A database at 0009 gets two tenants' channels (a Discord server, a Slack Grid team), a
shared question played in both, disputes (one whose problem was deleted) and flags, then ``alembic
upgrade head`` runs on SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic import command

from bot.storage.db import alembic_config, upgrade
from tests.migration_data import BACKENDS, fetch_rows, fresh_database, run_sql

T0 = dt.datetime(2026, 11, 1, 9, 0, tzinfo=dt.UTC)
SPEC = {"id": "q1", "kind": "mcq", "topic": "ddp", "difficulty": "easy", "prompt": "?", "choices": []}


@pytest.fixture(params=BACKENDS)
def fresh_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    yield from fresh_database(request.param, tmp_path, "ten")


DISPUTE = (
    "INSERT INTO disputes (id, player_pk, question_version_id, problem_id, variant, code_sha256, "
    "verdict_status, verification, explanation, verdict, created_at) VALUES "
    "(:id, :player, 1, :problem, false, 'x', 'ok', 'contradicted', '', :verdict, :t)"
)


def _seed(url: str) -> None:
    upgrade(url, "0009")
    asyncio.run(
        run_sql(
            url,
            (
                "INSERT INTO channels (id, platform, workspace_id, channel_id, name, timezone, created_at) "
                "VALUES (1, 'discord', '111', 'c1', 'a', 'UTC', :t), "
                "(2, 'slack', 'E1/T2', 'C2', 'b', 'UTC', :t)",
                {"t": T0},
            ),
            (
                "INSERT INTO players (id, platform, user_id, display_name, created_at) VALUES "
                "(1, 'discord', 'u1', 'Ann', :t), (2, 'slack', 'U2', 'Bo', :t), (3, 'slack', 'U3', 'Cy', :t)",
                {"t": T0},
            ),
            ("INSERT INTO questions (id, created_at, retired_at) VALUES ('q1', :t, NULL)", {"t": T0}),
            (
                "INSERT INTO question_versions (id, question_id, version, content_hash, kind, topic, "
                "difficulty, spec, created_at) VALUES (1, 'q1', 1, 'h', 'mcq', 'ddp', 'easy', :spec, :t)",
                {"t": T0, "spec": json.dumps(SPEC)},
            ),
            (
                "INSERT INTO challenges (id, channel_pk, day, title, status, opened_at) VALUES "
                "(1, 1, :d, 'A', 'closed', :t), (2, 2, :d, 'B', 'closed', :t)",
                {"t": T0, "d": T0.date()},
            ),
            (
                "INSERT INTO problems (id, challenge_id, position, question_version_id) VALUES "
                "(1, 1, 1, 1), (2, 2, 1, 1), (3, 2, 2, 1)",
                {},
            ),
            (
                "INSERT INTO play_sessions (id, problem_id, player_pk, started_at, deadline, points) VALUES "
                "(1, 3, 2, :t, :d, 0)",
                {"t": T0, "d": T0 + dt.timedelta(minutes=2)},
            ),
            (
                DISPUTE,
                [
                    {"id": 1, "player": 1, "problem": 1, "verdict": "{}", "t": T0},  # Discord server 111
                    {"id": 2, "player": 2, "problem": 2, "verdict": "{}", "t": T0},  # Slack E1/T2
                    {"id": 3, "player": 2, "problem": 3, "verdict": "{}", "t": T0},  # problem deleted below
                    {"id": 4, "player": 3, "problem": 2, "verdict": "{}", "t": T0},  # problem deleted below
                ],
            ),
            (
                "INSERT INTO question_flags (id, question_id, question_version_id, dispute_id, explanation, "
                "status, created_at) VALUES (1, 'q1', 1, 2, 'x', 'open', :t)",
                {"t": T0},
            ),
        )
    )
    # Disputes 3 and 4 lose their problem (ON DELETE SET NULL) as when a challenge is removed; player 2
    # played in Slack E1/T2 before, player 3 never played anywhere.
    asyncio.run(
        run_sql(
            url,
            ("UPDATE disputes SET problem_id = NULL WHERE id IN (3, 4)", {}),
        )
    )


def test_existing_rows_get_their_tenant_and_come_back_down(fresh_url: str) -> None:
    _seed(fresh_url)
    upgrade(fresh_url)
    command.check(alembic_config(fresh_url))
    disputes = asyncio.run(fetch_rows(fresh_url, "SELECT id, tenant FROM disputes ORDER BY id"))
    assert [(r["id"], r["tenant"]) for r in disputes] == [
        (1, "discord:111"),
        (2, "slack:E1/T2"),
        (3, "slack:E1/T2"),  # where its player last played
        (4, "slack:unassigned"),  # nowhere to assign it: a tenant nobody acts from
    ]
    flags = asyncio.run(fetch_rows(fresh_url, "SELECT id, tenant, dispute_id FROM question_flags"))
    assert flags == [{"id": 1, "tenant": "slack:E1/T2", "dispute_id": 2}], "the flag keeps its dispute"
    bank = asyncio.run(fetch_rows(fresh_url, "SELECT id, owner_tenant FROM questions"))
    assert bank == [{"id": "q1", "owner_tenant": None}], "existing questions stay in the shared bank"
    versions = asyncio.run(fetch_rows(fresh_url, "SELECT tenant FROM question_versions"))
    assert versions == [{"tenant": None}]

    # Two tenants may now flag the same version; an empty tenant is refused by the database.
    asyncio.run(
        run_sql(
            fresh_url,
            (
                "INSERT INTO question_flags (id, question_id, question_version_id, dispute_id, explanation, "
                "status, created_at, tenant) VALUES "
                "(2, 'q1', 1, 1, 'x', 'open', :t, 'discord' || ':' || '111')",
                {"t": T0},
            ),
        )
    )
    with pytest.raises(Exception, match=r"(?i)unique"):
        asyncio.run(
            run_sql(
                fresh_url,
                (
                    "INSERT INTO question_flags (id, question_id, question_version_id, explanation, status, "
                    "created_at, tenant) VALUES (3, 'q1', 1, 'x', 'open', :t, 'discord' || ':' || '111')",
                    {"t": T0},
                ),
            )
        )
    with pytest.raises(Exception, match=r"(?i)check"):
        asyncio.run(
            run_sql(
                fresh_url,
                (
                    DISPUTE.replace("created_at)", "created_at, tenant)").replace(":t)", ":t, '')"),
                    {"id": 9, "player": 1, "problem": 1, "verdict": "{}", "t": T0},
                ),
            )
        )

    command.downgrade(alembic_config(fresh_url), "0009")
    flags = asyncio.run(fetch_rows(fresh_url, "SELECT id, dispute_id FROM question_flags ORDER BY id"))
    assert flags == [{"id": 1, "dispute_id": 2}], "one flag per version again: the older is kept"
    assert len(asyncio.run(fetch_rows(fresh_url, "SELECT id FROM disputes"))) == 4
    assert len(asyncio.run(fetch_rows(fresh_url, "SELECT id FROM question_versions"))) == 1
    upgrade(fresh_url)  # and up again
    command.check(alembic_config(fresh_url))
