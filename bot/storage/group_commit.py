"""Group commit: the start and answer jobs that arrive together share one transaction.

Why: a start or an answer is a handful of short statements, and on both databases a transaction's fixed
costs (pool checkout and ping, BEGIN, COMMIT, a fresh ORM session; on SQLite also the thread hops of the
async driver) cost as much as the statements themselves. Right after the daily post many players click at
once; running the jobs queued at that moment one after another in one transaction keeps every player's
semantics (it is exactly serial execution in queue order) and pays those costs once per batch.
``benchmarks/engine.py`` measures the effect.

How:

* Jobs queue on a *lane*; a lane is drained by a short-lived task that exists only while the lane has
  work, so nothing lingers when the bot is idle. A lane runs one batch at a time on one connection. SQLite
  has one lane (one writer anyway); PostgreSQL several, and a job's ``key`` (the player) picks its lane,
  so one player's clicks never race each other across lanes.
* Jobs of a batch run in queue order in one unit of work; between jobs the ORM session is flushed and
  emptied, so no job sees another's cached objects. Results are handed out only after the COMMIT.
* A job that raises a ``RankZeroError`` (time is up, no attempts left...) before writing anything leaves
  nothing to undo: its error is handed out and the batch goes on. Any other failure (a database error, an
  error after a write, a job calling ``commit()``, which a shared transaction cannot do for one job, or a
  failed COMMIT) rolls the whole batch back and reruns each of its jobs in a transaction of its own, which
  is what they would have seen without grouping.
* A caller cancelled while its job is still queued: the job is skipped. Once it runs, it commits with its
  batch (the caller just does not wait for the answer).
* One transaction sees its own writes under any isolation level, so the serial-execution argument does
  not depend on READ COMMITTED. What grouping does change on PostgreSQL: a batch holds the row locks of
  all its jobs until its COMMIT, so a transaction touching many players' rows (closing a challenge) can
  deadlock with it; PostgreSQL then aborts one side, the batch reruns its jobs alone and the close is
  retried (``TransientConflictError``).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.core.errors import RankZeroError
from bot.core.transactions import Job
from bot.storage.uow import SqlUnitOfWork

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Most jobs in one shared transaction: a job that arrives while a batch runs waits for it, so this bounds
#: that wait (benchmarks/engine.py --max-batch compares values).
DEFAULT_MAX_BATCH = 16

_WRITES = "rankzero.writes"  # key in the DBAPI connection's info dict: statements other than SELECT


def _count_writes(conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
    if not statement.lstrip()[:6].upper().startswith("SELECT"):
        conn.info[_WRITES] = conn.info.get(_WRITES, 0) + 1


def _watch_writes(engine: Engine) -> None:
    if not event.contains(engine, "before_cursor_execute", _count_writes):
        event.listen(engine, "before_cursor_execute", _count_writes)


class _Abandon(Exception):
    """A job failed in a way that needs the batch rolled back and its jobs rerun one by one."""


@dataclass
class GroupCommitStats:
    """Counters (for tests, logs and the benchmark)."""

    batches: int = 0  #: shared transactions committed
    jobs: int = 0  #: jobs whose outcome was handed out
    alone: int = 0  #: of which run in a transaction of their own (nothing to group with, or a rerun)
    largest: int = 0  #: most jobs in one shared transaction
    fallbacks: int = 0  #: batches rolled back and rerun one transaction per job


@dataclass
class _Pending:
    job: Job[Any]
    future: asyncio.Future[Any]


@dataclass
class _Lane:
    queue: deque[_Pending] = field(default_factory=deque)
    task: asyncio.Task[None] | None = None


class GroupCommit:
    """A ``Transactions`` that runs concurrent jobs in shared transactions (see the module docstring)."""

    def __init__(
        self,
        uow_factory: Callable[[], SqlUnitOfWork],
        *,
        lanes: int = 1,
        max_batch: int = DEFAULT_MAX_BATCH,
    ) -> None:
        if lanes < 1 or max_batch < 1:
            raise ValueError("lanes and max_batch must be at least 1")
        self._uow = uow_factory
        self._lanes = [_Lane() for _ in range(lanes)]
        self._max_batch = max_batch
        self.stats = GroupCommitStats()

    async def run(self, job: Job[T], key: Hashable = None) -> T:
        """Queue ``job`` on its key's lane and wait for its outcome (after its transaction commits)."""
        lane = self._lanes[hash(key) % len(self._lanes)]
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        lane.queue.append(_Pending(job, future))
        if lane.task is None or lane.task.done():
            lane.task = asyncio.get_running_loop().create_task(self._drain(lane))
        return await future

    async def _drain(self, lane: _Lane) -> None:
        batch: list[_Pending] = []
        try:
            while lane.queue:
                batch = []
                while lane.queue and len(batch) < self._max_batch:
                    pending = lane.queue.popleft()
                    if not pending.future.cancelled():  # its caller gave up while it was queued
                        batch.append(pending)
                if len(batch) == 1:
                    await self._alone(batch[0])
                elif batch:
                    await self._together(batch)
        finally:
            # Only reached with work left if this task itself was cancelled (event loop shutting down).
            for pending in (*batch, *lane.queue):
                if not pending.future.done():
                    pending.future.cancel()

    async def _alone(self, pending: _Pending) -> None:
        """One job in a transaction of its own."""
        try:
            async with self._uow() as uow:
                value = await pending.job(uow)
        except asyncio.CancelledError as exc:
            if _we_are_cancelled():
                raise
            _settle(pending, None, exc)  # the job's own CancelledError (it awaited something cancelled)
        except Exception as exc:
            _settle(pending, None, exc)
        else:
            _settle(pending, value, None)
        self.stats.jobs += 1
        self.stats.alone += 1

    async def _together(self, batch: list[_Pending]) -> None:
        """Several jobs in one transaction, or each alone if that transaction fails."""
        outcomes: list[tuple[_Pending, Any, BaseException | None]] = []
        try:
            async with self._uow() as uow:
                uow.shared = True
                conn = await uow.s.connection()
                _watch_writes(conn.engine.sync_engine)
                info = conn.info
                for pending in batch:
                    before = info.get(_WRITES, 0)
                    try:
                        value = await pending.job(uow)
                    except RankZeroError as exc:
                        session = uow.s
                        if info.get(_WRITES, 0) != before or session.new or session.dirty or session.deleted:
                            # Something of this job's would be kept (sent, or pending in the session).
                            raise _Abandon("a job raised after writing") from exc
                        outcomes.append((pending, None, exc))
                    except asyncio.CancelledError as exc:
                        if _we_are_cancelled():
                            raise
                        raise _Abandon("a job raised CancelledError") from exc
                    except Exception as exc:
                        raise _Abandon(f"a job failed: {type(exc).__name__}") from exc
                    else:
                        outcomes.append((pending, value, None))
                    await uow.next_job()
        except Exception as exc:
            # Rolled back: nothing of this batch was kept, so running each job again is exactly what it
            # would have done on its own.
            log.debug("group commit of %d jobs rolled back (%s); running them one by one", len(batch), exc)
            self.stats.fallbacks += 1
            for pending in batch:
                if not pending.future.cancelled():
                    await self._alone(pending)
            return
        self.stats.batches += 1
        self.stats.largest = max(self.stats.largest, len(batch))
        for pending, value, error in outcomes:
            _settle(pending, value, error)
            self.stats.jobs += 1


def default_lanes(engine: AsyncEngine) -> int:
    """One lane on SQLite (a single writer: more lanes would only queue on its one connection); four on
    PostgreSQL (concurrent batches on separate connections, leaving most of the pool to other work).
    """
    return 1 if engine.dialect.name == "sqlite" else 4


def _we_are_cancelled() -> bool:
    """True when the drain task itself is being cancelled (not a job raising CancelledError)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _settle(pending: _Pending, value: Any, error: BaseException | None) -> None:
    if pending.future.done():  # cancelled by its caller while the job ran
        return
    if error is not None:
        pending.future.set_exception(error)
    else:
        pending.future.set_result(value)
