"""Migration 0017: the ``question_difficulty`` table, one row per tenant and question, its constraints
(counts, tenant, the question exists, the rating's range), and a downgrade that drops it.
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

QUESTION: tuple[str, dict[str, object]] = (
    "INSERT INTO questions (id, created_at) VALUES ('q1', '2026-11-23 09:00:00')",
    {},
)
ROW = (
    "INSERT INTO question_difficulty (tenant, question_id, label, rating, information, first_attempts, "
    "first_correct, updated_at) VALUES (:tenant, :qid, 'beginner', :rating, 2.5, :n, :k, "
    "'2026-11-23 09:00:00')"
)
GOOD: dict[str, object] = {"tenant": "discord:42", "qid": "q1", "rating": 0.4, "n": 20, "k": 11}


@pytest.fixture(params=BACKENDS)
def fresh_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    yield from fresh_database(request.param, tmp_path, "learned_difficulty")


def test_rows_constraints_and_downgrade(fresh_url: str) -> None:
    upgrade(fresh_url, "0017")
    asyncio.run(run_sql(fresh_url, QUESTION, (ROW, GOOD), (ROW, {**GOOD, "tenant": "slack:T1"})))
    rows = asyncio.run(fetch_rows(fresh_url, "SELECT tenant, first_attempts FROM question_difficulty"))
    assert sorted((r["tenant"], r["first_attempts"]) for r in rows) == [("discord:42", 20), ("slack:T1", 20)]
    for bad in (
        GOOD,  # one row per tenant and question
        {**GOOD, "tenant": "discord:43", "k": 21},  # more right than attempted
        {**GOOD, "tenant": ""},
        {**GOOD, "tenant": "discord:44", "rating": 7.0},
        {**GOOD, "tenant": "discord:45", "qid": "no-such-question"},
    ):
        with pytest.raises(sqlalchemy.exc.IntegrityError):
            asyncio.run(run_sql(fresh_url, (ROW, bad)))
    command.downgrade(alembic_config(fresh_url), "0016")
    with pytest.raises(sqlalchemy.exc.DBAPIError):
        asyncio.run(fetch_rows(fresh_url, "SELECT tenant FROM question_difficulty"))
    upgrade(fresh_url, "head")
    assert asyncio.run(fetch_rows(fresh_url, "SELECT tenant FROM question_difficulty")) == []
