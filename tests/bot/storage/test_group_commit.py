"""Group commit (bot/storage/group_commit.py) on SQLite and PostgreSQL: shared transactions, what a refused
or failing job does to the others in its batch, cancelled callers."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from sqlalchemy import text

from bot.core.errors import NotStartedError, ProblemOverError, TimeUpError
from bot.core.models import PlayerRef
from bot.core.ports import UnitOfWork
from bot.core.service import QuizService
from bot.storage.db import make_engine
from bot.storage.group_commit import GroupCommit
from bot.storage.models import PlayerRow
from bot.storage.uow import SqlUnitOfWork, session_factory
from tests.conftest import ADMIN as ADMIN_ACTOR
from tests.conftest import CHANNEL, START, actor, test_bank
from tests.fakes import FakePlatform, FrozenClock


@dataclass
class Rig:
    service: QuizService
    tx: GroupCommit
    url: str

    async def scalar(self, sql: str) -> int:
        engine = make_engine(self.url)
        try:
            async with engine.connect() as conn:
                return int(await conn.scalar(text(sql)) or 0)
        finally:
            await engine.dispose()


@pytest.fixture
async def rig(db_url: str, clock: FrozenClock) -> AsyncIterator[Rig]:
    engine = make_engine(db_url)
    factory = session_factory(engine)
    # One lane on both databases, so that every concurrent job below lands in the same batch.
    tx = GroupCommit(lambda: SqlUnitOfWork(factory), lanes=1)
    svc = QuizService(lambda: SqlUnitOfWork(factory), clock, FakePlatform(), seed=1, transactions=tx)
    await svc.admin_import(ADMIN_ACTOR, test_bank())
    yield Rig(svc, tx, db_url)
    await engine.dispose()


async def test_players_clicking_together_share_transactions_with_serial_results(rig: Rig) -> None:
    ch, _ = await rig.service.open_challenge(CHANNEL)
    p = ch.problems[0]
    players = [actor(f"p{i}") for i in range(20)]
    cards = await asyncio.gather(*(rig.service.start_problem(a, p.id) for a in players))
    assert all(c.attempts_left == 2 for c in cards)
    # Even players answer right; odd ones wrong, then right.
    first = await asyncio.gather(
        *(rig.service.answer(a, p.id, "A" if i % 2 == 0 else "B", f"k1-{i}") for i, a in enumerate(players))
    )
    assert [f.correct for f in first] == [i % 2 == 0 for i in range(20)]
    wrong = [(i, a) for i, a in enumerate(players) if i % 2]
    second = await asyncio.gather(*(rig.service.answer(a, p.id, "A", f"k2-{i}") for i, a in wrong))
    assert all(f.correct and f.over for f in second)
    assert rig.tx.stats.batches >= 3 and rig.tx.stats.largest >= 10, rig.tx.stats
    assert rig.tx.stats.fallbacks == 0
    assert await rig.scalar("SELECT count(*) FROM play_sessions WHERE outcome = 'correct'") == 20
    assert await rig.scalar("SELECT count(*) FROM attempts") == 30
    board = await rig.service.leaderboard(CHANNEL)
    assert board.total_players == 20
    # A redelivered click in a batch is still a no-op.
    again = await asyncio.gather(
        *(rig.service.answer(a, p.id, "B", f"k1-{i}") for i, a in enumerate(players))
    )
    assert all(f.duplicate for f in again)
    assert await rig.scalar("SELECT count(*) FROM attempts") == 30


async def test_a_refused_call_in_a_batch_leaves_the_others_alone(rig: Rig, clock: FrozenClock) -> None:
    """Refusals raised before any write (not started, time up) do not roll the batch back."""
    ch, _ = await rig.service.open_challenge(CHANNEL)
    p = ch.problems[0]
    late, never, fine = actor("late"), actor("never"), actor("fine")
    await rig.service.start_problem(late, p.id)
    clock.advance(121)  # late's deadline has passed
    await rig.service.start_problem(fine, p.id)
    before = rig.tx.stats.batches
    results = await asyncio.gather(
        rig.service.answer(late, p.id, "A"),
        rig.service.answer(never, p.id, "A"),
        rig.service.answer(fine, p.id, "A"),
        return_exceptions=True,
    )
    assert isinstance(results[0], TimeUpError)
    assert isinstance(results[1], NotStartedError)
    assert not isinstance(results[2], BaseException) and results[2].correct
    assert rig.tx.stats.batches == before + 1 and rig.tx.stats.fallbacks == 0
    # The time-out was recorded in the shared transaction, with no attempt.
    assert await rig.scalar("SELECT count(*) FROM play_sessions WHERE outcome = 'timeout'") == 1
    assert await rig.scalar("SELECT count(*) FROM attempts") == 1


async def test_a_failing_job_rolls_the_batch_back_and_each_job_runs_alone(rig: Rig) -> None:
    async def add(uow: UnitOfWork, name: str) -> int:
        return await uow.players.ensure_player(PlayerRef("test", name, name))

    async def broken(uow: UnitOfWork) -> int:
        await add(uow, "broken")
        raise RuntimeError("bug after a write")

    results = await asyncio.gather(
        rig.tx.run(lambda uow: add(uow, "one")),
        rig.tx.run(broken),
        rig.tx.run(lambda uow: add(uow, "two")),
        return_exceptions=True,
    )
    assert isinstance(results[1], RuntimeError) and str(results[1]) == "bug after a write"
    assert isinstance(results[0], int) and isinstance(results[2], int)
    assert rig.tx.stats.fallbacks == 1 and rig.tx.stats.alone == 3 and rig.tx.stats.batches == 0
    assert await rig.scalar("SELECT count(*) FROM players WHERE user_id IN ('one', 'two')") == 2
    assert await rig.scalar("SELECT count(*) FROM players WHERE user_id = 'broken'") == 0


async def test_a_job_that_commits_on_its_own_is_rerun_alone(rig: Rig) -> None:
    """A shared transaction cannot be committed for one job: ``commit()`` there sends the batch to the
    one-by-one path, where the job's commit works as written."""
    committed: list[bool] = []

    async def add(uow: UnitOfWork, name: str) -> int:
        return await uow.players.ensure_player(PlayerRef("test", name, name))

    async def commits(uow: UnitOfWork) -> int:
        pk = await add(uow, "committer")
        await uow.commit()
        committed.append(True)
        return pk

    results = await asyncio.gather(
        rig.tx.run(lambda uow: add(uow, "one")), rig.tx.run(commits), rig.tx.run(lambda uow: add(uow, "two"))
    )
    assert len(set(results)) == 3
    assert committed == [True], "the commit ran once, in the job's own transaction"
    assert rig.tx.stats.fallbacks == 1 and rig.tx.stats.batches == 0
    assert await rig.scalar("SELECT count(*) FROM players WHERE user_id IN ('one', 'two', 'committer')") == 3


