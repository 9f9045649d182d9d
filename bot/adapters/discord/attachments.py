"""Charts as Discord attachments (issue 30): the PNG, its alt text, and Discord's limits on both.

Discord's limits (the API's Message resource, "Attachment Object" / "Uploading Files"; what the fake in
tests/discord_fake.py enforces):

- a message carries at most 10 attachments, sent as multipart/form-data: the JSON body in ``payload_json``,
  file ``n`` in the part ``files[n]`` with its filename, described in ``attachments[n]`` of the payload;
- an attachment's ``description`` is its alt text, at most 1024 characters;
- a request over the upload limit is refused with HTTP 413, code 40005 "Request entity too large"
  (discord/discord-api-docs#6058). The limit for a bot without boosts was raised to 25 MiB in 2023 and
  lowered to 10 MiB in 2024; 10 MiB is what every server accepts, so that is the bound used here.

A chart is a few tens of kilobytes: the bounds are checked anyway, so a renderer that goes wrong costs the
picture, never the reply it goes with.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from typing import TypeVar

import discord

from bot.adapters import charts
from bot.adapters.chart_drawing import ChartUnavailableError, draw

#: Discord's documented limits (see the module docstring).
MAX_UPLOAD_BYTES = 10 * 1024 * 1024
MAX_DESCRIPTION = 1024
#: What a file name may hold: Discord serves attachments under their names, so keep them plain.
_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9_.-]")

_Card = TypeVar("_Card")


#: Discord's error code for a missing permission (403): a message with files needs Attach Files.
MISSING_PERMISSIONS = 50013
#: Why a chart was not attached when the channel refused the file (the words for the note).
NEEDS_ATTACH_FILES = "the bot needs the Attach Files permission in this channel"


def safe_filename(name: str) -> str:
    """``name`` reduced to letters, digits, ``_.-``, ending in ``.png`` (the renderers' names already are)."""
    stem = _UNSAFE_NAME.sub("_", name.removesuffix(".png"))[:60].strip("._") or "chart"
    return f"{stem}.png"


def chart_file(chart: charts.Chart) -> discord.File:
    """The chart as a discord.py File with its alt text as the attachment's description (cut to 1024).

    Raises ChartUnavailableError when the PNG is empty or over the upload limit.
    """
    if len(chart.png) > MAX_UPLOAD_BYTES:
        raise ChartUnavailableError(
            f"the chart is {len(chart.png)} bytes, over Discord's {MAX_UPLOAD_BYTES} byte limit"
        )
    alt = chart.alt_text.strip() or "A chart (no description was given)."
    if len(alt) > MAX_DESCRIPTION:
        alt = alt[: MAX_DESCRIPTION - 1] + "…"
    return discord.File(io.BytesIO(chart.png), filename=safe_filename(chart.filename), description=alt)


async def drawn_file(
    render: Callable[[_Card], charts.Chart], card: _Card
) -> tuple[discord.File | None, str | None]:
    """(the chart's File, None), or (None, why it is missing) when it cannot be drawn or attached."""
    try:
        return chart_file(await draw(render, card)), None
    except ChartUnavailableError as exc:
        return None, str(exc)
