"""Calendar helpers every use case shares: IANA timezones and the local day of an instant.

Pure functions over ``zoneinfo``; the schedule arithmetic (bot/core/schedule.py), the quiz service and
the standings keys build on them, so none of those has to import another use case to tell the date.
"""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from bot.core.errors import ConfigurationError


def zone(name: str) -> ZoneInfo:
    """The IANA timezone ``name``, or a ConfigurationError that says how to fix it."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigurationError(
            f"unknown timezone {name!r}: use an IANA name such as 'Europe/Berlin' or 'America/New_York'"
        ) from None


def local_day(now: dt.datetime, tz: str) -> dt.date:
    """The calendar date of ``now`` in timezone ``tz``."""
    return now.astimezone(zone(tz)).date()


def iso_week(day: dt.date) -> str:
    """The ISO week a day belongs to, as ``2026-W03`` (weeks start on Monday)."""
    year, week, _ = day.isocalendar()
    return f"{year}-W{week:02d}"
