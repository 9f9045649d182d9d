"""Bounded, fair fan-out of scheduled posts: 1,500 channels due in the same minute must neither exhaust the
database pool nor run into the platforms' rate limits, and one tenant with many channels must not make the
others wait behind all of its posts.

A scheduled post job (bot/scheduling.py) takes, in this order, before its body runs:

1. a slot of its platform (:class:`FairSlots`): at most ``concurrency`` posts of that platform are under
   way at once, and the next free slot goes to the tenants waiting round-robin (not first come, first
   served), so a server with 500 channels cannot push a 3-channel server to the end of the minute;
2. a request token of its platform (:class:`TokenBucket`): the posts start no faster than the platform
   accepts requests;
3. a database slot (one :class:`FairSlots` shared by every platform, ``db_slots`` wide): a job body holds
   one pooled connection at a time (units of work never nest in one task), so with ``db_slots`` below the
   pool's size the jobs wait here, without a time limit, instead of timing out on the pool's checkout, and
   the pool keeps connections free for the players' clicks.

The outbox row stays the claim (bot/core/outbox.py): the gate only decides when a job runs, never whether.

The rates assumed (a setting each, RANKZERO_POST_*, whose defaults bot/config.py holds; the sources,
read November 2026):

- Discord: "All bots can make up to 50 requests per second to our API" (the global limit,
  https://discord.com/developers/docs/topics/rate-limits#global-rate-limit); the per-route bucket of
  ``POST /channels/{id}/messages`` is per channel, so one daily post per channel never meets it. Default:
  40 requests/s (headroom for the interactions served meanwhile), burst 10.
- Slack: chat.postMessage is of the "special" tier, "one message per second per channel, while also
  maintaining a workspace-wide limit" (https://api.slack.com/docs/rate-limits). Each workspace is its
  own tenant, so the app-wide rate is not what binds; one post per channel is within the per-channel rate.
  Default: 20 requests/s, burst 10, a conservative stand-in for the undocumented workspace-wide limits.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field


@dataclass(frozen=True)
class PlatformBudget:
    """How many posts of one platform run at once, and how fast they may start (requests per second,
    ``burst`` at most at once after a quiet spell; ``rate_per_s`` None: no rate bound).
    """

    concurrency: int
    rate_per_s: float | None
    burst: int = 10


#: A platform without a budget of its own (the console, tests): bounded, with no rate.
FALLBACK_BUDGET = PlatformBudget(concurrency=8, rate_per_s=None)


def db_slots_for(pool_limit: int, reserve: int) -> int:
    """The database slots for a pool of ``pool_limit`` connections (size + overflow): what is left after
    ``reserve``, at least one.
    """
    return max(1, pool_limit - reserve)


class FairSlots:
    """``capacity`` slots; waiters are served round-robin by key (a tenant), each key's own in order.

    Waiting has no time limit (the point: a post waits here, not on the pool's checkout). A waiter
    cancelled after it was handed a slot gives the slot on, so no slot leaks.
    """

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("a gate needs at least one slot")
        self.capacity = capacity
        self._free = capacity
        self._queues: OrderedDict[str, deque[asyncio.Future[None]]] = OrderedDict()
        #: The most slots ever held at once (tests and the benchmark read it).
        self.peak = 0

    @property
    def in_use(self) -> int:
        """Slots held now."""
        return self.capacity - self._free

    @property
    def waiting(self) -> int:
        """Waiters now."""
        return sum(len(q) for q in self._queues.values())

    def _take(self) -> None:
        self._free -= 1
        self.peak = max(self.peak, self.in_use)

    async def acquire(self, key: str) -> None:
        """Take a slot, waiting for one (in ``key``'s turn) when none is free."""
        if self._free > 0 and not self._queues:
            self._take()
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queues.setdefault(key, deque()).append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release()  # handed a slot just as it was cancelled: pass it on
            else:
                queue = self._queues.get(key)
                if queue is not None and waiter in queue:
                    queue.remove(waiter)
                    if not queue:
                        del self._queues[key]
            raise

    def release(self) -> None:
        """Give a slot back: to the next key in turn when someone waits."""
        while self._queues:
            key, queue = next(iter(self._queues.items()))
            waiter = queue.popleft()
            if queue:
                self._queues.move_to_end(key)  # this key's next waiter goes after the other keys'
            else:
                del self._queues[key]
            if not waiter.done():
                self.peak = max(self.peak, self.in_use)
                waiter.set_result(None)  # the slot moves to it: ``_free`` unchanged
                return
        self._free += 1


@dataclass
class TokenBucket:
    """Requests at ``rate_per_s`` on average, ``burst`` at most at once. ``now`` and ``sleep`` are the
    event loop's time and asyncio.sleep unless given (tests give a simulated pair).
    """

    rate_per_s: float
    burst: int
    now: Callable[[], float] = time.monotonic
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    _tokens: float = field(init=False)
    _stamp: float = field(init=False)
    _lock: asyncio.Lock = field(init=False, default_factory=asyncio.Lock)

    def __post_init__(self) -> None:
        if self.rate_per_s <= 0 or self.burst < 1:
            raise ValueError("a token bucket needs a positive rate and a burst of at least one")
        self._tokens = float(self.burst)
        self._stamp = self.now()

    async def take(self) -> None:
        """Wait until a request may start (in arrival order: the lock queues the takers)."""
        async with self._lock:
            while True:
                now = self.now()
                self._tokens = min(float(self.burst), self._tokens + (now - self._stamp) * self.rate_per_s)
                self._stamp = now
                # A tolerance: after sleeping exactly the missing share, rounding can leave 0.999...; a
                # wait for the last 1e-17 of a token would not move the clock (a busy loop).
                if self._tokens >= 1.0 - 1e-9:
                    self._tokens = max(self._tokens - 1.0, 0.0)
                    return
                await self.sleep(max((1.0 - self._tokens) / self.rate_per_s, 1e-6))


class FanoutGate:
    """The slots and rates of the scheduled posts of every platform (see the module doc)."""

    def __init__(
        self,
        db_slots: int,
        budgets: dict[str, PlatformBudget],
        *,
        now: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        """``db_slots``: post jobs in their database-using body at once (:func:`db_slots_for` the pool)."""
        self.budgets = dict(budgets)
        self.db = FairSlots(db_slots)
        self._slots: dict[str, FairSlots] = {}
        self._buckets: dict[str, TokenBucket | None] = {}
        self._now = now
        self._sleep = sleep
        #: Seconds jobs spent waiting at this gate, all together, and how many went through it.
        self.waited_s = 0.0
        self.passed = 0

    def slots(self, platform: str) -> FairSlots:
        """The platform's slots (made on first use)."""
        if platform not in self._slots:
            budget = self.budgets.get(platform, FALLBACK_BUDGET)
            self._slots[platform] = FairSlots(budget.concurrency)
            self._buckets[platform] = (
                TokenBucket(budget.rate_per_s, budget.burst, self._now, self._sleep)
                if budget.rate_per_s is not None
                else None
            )
        return self._slots[platform]

    @asynccontextmanager
    async def slot(self, platform: str, tenant: str) -> AsyncIterator[None]:
        """Hold a platform slot, a started request and a database slot while the body runs."""
        began = self._now()
        slots = self.slots(platform)
        await slots.acquire(tenant)
        try:
            bucket = self._buckets[platform]
            if bucket is not None:
                await bucket.take()
            await self.db.acquire(tenant)
            try:
                self.waited_s += self._now() - began
                self.passed += 1
                yield
            finally:
                self.db.release()
        finally:
            slots.release()