async def test_a_caller_cancelled_while_queued_has_its_job_skipped(rig: Rig) -> None:
    release = asyncio.Event()
    ran: list[str] = []

    async def slow(uow: UnitOfWork) -> None:
        ran.append("slow")
        await release.wait()

    async def skipped(uow: UnitOfWork) -> None:
        ran.append("skipped")

    first = asyncio.create_task(rig.tx.run(slow))
    await asyncio.sleep(0.05)  # the lane is now busy with `slow`
    queued = asyncio.create_task(rig.tx.run(skipped))
    await asyncio.sleep(0)
    queued.cancel()
    release.set()
    await first
    with pytest.raises(asyncio.CancelledError):
        await queued
    await rig.tx.run(lambda uow: asyncio.sleep(0))  # the lane still serves
    assert ran == ["slow"]


async def test_a_refusal_after_a_write_sends_the_batch_to_the_one_by_one_path(rig: Rig) -> None:
    """A domain error raised after writing (sent, or only added to the session) must not keep the write:
    the batch is rolled back and each job rerun alone, where the error rolls back its own transaction."""

    async def add(uow: UnitOfWork, name: str) -> int:
        return await uow.players.ensure_player(PlayerRef("test", name, name))

    async def writes_then_refuses(uow: UnitOfWork) -> int:
        await add(uow, "sent")
        raise ProblemOverError("refused after a write")

    async def adds_then_refuses(uow: UnitOfWork) -> int:
        assert isinstance(uow, SqlUnitOfWork)
        uow.s.add(PlayerRow(platform="test", user_id="pending", display_name="p", created_at=START))
        raise ProblemOverError("refused with a pending object")

    for n, refusing in enumerate((writes_then_refuses, adds_then_refuses)):
        before = rig.tx.stats.fallbacks
        results = await asyncio.gather(
            rig.tx.run(functools.partial(add, name=f"a-{n}")),
            rig.tx.run(refusing),
            rig.tx.run(functools.partial(add, name=f"b-{n}")),
            return_exceptions=True,
        )
        assert isinstance(results[1], ProblemOverError)
        assert isinstance(results[0], int) and isinstance(results[2], int)
        assert rig.tx.stats.fallbacks == before + 1
    assert await rig.scalar("SELECT count(*) FROM players WHERE user_id IN ('sent', 'pending')") == 0
    kept = "SELECT count(*) FROM players WHERE user_id IN ('a-0', 'b-0', 'a-1', 'b-1')"
    assert await rig.scalar(kept) == 4


async def test_a_job_raising_cancelled_error_fails_alone_and_the_lane_serves_on(rig: Rig) -> None:
    async def awaits_a_cancelled_future(uow: UnitOfWork) -> None:
        doomed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        doomed.cancel()
        await doomed

    results = await asyncio.gather(
        rig.tx.run(lambda uow: uow.players.ensure_player(PlayerRef("test", "x", "x"))),
        rig.tx.run(awaits_a_cancelled_future),
        rig.tx.run(lambda uow: uow.players.ensure_player(PlayerRef("test", "y", "y"))),
        return_exceptions=True,
    )
    assert isinstance(results[1], asyncio.CancelledError)
    assert isinstance(results[0], int) and isinstance(results[2], int)
    assert await rig.tx.run(lambda uow: uow.players.ensure_player(PlayerRef("test", "z", "z"))) > 0
