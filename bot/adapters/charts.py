"""Charts as PNG images for every platform (issue 30): a player's stats picture and a team's weekly heatmap.

Rendered server-side with matplotlib's Agg backend (no display), off the event loop (:func:`render`), in a
colour-blind-safe palette; every chart carries the alt text the platforms show in its place.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from bot.core.cards import StatsCard, TeamReportCard

_Card = TypeVar("_Card")


@dataclass(frozen=True)
class Chart:
    """A rendered chart: PNG bytes, the alt text that describes it, and the file name to attach it as."""

    png: bytes
    alt_text: str
    filename: str


def player_chart(card: StatsCard) -> Chart:
    """The player's picture: points over the last 30 days, accuracy by topic, the streak calendar."""
    raise NotImplementedError("the renderer lands with issue 30")


def team_heatmap(card: TeamReportCard) -> Chart:
    """The team report's heatmap: first-attempt accuracy by topic x difficulty."""
    raise NotImplementedError("the renderer lands with issue 30")


async def render(draw: Callable[[_Card], Chart], card: _Card) -> Chart:
    """Render ``card`` with ``draw`` in a worker thread: matplotlib is CPU-bound; the loop must not stall."""
    return await asyncio.to_thread(draw, card)
