"""A deadline for one chat interaction: a command, a button, a form (RANKZERO_HANDLER_DEADLINE_S).

A database that accepts bytes and answers nothing would otherwise hold a click for as long as the
connection lives, with the player looking at "thinking…". Past the deadline the work is cancelled (its
transaction is rolled back with the connection) and :class:`HandlerDeadlineError` reaches the adapter's
failure path, which tells the user in one sentence and logs where it was stuck.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable
from typing import TypeVar

T = TypeVar("T")


class HandlerDeadlineError(TimeoutError):
    """An interaction's work did not finish within its deadline and was cancelled."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"the interaction did not finish within its {seconds:g} s deadline")
        #: The deadline that passed (seconds).
        self.seconds = seconds


async def within(seconds: float | None, work: Awaitable[T]) -> T:
    """``work``'s result, or HandlerDeadlineError once ``seconds`` passed (None: no deadline).

    A TimeoutError raised by the work itself (a driver's connect or statement timeout) passes unchanged.
    """
    async with bounded(seconds):
        return await work


@contextlib.asynccontextmanager
async def bounded(seconds: float | None) -> AsyncIterator[None]:
    """The body of the ``async with`` under the deadline ``seconds`` (None: none), as :func:`within`: past
    it the body is cancelled and HandlerDeadlineError raised; the body's own TimeoutError passes unchanged.
    """
    guard = asyncio.timeout(seconds)
    try:
        async with guard:
            yield
    except TimeoutError:
        if guard.expired():
            raise HandlerDeadlineError(seconds or 0.0) from None
        raise
