"""The player's own day (issue 28): their IANA timezone and a day cutoff, as Anki's "next day starts at"
(4 am by default), so a review at 1 am still counts for the evening before.

Due cards, the practice streak, the new-cards-per-day limit and the daily nudge all use it: a card due
"today" is due before the player's next cutoff, not before midnight UTC.
"""

from __future__ import annotations

import datetime as dt
import difflib
import functools
import zoneinfo
from collections.abc import Iterable
from dataclasses import dataclass

from bot.core.errors import RankZeroError

#: Anki's default "next day starts at": reviews before 4 am belong to the day before.
DAY_CUTOFF_HOUR = 4
#: The longest timezone name stored (IANA names are at most ~32 characters).
MAX_TIMEZONE = 64


class InvalidTimezoneError(RankZeroError):
    """A timezone name that is not an IANA zone."""


# Names in the tz database that are not places: "localtime" would make a player's day follow the bot
# server's /etc/localtime, the others are build artefacts.
_NOT_ZONES = frozenset({"localtime", "Factory", "posixrules", "posix", "right"})


@functools.cache
def _zones() -> frozenset[str]:
    return frozenset(
        z
        for z in zoneinfo.available_timezones()
        if z not in _NOT_ZONES and not z.startswith(("posix/", "right/"))
    )


def platform_timezone(name: object) -> str | None:
    """A timezone a platform reported (Slack's ``user.tz``) if it is an IANA zone we know, else None: the
    value comes from outside, so it is bounded and checked before it is offered or stored.
    """
    if not isinstance(name, str) or not name or len(name) > MAX_TIMEZONE:
        return None
    return name if name in _zones() else None


def zone_choices(typed: str, limit: int = 25) -> list[str]:
    """IANA zone names for an autocomplete of ``typed`` (Discord allows 25 choices): names starting with
    it (or with it after a "Region/"), then names containing it, each group sorted; case-insensitive.
    """
    text = typed.strip()[:MAX_TIMEZONE].casefold().replace(" ", "_")
    names = sorted(_zones())
    if not text:
        # Nothing typed yet: the common region-less choice first, then the alphabet.
        return (["UTC"] + [n for n in names if n != "UTC"])[:limit]
    folded = [(n, n.casefold()) for n in names]
    starts = [n for n, f in folded if f.startswith(text) or f.rsplit("/", 1)[-1].startswith(text)]
    seen = set(starts)
    contains = [n for n, f in folded if n not in seen and text in f]
    return (starts + contains)[:limit]


def parse_timezone(name: str) -> str:
    """An IANA timezone name (``Europe/Paris``, ``America/New_York``, ``UTC``), validated; raises
    :class:`InvalidTimezoneError` saying what was wrong and the closest names.
    """
    cleaned = name.strip()
    if not cleaned:
        raise InvalidTimezoneError("give a timezone such as Europe/Paris, America/New_York or UTC")
    shown = cleaned[:MAX_TIMEZONE]
    if len(cleaned) > MAX_TIMEZONE or cleaned not in _zones():
        exact = {z.casefold(): z for z in _zones()}.get(cleaned.casefold())
        if exact is not None:
            return exact  # "europe/paris": the zone meant, spelt as IANA does
        close = difflib.get_close_matches(shown, sorted(_zones()), n=3, cutoff=0.6)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise InvalidTimezoneError(
            f"{shown!r} is not an IANA timezone: use a name like Europe/Paris, America/New_York, "
            f"Asia/Kolkata or UTC (the 'TZ identifier' column of the tz database).{hint}"
        )
    return cleaned


@dataclass(frozen=True)
class PlayerDay:
    """One day of a player's: its date and when it starts and ends (UTC), cutoff to cutoff."""

    day: dt.date
    start: dt.datetime
    end: dt.datetime


def _at_cutoff(day: dt.date, zone: dt.tzinfo, cutoff_hour: int) -> dt.datetime:
    return dt.datetime.combine(day, dt.time(cutoff_hour), zone).astimezone(dt.UTC)


def player_day(now: dt.datetime, timezone: str | None, cutoff_hour: int = DAY_CUTOFF_HOUR) -> PlayerDay:
    """The player's day that ``now`` falls in (``timezone`` None: UTC)."""
    zone: dt.tzinfo = zoneinfo.ZoneInfo(timezone) if timezone else dt.UTC
    local = now.astimezone(zone)
    day = (local - dt.timedelta(hours=cutoff_hour)).date()
    return PlayerDay(
        day, _at_cutoff(day, zone, cutoff_hour), _at_cutoff(day + dt.timedelta(days=1), zone, cutoff_hour)
    )


def day_streak(
    times: Iterable[dt.datetime], now: dt.datetime, timezone: str | None, cutoff_hour: int = DAY_CUTOFF_HOUR
) -> int:
    """Consecutive player days with at least one of ``times``, ending today (or yesterday, when today
    has none yet: a streak is not lost before the day is over).
    """
    days = {player_day(t, timezone, cutoff_hour).day for t in times}
    today = player_day(now, timezone, cutoff_hour).day
    day = today if today in days else today - dt.timedelta(days=1)
    streak = 0
    while day in days:
        streak += 1
        day -= dt.timedelta(days=1)
    return streak
