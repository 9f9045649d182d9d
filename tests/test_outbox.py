"""The outbox itself on both backends: the row is the claim (two senders at once post once), a sender that
died mid-send leaves its post to the next one after the lease, and the close and its queued results are
one transaction.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import pytest

from bot.core.outbox import OutboxTiming
from bot.core.service import QuizService
from tests.conftest import CHANNEL
from tests.fakes import FakePlatform, FrozenClock

TIMING = OutboxTiming(lease_s=60, retry_base_s=30, retry_max_s=600, give_up_s=3600)


class Flaky(FakePlatform):
    """Refuses results while ``down``; each accepted results post waits for ``gate`` when one is set."""

    down = False
    gate: asyncio.Event | None = None

    async def post_results(self, *args: Any) -> None:
        if self.down:
            raise ConnectionResetError("the platform dropped the connection")
        if self.gate is not None:
            await self.gate.wait()
        await super().post_results(*args)


@pytest.fixture
def platform() -> FakePlatform:
    return Flaky()


async def _closed_with_results_queued(service: QuizService, platform: Flaky, clock: FrozenClock) -> int:
    service.outbox.timing = TIMING
    card = await service.post_daily(CHANNEL, closes_at=clock.now() + dt.timedelta(hours=1))
    platform.down = True
    results = await service.close_challenge(card.challenge_id)
    assert results is not None and results.not_posted is not None
    assert "ConnectionResetError" in results.not_posted
    platform.down = False
    return card.challenge_id


async def test_two_senders_draining_together_post_once(
    service: QuizService, platform: Flaky, clock: FrozenClock
) -> None:
    challenge_id = await _closed_with_results_queued(service, platform, clock)
    [(_, told)] = platform.delivery_notices
    assert told.kind == "results" and told.retry_at is not None
    clock.advance(TIMING.retry_base_s)
    platform.gate = asyncio.Event()
    # Two processes' outbox jobs (two Outbox objects on the same database) at the same moment.
    other = QuizService(service._uow, clock, platform, seed=1, outbox=TIMING)
    first = asyncio.create_task(service.outbox.drain())
    second = asyncio.create_task(other.outbox.drain())
    await asyncio.sleep(0.2)
    platform.gate.set()
    done = [d.status for d in [*await first, *await second]]
    assert sorted(done) in (["busy", "sent"], ["sent"]), done  # one claim won; the other found it taken
    assert [c.challenge_id for _, c, _ in platform.results] == [challenge_id]
    assert len(platform.delivery_notices) == 1  # the cause was told once


async def test_a_sender_that_died_mid_send_leaves_it_to_the_next_after_the_lease(
    service: QuizService, platform: Flaky, clock: FrozenClock
) -> None:
    challenge_id = await _closed_with_results_queued(service, platform, clock)
    clock.advance(TIMING.retry_base_s)
    async with service._uow() as uow:  # what a process did before SIGKILL: the claim, and nothing more
        row = await uow.outbox.find(challenge_id, "results")
        assert row is not None
        assert await uow.outbox.claim(row.id, clock.now(), clock.now() + dt.timedelta(seconds=60))
    assert [d.status for d in await service.outbox.drain()] == []  # held: not due for anyone
    clock.advance(59)
    assert platform.results == []
    clock.advance(1)  # the lease is over
    assert [d.status for d in await service.outbox.drain()] == ["sent"]
    assert [c.challenge_id for _, c, _ in platform.results] == [challenge_id]
    assert await service.outbox.drain() == []


async def test_a_close_that_cannot_queue_its_results_does_not_close(
    service: QuizService, platform: Flaky, clock: FrozenClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    card = await service.post_daily(CHANNEL, closes_at=clock.now() + dt.timedelta(hours=1))

    async def broken(*_: Any, **__: Any) -> Any:
        raise RuntimeError("the outbox insert failed")

    monkeypatch.setattr(service.outbox, "queue", broken)
    with pytest.raises(RuntimeError):
        await service.close_challenge(card.challenge_id)
    assert (await service.get_challenge(card.challenge_id)).status == "open"  # one transaction: undone
    monkeypatch.undo()
    assert await service.close_challenge(card.challenge_id) is not None
    assert len(platform.results) == 1
