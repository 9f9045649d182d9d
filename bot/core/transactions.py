"""How a use case's database work is run: in a transaction of its own, or grouped with other players'.

The start and answer paths hand their work to a ``Transactions`` as a *job*: an async function of a unit
of work. ``OwnTransactions`` runs each job in its own unit of work (what every other use case does).
``bot.storage.group_commit.GroupCommit`` runs the jobs that arrive together in one shared transaction, one
after another, which is the same as running them in that order one transaction each, minus a BEGIN and a
COMMIT per job.

A job may be run more than once (a shared transaction that fails is rolled back and its jobs rerun one
transaction each), so it must do nothing outside the unit of work that a rerun would repeat: no posts, no
changes to captured state; take the ``now`` its rules compare with before building the job (timestamps
for the record, such as a badge's award time, may be read inside).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable
from typing import Protocol, TypeVar

from bot.core.ports import UnitOfWork

T = TypeVar("T")

#: A use case's database work, as a function of the unit of work it runs in.
Job = Callable[[UnitOfWork], Awaitable[T]]


class Transactions(Protocol):
    """Runs jobs in transactions."""

    async def run(self, job: Job[T], key: Hashable = None) -> T:
        """Run ``job`` and return what it returns (or raise what it raised) once its work is committed.

        ``key`` names what the job touches (the player): jobs with the same key never run concurrently.
        """
        ...


class OwnTransactions:
    """Each job in a transaction of its own (a fresh unit of work per job)."""

    def __init__(self, uow_factory: Callable[[], UnitOfWork]) -> None:
        self._uow = uow_factory

    async def run(self, job: Job[T], key: Hashable = None) -> T:
        """Run ``job`` in its own unit of work (committed when it returns, rolled back when it raises)."""
        async with self._uow() as uow:
            return await job(uow)
