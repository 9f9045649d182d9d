"""Two admins saving one schedule at once (issue 25 §5): each save names the version it read (migration
0011), so on PostgreSQL a change is never lost and a pause never silently undone; the second admin gets
the other's change applied first and is told what it was (``changed_meanwhile``) instead of a bare
"Schedule saved".
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from bot.core.schedule import Schedule, ScheduleConfig
from bot.core.schedule_service import ScheduleService, config_changes
from bot.core.service import QuizService
from bot.services import App
from bot.storage.db import make_engine
from bot.storage.repositories.schedules import SqlScheduleRepository
from bot.storage.uow import SqlUnitOfWork, session_factory
from tests.conftest import ADMIN, CHANNEL
from tests.fakes import FakePlatform, FrozenClock


@pytest.fixture
def schedules(app: App) -> ScheduleService:
    """The app's schedule service (a race's other process builds its own below)."""
    return app.schedules


async def test_every_save_bumps_the_version(schedules: ScheduleService) -> None:
    first = await schedules.set_schedule(ADMIN, CHANNEL, post_time="09:00", timezone="UTC")
    second = await schedules.set_schedule(ADMIN, CHANNEL, problems=3)
    paused = await schedules.pause_schedule(ADMIN, CHANNEL)
    assert (first.version, second.version, paused.version) == (1, 2, 3)
    assert first.changed_meanwhile == second.changed_meanwhile == paused.changed_meanwhile == ()


@pytest.mark.postgres
async def test_a_save_between_read_and_write_is_kept_and_reported(
    schedules: ScheduleService,
    service: QuizService,
    db_url: str,
    clock: FrozenClock,
    platform: FakePlatform,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if db_url.startswith("sqlite"):
        pytest.skip("SQLite runs one writer at a time: the race is PostgreSQL's")
    await schedules.set_schedule(ADMIN, CHANNEL, post_time="09:00", timezone="UTC")
    other_engine = make_engine(db_url)
    other = ScheduleService(lambda: SqlUnitOfWork(session_factory(other_engine)), clock, service, platform)
    real_get = SqlScheduleRepository.get_schedule
    race = [True]

    async def read_then_other_admin_pauses(repo: SqlScheduleRepository, channel_pk: int) -> Schedule | None:
        stale = await real_get(repo, channel_pk)
        if race and race.pop():  # once: the other admin pauses after this command read, before it writes
            await other.pause_schedule(ADMIN, CHANNEL)
        return stale

    monkeypatch.setattr(SqlScheduleRepository, "get_schedule", read_then_other_admin_pauses)
    try:
        saved = await schedules.set_schedule(ADMIN, CHANNEL, post_time="10:30")
    finally:
        await other_engine.dispose()
    # Kept both: the pause (not silently undone) and this admin's time, who is told about the pause.
    assert saved.config.paused and (saved.config.hour, saved.config.minute) == (10, 30)
    assert saved.changed_meanwhile == ("paused",)
    assert saved.version == 3


@pytest.mark.postgres
async def test_thirty_rounds_of_two_admins_lose_nothing(schedules: ScheduleService, db_url: str) -> None:
    await schedules.set_schedule(ADMIN, CHANNEL, post_time="09:00", timezone="UTC")
    told = 0
    for i in range(30):
        await schedules.pause_schedule(ADMIN, CHANNEL, paused=False)
        minute = f"{i:02d}"
        a, b = await asyncio.gather(
            schedules.set_schedule(ADMIN, CHANNEL, post_time=f"10:{minute}"),
            schedules.pause_schedule(ADMIN, CHANNEL),
        )
        final = (await schedules.schedules())[0].config
        assert final.paused, f"round {i}: the pause was undone"
        assert (final.hour, final.minute) == (10, i), f"round {i}: the time change was lost"
        told += bool(a.changed_meanwhile or b.changed_meanwhile)
    print(f"\n{told} of 30 rounds raced; each second saver was told what changed")


@pytest.mark.postgres
async def test_a_workspace_removal_keeps_an_admin_save_made_meanwhile(
    schedules: ScheduleService,
    service: QuizService,
    db_url: str,
    clock: FrozenClock,
    platform: FakePlatform,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The app is removed (suspend: pause every running schedule) while an admin saves a new time: the
    # system's pause names the version it read, so the admin's time survives under the pause.
    if db_url.startswith("sqlite"):
        pytest.skip("SQLite runs one writer at a time: the race is PostgreSQL's")
    await schedules.set_schedule(ADMIN, CHANNEL, post_time="09:00", timezone="UTC")
    other_engine = make_engine(db_url)
    other = ScheduleService(lambda: SqlUnitOfWork(session_factory(other_engine)), clock, service, platform)
    real_list = SqlScheduleRepository.list_schedules
    race = [True]

    async def read_then_admin_saves(repo: SqlScheduleRepository, *args: Any, **kw: Any) -> list[Schedule]:
        stale = await real_list(repo, *args, **kw)
        if race and race.pop():
            await other.set_schedule(ADMIN, CHANNEL, post_time="11:15")
        return stale

    monkeypatch.setattr(SqlScheduleRepository, "list_schedules", read_then_admin_saves)
    try:
        [paused] = await schedules.suspend_workspace(ADMIN, CHANNEL.platform, CHANNEL.workspace_id)
    finally:
        await other_engine.dispose()
    final = (await schedules.schedules())[0]
    assert final.config.paused and (final.config.hour, final.config.minute) == (11, 15)
    assert paused.version == final.version == 3
    [resumed] = await schedules.resume_workspace(ADMIN, CHANNEL.platform, CHANNEL.workspace_id)
    assert not resumed.config.paused and (resumed.config.hour, resumed.config.minute) == (11, 15)


def test_changes_are_named() -> None:
    before = ScheduleConfig(hour=9, minute=0, timezone="UTC")
    after = ScheduleConfig(hour=10, minute=30, timezone="UTC", paused=True, problems=3)
    assert config_changes(before, after) == ("time 09:00 -> 10:30", "paused", "problems 5 -> 3")
    assert config_changes(before, before) == ()
