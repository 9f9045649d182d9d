"""Form drafts in the database (SQLite and PostgreSQL): what an admin typed into a question form, kept a
day per tenant and admin; migration 0016 up and down. The memory repository behaves the same.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import sqlalchemy.exc
from alembic import command

from bot.core.repositories.form_drafts import (
    FORM_DRAFT_TTL,
    MAX_FORM_DRAFTS,
    FormDraft,
    FormDraftRepository,
    MemoryFormDrafts,
)
from bot.storage.db import alembic_config, make_engine, upgrade
from bot.storage.repositories.form_drafts import SqlFormDraftRepository
from tests.migration_data import BACKENDS, fetch_rows, fresh_database, run_sql

T0 = dt.datetime(2026, 11, 27, 9, 0, tzinfo=dt.UTC)
GUILD_A = "discord:800000000000000001"
GUILD_B = "discord:800000000000000002"
TYPED = {"prompt": "Ünïcode ✓ prompt", "code": "", "choices": "a\nb", "correct": "E", "notes": ""}


def opened(
    nonce: str, *, tenant: str = GUILD_A, owner: str = "111", qid: str = "q-1", at: dt.datetime = T0
) -> FormDraft:
    return FormDraft(nonce, tenant, owner, qid, "conceptual", "DDP", "advanced", at, at + FORM_DRAFT_TTL)


@pytest.fixture(params=["sql", "memory"])
async def repo(request: pytest.FixtureRequest, db_url: str) -> AsyncIterator[FormDraftRepository]:
    """The SQL repository on each backend, and the memory one (which must behave the same)."""
    if request.param == "memory":
        yield MemoryFormDrafts()
        return
    engine = make_engine(db_url)
    yield SqlFormDraftRepository(engine)
    await engine.dispose()


async def test_a_submission_is_kept_a_day_for_its_admin_in_its_tenant_only(repo: FormDraftRepository) -> None:
    await repo.save(opened("nonce-aaaa"))
    assert await repo.latest(GUILD_A, "111", T0) is None  # opened only: nothing typed to restore
    at = T0 + dt.timedelta(minutes=20)
    await repo.save(opened("nonce-aaaa").submitted(TYPED, "no choice E", at))

    found = await repo.find(GUILD_A, "111", "nonce-aaaa", at)
    assert found is not None and found.inputs == TYPED and found.error == "no choice E"
    assert found.expires_at == at + FORM_DRAFT_TTL and found.submitted_at == at
    latest = await repo.latest(GUILD_A, "111", at)
    assert latest is not None and latest.nonce == "nonce-aaaa"
    # Another tenant's admin (the same user id in another server) and another admin see nothing.
    assert await repo.find(GUILD_B, "111", "nonce-aaaa", at) is None
    assert await repo.latest(GUILD_B, "111", at) is None
    assert await repo.find(GUILD_A, "222", "nonce-aaaa", at) is None
    assert await repo.latest(GUILD_A, "222", at) is None
    # Nor can they overwrite it by reusing its nonce.
    with pytest.raises(ValueError, match="another tenant or owner"):
        await repo.save(opened("nonce-aaaa", tenant=GUILD_B).submitted({}, None, at))
    # A day after the submission it is gone.
    assert await repo.latest(GUILD_A, "111", at + FORM_DRAFT_TTL) is None
    assert await repo.find(GUILD_A, "111", "nonce-aaaa", at + FORM_DRAFT_TTL) is None


async def test_latest_is_the_last_submitted_and_discard_forgets_an_added_question(
    repo: FormDraftRepository,
) -> None:
    await repo.save(opened("nonce-one1", qid="q-1").submitted(TYPED, "x", T0))
    await repo.save(opened("nonce-two2", qid="q-2").submitted(TYPED, None, T0 + dt.timedelta(seconds=5)))
    await repo.save(opened("nonce-bbbb", tenant=GUILD_B, qid="q-2").submitted(TYPED, None, T0))
    now = T0 + dt.timedelta(minutes=1)
    latest = await repo.latest(GUILD_A, "111", now)
    assert latest is not None and latest.question_id == "q-2"
    assert await repo.discard(GUILD_A, "111", "q-2") == 1
    latest = await repo.latest(GUILD_A, "111", now)
    assert latest is not None and latest.question_id == "q-1"
    assert await repo.find(GUILD_B, "111", "nonce-bbbb", now) is not None  # the other tenant's is kept


async def test_an_admin_keeps_a_bounded_number_of_drafts(repo: FormDraftRepository) -> None:
    for i in range(MAX_FORM_DRAFTS + 3):
        at = T0 + dt.timedelta(seconds=i)
        await repo.save(opened(f"nonce-{i:04d}", qid=f"q-{i}", at=at).submitted(TYPED, None, at))
    now = T0 + dt.timedelta(minutes=5)
    kept = [i for i in range(MAX_FORM_DRAFTS + 3) if await repo.find(GUILD_A, "111", f"nonce-{i:04d}", now)]
    assert kept == list(range(3, MAX_FORM_DRAFTS + 3))  # the oldest went first


# ---------------------------------------------------------------------- migration 0016
ROW = (
    "INSERT INTO form_drafts (nonce, tenant, owner_id, question_id, kind, topic, difficulty, inputs, "
    "error, submitted_at, updated_at, expires_at) VALUES (:nonce, 'discord:1', '111', 'q-1', 'conceptual', "
    "'DDP', 'advanced', '{}', :error, :submitted, :updated, :expires)"
)
GOOD_ROW = {"nonce": "n1", "error": None, "submitted": None, "updated": T0, "expires": T0 + FORM_DRAFT_TTL}


@pytest.fixture(params=BACKENDS)
def fresh_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    yield from fresh_database(request.param, tmp_path, "form_drafts")


def test_migration_adds_the_table_with_its_constraints_and_removes_it(fresh_url: str) -> None:
    upgrade(fresh_url, "0016")
    asyncio.run(run_sql(fresh_url, (ROW, GOOD_ROW)))
    assert [r["nonce"] for r in asyncio.run(fetch_rows(fresh_url, "SELECT nonce FROM form_drafts"))] == ["n1"]
    refused = [
        {**GOOD_ROW, "nonce": "n2", "expires": T0 - dt.timedelta(hours=1)},  # expires before its last change
        {**GOOD_ROW, "nonce": "n3", "error": "bad"},  # an error without a submission
        {**GOOD_ROW, "nonce": ""},  # no nonce
        GOOD_ROW,  # the same nonce twice
    ]
    for values in refused:
        with pytest.raises(sqlalchemy.exc.IntegrityError):
            asyncio.run(run_sql(fresh_url, (ROW, values)))
    command.downgrade(alembic_config(fresh_url), "0015")
    with pytest.raises(sqlalchemy.exc.DBAPIError):  # the table is gone
        asyncio.run(fetch_rows(fresh_url, "SELECT nonce FROM form_drafts"))
    upgrade(fresh_url, "head")
    assert asyncio.run(fetch_rows(fresh_url, "SELECT nonce FROM form_drafts")) == []
