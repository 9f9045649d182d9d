"""What the Discord adapter reports to the process's metrics: acknowledgement latency and rate limits.

discord.py's HTTP client takes an aiohttp TraceConfig (``http_trace``): every REST call it makes ends in
:meth:`InteractionClock.on_request_end`, which counts each 429 (discord.py waits the ``retry_after`` and
retries it) by route template, and times each interaction callback (the acknowledgement: a defer, a reply,
a modal) from the moment the interaction arrived on the gateway (:meth:`InteractionClock.received`,
called by the client's ``dispatch``).
"""

from __future__ import annotations

import re
import time
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

import aiohttp

from bot.metrics import route_template

if TYPE_CHECKING:
    from bot.metrics import BotMetrics

PLATFORM = "discord"
_CALLBACK = re.compile(r"/interactions/(\d{1,20})/[^/]+/callback$")
#: Interactions remembered while not acknowledged: older ones are forgotten first (an interaction never
#: acknowledged must not grow the table; Discord forgets it after 3 s anyway).
MAX_PENDING = 10_000


class InteractionClock:
    """Arrival times of the interactions not acknowledged yet, and the trace that reports to the metrics.

    ``metrics`` is set when the adapter is attached to the services (None before: nothing is reported).
    """

    def __init__(self) -> None:
        self.metrics: BotMetrics | None = None
        self._pending: OrderedDict[int, float] = OrderedDict()

    def received(self, interaction_id: int) -> None:
        """An interaction arrived now (monotonic clock)."""
        self._pending[interaction_id] = time.monotonic()
        while len(self._pending) > MAX_PENDING:
            self._pending.popitem(last=False)

    def trace_config(self) -> aiohttp.TraceConfig:
        """The TraceConfig to give discord.py's client (``http_trace``)."""
        config = aiohttp.TraceConfig()
        config.on_request_end.append(self.on_request_end)
        return config

    async def on_request_end(
        self, _session: aiohttp.ClientSession, _context: Any, params: aiohttp.TraceRequestEndParams
    ) -> None:
        """Count a 429; time an accepted interaction callback."""
        metrics = self.metrics
        if metrics is None:
            return
        status = params.response.status
        path = params.url.path
        if status == 429:
            metrics.rate_limited(PLATFORM, route_template(params.method, path))
            return
        found = _CALLBACK.search(path)
        if found and 200 <= status < 300:
            arrived = self._pending.pop(int(found[1]), None)
            if arrived is not None:
                metrics.acknowledged(PLATFORM, time.monotonic() - arrived)
