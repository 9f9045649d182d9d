"""One deadline timer for every adapter: at a stored deadline, run a callback once.

Timers wait with ``Clock.sleep_until``, so they follow the services' clock (a test moves a frozen clock
and the timer wakes), and never poll. They are best effort: a restart loses them, and the stored deadline
is what counts (the next click after it is refused as late whether or not a timer ran).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
from collections.abc import Awaitable, Callable, Hashable

from bot.core.ports import Clock

log = logging.getLogger(__name__)

OnDue = Callable[[], Awaitable[None]]


class DeadlineTimers:
    """Keyed timers: ``arm(key, deadline, on_due)`` runs ``on_due`` once the clock reaches ``deadline``.

    A key has at most one timer; arming an armed key keeps the running one (a problem's deadline never
    moves). ``on_due`` failures are logged, never raised: a timer must not take the process down.
    """

    def __init__(self, clock: Clock) -> None:
        #: The clock the deadlines are read on (replaceable until the first timer is armed).
        self.clock = clock
        self._tasks: dict[Hashable, asyncio.Task[None]] = {}

    def arm(self, key: Hashable, deadline: dt.datetime, on_due: OnDue) -> bool:
        """Start the timer of ``key``; False when one is already running for it."""
        task = self._tasks.get(key)
        if task is not None and not task.done():
            return False
        self._tasks[key] = asyncio.create_task(self._run(key, deadline, on_due), name=f"deadline {key}")
        return True

    def disarm(self, key: Hashable) -> None:
        """Stop the timer of ``key`` (the problem ended some other way); a no-op when none runs."""
        task = self._tasks.pop(key, None)
        if task is not None and task is not asyncio.current_task():
            task.cancel()

    def armed_keys(self) -> list[Hashable]:
        """The keys whose timer is still waiting or running."""
        return [k for k, t in self._tasks.items() if not t.done()]

    @property
    def armed(self) -> int:
        """How many timers are running."""
        return len(self.armed_keys())

    async def _run(self, key: Hashable, deadline: dt.datetime, on_due: OnDue) -> None:
        try:
            await self.clock.sleep_until(deadline)
            await on_due()
        except asyncio.CancelledError:
            raise
        except Exception:  # the database or the platform failed: the stored deadline still counts
            log.exception("deadline timer %s failed", key)
        finally:
            if self._tasks.get(key) is asyncio.current_task():
                del self._tasks[key]

    async def close(self) -> None:
        """Cancel every timer and wait for them to end."""
        tasks = list(self._tasks.values())
        self._tasks.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
