"""The one deadline timer (bot.commands.timer) and ``Clock.sleep_until`` on both clocks."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging

import pytest

from bot.commands.timer import DeadlineTimers
from bot.core.ports import SystemClock
from tests.fakes import FrozenClock

START = dt.datetime(2026, 11, 20, 9, 0, tzinfo=dt.UTC)


async def _until(predicate: object, timeout: float = 2.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():  # type: ignore[operator]
            await asyncio.sleep(0.001)


async def test_a_timer_fires_when_the_frozen_clock_passes_its_deadline() -> None:
    clock = FrozenClock(START)
    timers = DeadlineTimers(clock)
    fired: list[str] = []

    async def due() -> None:
        fired.append("p1")

    assert timers.arm(("u1", 1), START + dt.timedelta(seconds=120), due)
    await _until(lambda: clock.sleepers == 1)
    clock.advance(119)
    await asyncio.sleep(0.01)
    assert fired == [] and timers.armed == 1  # not yet: no polling, no early wake
    clock.advance(1)
    await _until(lambda: fired == ["p1"])
    await _until(lambda: timers.armed == 0)


async def test_arming_an_armed_key_keeps_the_first_timer_and_disarm_cancels() -> None:
    clock = FrozenClock(START)
    timers = DeadlineTimers(clock)
    fired: list[int] = []

    def calls(n: int):  # type: ignore[no-untyped-def]
        async def due() -> None:
            fired.append(n)

        return due

    assert timers.arm("k", START + dt.timedelta(seconds=10), calls(1))
    assert not timers.arm("k", START + dt.timedelta(seconds=5), calls(2))  # the deadline never moves
    assert timers.arm("other", START + dt.timedelta(seconds=10), calls(3))
    await asyncio.sleep(0)
    timers.disarm("other")
    clock.advance(10)
    await _until(lambda: timers.armed == 0)
    assert fired == [1]


async def test_a_deadline_already_past_fires_at_once() -> None:
    clock = FrozenClock(START)
    timers = DeadlineTimers(clock)
    done = asyncio.Event()

    async def due() -> None:
        done.set()

    timers.arm(1, START - dt.timedelta(seconds=1), due)
    await asyncio.wait_for(done.wait(), 1)


async def test_a_failing_callback_is_logged_and_the_timer_ends(caplog: pytest.LogCaptureFixture) -> None:
    clock = FrozenClock(START)
    timers = DeadlineTimers(clock)

    async def broken() -> None:
        raise RuntimeError("database gone")

    with caplog.at_level(logging.ERROR, logger="bot.commands.timer"):
        timers.arm("k", START, broken)
        await _until(lambda: timers.armed == 0)
    [record] = caplog.records
    assert record.exc_info is not None and "database gone" in str(record.exc_info[1])


async def test_close_cancels_every_waiting_timer() -> None:
    clock = FrozenClock(START)
    timers = DeadlineTimers(clock)

    async def never() -> None:  # pragma: no cover - cancelled before the deadline
        raise AssertionError("fired after close")

    for n in range(3):
        timers.arm(n, START + dt.timedelta(hours=1), never)
    await _until(lambda: clock.sleepers == 3)
    await timers.close()
    assert timers.armed == 0 and clock.sleepers == 0
    clock.advance(7200)
    await asyncio.sleep(0.01)


async def test_the_system_clock_sleeps_until_the_wall_clock_reaches_the_moment() -> None:
    clock = SystemClock()
    when = clock.now() + dt.timedelta(seconds=0.05)
    await clock.sleep_until(when)
    assert clock.now() >= when
    before = clock.now()
    await clock.sleep_until(before - dt.timedelta(seconds=5))  # in the past: returns at once
    assert (clock.now() - before).total_seconds() < 0.05


async def test_moving_the_frozen_clock_by_assignment_wakes_sleepers_too() -> None:
    clock = FrozenClock(START)
    woke = asyncio.Event()

    async def sleeper() -> None:
        await clock.sleep_until(START + dt.timedelta(days=1))
        woke.set()

    task = asyncio.create_task(sleeper())
    await _until(lambda: clock.sleepers == 1)
    clock.current = START + dt.timedelta(days=2)
    await asyncio.wait_for(woke.wait(), 1)
    await task
