"""Question drafts and delivered events in the database (SQLite and PostgreSQL): a restart or another
process finds them."""

from __future__ import annotations

import datetime as dt
import time

from bot.adapters.drafts import DraftStore
from bot.storage.db import make_engine
from bot.storage.repositories.deliveries import SqlDeliveryLog
from bot.storage.repositories.drafts import SqlDraftRepository


async def test_drafts_survive_a_restart_and_reach_another_process(db_url: str) -> None:
    engine = make_engine(db_url)
    try:
        first = DraftStore(repository=SqlDraftRepository(engine))
        kept = first.put({"id": "q-kept", "prompt": "ünïcode ✓"}, "UADMIN")
        saved = first.put({"id": "q-saved"}, "UADMIN")
        dropped = first.put({"id": "q-dropped"}, "UADMIN")
        first.close(saved, "added q-saved")
        first.drop(dropped)
        await first.flush()

        # Another process (or this one after a restart) finds the open draft without loading everything.
        other = DraftStore(repository=SqlDraftRepository(engine))
        found = await other.fetch(kept)
        assert found is not None and found.spec == {"id": "q-kept", "prompt": "ünïcode ✓"}
        assert found.owner_id == "UADMIN"
        assert await other.fetch(dropped) is None

        restarted = DraftStore(repository=SqlDraftRepository(engine))
        assert await restarted.load() == 2  # the open draft and the saved one's outcome
        assert restarted.get(kept) is not None and restarted.get(saved) is None
        assert restarted.outcome(saved) == "added q-saved"
    finally:
        await engine.dispose()


async def test_expired_drafts_are_purged_at_load(db_url: str) -> None:
    engine = make_engine(db_url)
    try:
        repo = SqlDraftRepository(engine)
        old = dt.datetime.fromtimestamp(time.time() - 7200, dt.UTC)
        await repo.save("old-key", "UADMIN", {"id": "q-old"}, old)
        store = DraftStore(repository=repo)
        assert await store.load() == 0
        assert await repo.find("old-key") is None and await store.fetch("old-key") is None
    finally:
        await engine.dispose()


async def test_a_delivery_is_first_once_across_processes(db_url: str) -> None:
    engine = make_engine(db_url)
    try:
        now = dt.datetime(2026, 11, 25, 9, 0, tzinfo=dt.UTC)
        one, other = SqlDeliveryLog(engine), SqlDeliveryLog(engine)  # two processes, one database
        assert await one.first("event:Ev1", now)
        assert not await other.first("event:Ev1", now)  # Slack's retry reached the other process
        assert await other.first("event:Ev2", now)
    finally:
        await engine.dispose()
