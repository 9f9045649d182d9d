"""The PostgreSQL pool's size is a setting (RANKZERO_DB_POOL_SIZE, RANKZERO_DB_POOL_OVERFLOW), validated."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest
from pydantic import ValidationError

from bot.bootstrap import build_app
from bot.config import Settings


@pytest.mark.postgres
async def test_the_pool_opens_size_plus_overflow_connections_and_no_more(pg_database: str) -> None:
    settings = Settings(database_url=pg_database, db_pool_size=2, db_pool_overflow=1, db_pool_timeout_s=0.5)
    app = await build_app(settings, migrate=False)
    try:
        async with contextlib.AsyncExitStack() as held:
            for _ in range(3):
                await held.enter_async_context(app.engine.connect())
            assert app.engine.sync_engine.pool.checkedout() == 3  # type: ignore[attr-defined]
            with pytest.raises(Exception, match="QueuePool limit of size 2 overflow 1 reached"):
                async with app.engine.connect():
                    pass
        # Returned: the next call gets one at once.
        async with asyncio.timeout(30), app.engine.connect():
            pass
    finally:
        await app.close()


@pytest.mark.parametrize(
    ("field", "bad"), [("db_pool_size", 0), ("db_pool_size", 5000), ("db_pool_overflow", -1)]
)
def test_a_pool_size_out_of_range_is_refused(field: str, bad: int) -> None:
    with pytest.raises(ValidationError, match=field):
        settings: dict[str, Any] = {field: bad}
        Settings(**settings)


def test_the_defaults_keep_the_pool_of_before() -> None:
    settings = Settings()
    assert (settings.db_pool_size, settings.db_pool_overflow) == (10, 10)  # 20 connections at most, as before
