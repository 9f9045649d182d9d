"""The outbox itself on both backends: the row is the claim (two senders at once post once), a sender that
died mid-send leaves its post to the next one after the lease, and the close and its queued results are
one transaction.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
from typing import Any

import pytest

import bot.core.outbox as outbox_module
from bot.core.outbox import OutboxTiming
from bot.core.service import QuizService
from bot.storage.models import OutboxRow
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


async def _row(service: QuizService, challenge_id: int) -> Any:
    """The stored row itself (its claim included), read through the unit of work's session."""
    async with service._uow() as uow:
        item = await uow.outbox.find(challenge_id, "results")
        assert item is not None
        repo: Any = uow.outbox
        return await repo.s.get(OutboxRow, item.id, populate_existing=True)


async def test_a_sender_whose_lease_was_taken_over_changes_nothing(
    service: QuizService, platform: Flaky, clock: FrozenClock
) -> None:
    # A slow sender (A) outlived its lease; B claimed the row. A's late "sent" or "failed" must not touch
    # B's claim: each claim counts an attempt, and the updates are fenced on it.
    challenge_id = await _closed_with_results_queued(service, platform, clock)
    clock.advance(TIMING.retry_base_s)
    row = await _row(service, challenge_id)
    async with service._uow() as uow:
        a = await uow.outbox.claim(row.id, clock.now(), clock.now() + dt.timedelta(seconds=60))
    clock.advance(61)
    async with service._uow() as uow:
        b = await uow.outbox.claim(row.id, clock.now(), clock.now() + dt.timedelta(seconds=60))
    assert a is not None and b is not None and b.attempts == a.attempts + 1
    async with service._uow() as uow:
        await uow.outbox.mark_failed(row.id, "A's late failure", None, clock.now(), attempt=a.attempts)
        assert not await uow.outbox.mark_sent(row.id, clock.now(), None, attempt=a.attempts)
    after = await _row(service, challenge_id)
    assert after.status == "pending" and after.claimed_until is not None  # still B's
    assert after.last_error != "A's late failure"
    async with service._uow() as uow:
        assert await uow.outbox.mark_sent(row.id, clock.now(), None, attempt=b.attempts)


class Hanging(Flaky):
    """A results post that never returns (the platform accepts the connection and answers nothing)."""

    async def post_results(self, *args: Any) -> None:
        if self.down:
            raise ConnectionResetError("the platform dropped the connection")
        await asyncio.Event().wait()


async def test_a_send_that_hangs_is_cut_off_inside_its_lease_and_retried(
    service: QuizService, clock: FrozenClock
) -> None:
    platform = Hanging()
    service.outbox.platform = platform
    service._platform = platform
    challenge_id = await _closed_with_results_queued(service, platform, clock)
    # A lease of a second: the send is cut off well before a second sender could take the row.
    service.outbox.timing = OutboxTiming(lease_s=1, retry_base_s=30, retry_max_s=600, give_up_s=3600)
    clock.advance(TIMING.retry_base_s)
    [delivery] = await service.outbox.drain()
    assert (
        delivery.status == "retrying"
        and delivery.cause == "TimeoutError: the platform did not answer in time"
    )
    row = await _row(service, challenge_id)
    assert row.status == "pending" and row.claimed_until is None  # released, not held to the lease's end


async def test_a_cancelled_send_releases_its_claim(
    service: QuizService, platform: Flaky, clock: FrozenClock
) -> None:
    challenge_id = await _closed_with_results_queued(service, platform, clock)
    clock.advance(TIMING.retry_base_s)
    platform.gate = asyncio.Event()  # the send waits: the job deadline (a cancel) comes first
    task = asyncio.create_task(service.outbox.drain())
    for _ in range(200):
        if (await _row(service, challenge_id)).claimed_until is not None:
            break
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    row = await _row(service, challenge_id)
    assert row.status == "pending" and row.claimed_until is None
    assert row.last_error == "the send was cancelled"
    platform.gate.set()
    clock.advance(TIMING.retry_base_s)
    assert [d.status for d in await service.outbox.drain()] == ["sent"]


async def test_a_post_whose_senders_kept_dying_is_given_up_with_a_notice(
    service: QuizService, platform: Flaky, clock: FrozenClock
) -> None:
    # Every sender was killed mid-send (no failure recorded): past give-up, the next claim gives it up.
    challenge_id = await _closed_with_results_queued(service, platform, clock)
    row = await _row(service, challenge_id)
    for _ in range(3):
        clock.advance(TIMING.lease_s + TIMING.retry_max_s)
        async with service._uow() as uow:
            assert await uow.outbox.claim(row.id, clock.now(), clock.now() + dt.timedelta(seconds=60))
    clock.advance(TIMING.give_up_s)
    [delivery] = await service.outbox.drain()
    assert delivery.status == "gave_up" and "not delivered within the give-up time" in (delivery.cause or "")
    assert platform.results == []
    assert platform.delivery_notices[-1][1].retry_at is None  # the admins' last notice
    assert (await _row(service, challenge_id)).status == "failed"


def test_backoff_never_overflows(service: QuizService) -> None:
    assert service.outbox.retry_delay(5000) == dt.timedelta(seconds=service.outbox.timing.retry_max_s)


async def test_drain_reads_past_rows_of_channels_another_process_serves(
    service: QuizService, platform: Flaky, clock: FrozenClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Another shard's backlog (rows of channels this process does not serve, older than its own) comes
    # first in the due order; this process's own row is still found and sent.
    monkeypatch.setattr(outbox_module, "DRAIN_PAGE", 2)
    service.outbox.timing = TIMING
    others = [dataclasses.replace(CHANNEL, channel_id=f"elsewhere-{n}") for n in range(5)]
    platform.down = True
    for channel in [*others, CHANNEL]:
        card = await service.post_daily(channel, closes_at=clock.now() + dt.timedelta(hours=1))
        await service.close_challenge(card.challenge_id)
        clock.advance(1)
    platform.down = False
    clock.advance(TIMING.retry_base_s)
    done = await service.outbox.drain(serves=lambda channel: channel.channel_id == CHANNEL.channel_id)
    assert [d.status for d in done] == ["sent"]
    assert [ch.channel_id for ch, _, _ in platform.results] == [CHANNEL.channel_id]


async def test_finished_posts_are_deleted_after_a_month_and_pending_ones_kept(
    service: QuizService, platform: Flaky, clock: FrozenClock
) -> None:
    # Never given up within the test (a pending row must stay pending however old it is).
    service.outbox.timing = dataclasses.replace(TIMING, give_up_s=90 * 86400)
    sent = await service.post_daily(CHANNEL, closes_at=clock.now() + dt.timedelta(hours=1))
    platform.down = True
    other = dataclasses.replace(CHANNEL, channel_id="still-failing")
    pending = await service.post_daily(other, closes_at=clock.now() + dt.timedelta(hours=1))
    await service.close_challenge(pending.challenge_id)  # its results stay pending (the platform is down)
    platform.down = False
    await service.close_challenge(sent.challenge_id)  # results sent
    clock.advance(outbox_module.KEEP_FINISHED.total_seconds() - 60)
    platform.down = True  # the pending row stays pending through every drain
    await service.outbox.drain()
    assert (await _row(service, sent.challenge_id)) is not None  # not a month old yet
    clock.advance(120)
    await service.outbox.drain()
    async with service._uow() as uow:
        assert await uow.outbox.find(sent.challenge_id, "results") is None
        assert await uow.outbox.find(sent.challenge_id, "challenge") is None
        still = await uow.outbox.find(pending.challenge_id, "results")
    assert still is not None and still.status == "pending"
