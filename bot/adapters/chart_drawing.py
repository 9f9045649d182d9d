"""Drawing a chart for a reply or a post without ever costing it (issue 30), for every platform.

The renderers (bot/adapters/charts.py) run in a worker thread; here they are bounded in time and any failure
becomes :class:`ChartUnavailableError` saying why in words for the user: the text a chart goes with is sent
anyway, with :func:`missing_note`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TypeVar

from bot.adapters import charts

log = logging.getLogger(__name__)

#: How long a chart may take to draw before the reply goes without it (matplotlib runs in a thread).
RENDER_TIMEOUT_S = 20.0

_Card = TypeVar("_Card")


class ChartUnavailableError(Exception):
    """A chart could not be drawn or delivered; ``str()`` says why, for the user."""


async def draw(render: Callable[[_Card], charts.Chart], card: _Card) -> charts.Chart:
    """Render ``card`` with ``render`` off the event loop within :data:`RENDER_TIMEOUT_S`, or raise
    ChartUnavailableError (a renderer's bug is logged with its traceback).
    """
    try:
        chart = await asyncio.wait_for(charts.render(render, card), RENDER_TIMEOUT_S)
    except TimeoutError:
        log.error("drawing a chart took over %.0f s: sent without it", RENDER_TIMEOUT_S)
        raise ChartUnavailableError("drawing it took too long") from None
    except Exception as exc:  # a renderer's bug: the reply goes on without the picture
        log.exception("drawing a chart failed: sent without it")
        raise ChartUnavailableError("it could not be drawn") from exc
    if not chart.png:
        raise ChartUnavailableError("it came out empty")
    return chart


def missing_note(why: str) -> str:
    """What a reply says when its chart could not be attached."""
    return f"📉 The chart could not be attached ({why}); the figures are in the text."
