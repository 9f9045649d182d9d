"""Channel schedules as values, their validation, and the calendar arithmetic of posting slots.

A schedule posts at a local wall-clock time (``09:00``) in an IANA timezone on some ISO weekdays; every
instant here is computed through ``zoneinfo`` so 09:00 Europe/Berlin stays 09:00 local on both sides of a
DST change. Pure functions only: the scheduler (bot/scheduling.py) and the service build on them.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, replace

from bot.core.calendar import zone
from bot.core.errors import ConfigurationError
from bot.core.models import ChannelRef

#: ISO weekday (Monday=1) of each day name, as APScheduler's cron ``day_of_week`` also spells them.
WEEKDAYS: dict[str, int] = {"mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6, "sun": 7}
DAY_NAMES: dict[int, str] = {v: k for k, v in WEEKDAYS.items()}
_DAY_ALIASES: dict[str, tuple[int, ...]] = {
    "daily": (1, 2, 3, 4, 5, 6, 7),
    "all": (1, 2, 3, 4, 5, 6, 7),
    "weekdays": (1, 2, 3, 4, 5),
    "weekends": (6, 7),
}
_OFF = ("", "off", "none", "no")
MAX_PROBLEMS = 10
#: Limits that keep a schedule playable (and the stored values inside the table's check constraints).
TIME_LIMIT_RANGE = (10, 3600)
ATTEMPTS_RANGE = (1, 5)
WINDOW_MAX_MIN = 7 * 24 * 60


@dataclass(frozen=True)
class ScheduleConfig:
    """What an admin sets for a channel. ``window_minutes=None``: the window lasts until the next post."""

    hour: int
    minute: int
    timezone: str
    days: tuple[int, ...] = (1, 2, 3, 4, 5, 6, 7)
    problems: int = 5
    time_limit_s: int | None = None
    attempts: int | None = None
    window_minutes: int | None = None
    reminder_minutes: int | None = None
    summary_day: int | None = None
    paused: bool = False
    #: The weekly team report (issue 30), posted with the weekly summary: opt-in, off by default.
    team_report: bool = False

    def validate(self) -> ScheduleConfig:
        """Return self, or raise ConfigurationError naming the bad field and how to fix it."""
        zone(self.timezone)
        if not (0 <= self.hour <= 23 and 0 <= self.minute <= 59):
            raise ConfigurationError(
                f"post time {self.hour:02d}:{self.minute:02d} is not a time of day: use HH:MM, 00:00 to 23:59"
            )
        if not self.days:
            raise ConfigurationError("days is empty: give at least one day, e.g. 'mon-fri' or 'daily'")
        if any(d not in DAY_NAMES for d in self.days):
            raise ConfigurationError(f"days {self.days} must be ISO weekdays 1 (Monday) to 7 (Sunday)")
        if not 1 <= self.problems <= MAX_PROBLEMS:
            raise ConfigurationError(
                f"problems per challenge is {self.problems}: use 1 to {MAX_PROBLEMS} (default 5)"
            )
        lo, hi = TIME_LIMIT_RANGE
        if self.time_limit_s is not None and not lo <= self.time_limit_s <= hi:
            raise ConfigurationError(f"time limit {self.time_limit_s} s: use {lo} to {hi} seconds")
        lo, hi = ATTEMPTS_RANGE
        if self.attempts is not None and not lo <= self.attempts <= hi:
            raise ConfigurationError(f"attempts {self.attempts}: use {lo} to {hi}")
        if self.window_minutes is not None and not 1 <= self.window_minutes <= WINDOW_MAX_MIN:
            raise ConfigurationError(
                f"window {self.window_minutes} min: use 1 minute to 7 days, or 'next' (until the next post)"
            )
        if self.reminder_minutes is not None:
            if self.reminder_minutes < 1:
                raise ConfigurationError("reminder must be at least 1 minute before closing, or 'off'")
            if self.window_minutes is not None and self.reminder_minutes >= self.window_minutes:
                raise ConfigurationError(
                    f"reminder {self.reminder_minutes} min before closing does not fit in a "
                    f"{self.window_minutes} min window: make it shorter than the window"
                )
        if self.summary_day is not None and self.summary_day not in DAY_NAMES:
            raise ConfigurationError("weekly summary day must be a day name such as 'mon', or 'off'")
        if self.team_report and self.summary_day is None:
            raise ConfigurationError(
                "the team report is posted with the weekly summary: set its day too (--weekly-summary mon), "
                "or turn the report off (--team-report off)"
            )
        return self


@dataclass(frozen=True)
class Schedule:
    """A stored schedule of a channel."""

    channel_pk: int
    channel: ChannelRef
    config: ScheduleConfig
    updated_at: dt.datetime
    #: Bumped by every save (optimistic concurrency: a save names the version it read).
    version: int = 1
    #: After a save: what another admin changed between this command's read and its write (applied
    #: first; this command's own change went on top), e.g. ``("paused", "time 09:00 -> 10:00")``.
    changed_meanwhile: tuple[str, ...] = ()


# ---------------------------------------------------------------------- parsing admin input
def parse_time(text: str) -> tuple[int, int]:
    """``"09:00"`` -> (9, 0); anything else (``"25:00"``, ``"9am"``) is a ConfigurationError."""
    m = re.fullmatch(r"\s*(\d{1,2}):(\d{2})\s*", text)
    if m is None:
        raise ConfigurationError(f"post time {text!r} is not HH:MM (24-hour clock), e.g. '09:00'")
    hour, minute = int(m.group(1)), int(m.group(2))
    if hour > 23 or minute > 59:
        raise ConfigurationError(f"post time {text!r} is not a time of day: use 00:00 to 23:59")
    return hour, minute


def parse_days(text: str) -> tuple[int, ...]:
    """``"mon-fri"``, ``"mon,wed,fri"``, ``"daily"``, ``"weekdays"``, ``"weekends"`` -> ISO weekdays."""
    key = text.strip().lower()
    if key in _DAY_ALIASES:
        return _DAY_ALIASES[key]
    days: set[int] = set()
    for part in filter(None, (p.strip() for p in key.split(","))):
        ends = [e.strip()[:3] for e in part.split("-")]
        if len(ends) > 2 or any(e not in WEEKDAYS for e in ends):
            raise ConfigurationError(
                f"days {text!r}: {part!r} is not a day or range; use names like 'mon-fri' or 'mon,wed,fri'"
            )
        first, last = WEEKDAYS[ends[0]], WEEKDAYS[ends[-1]]
        span = range(first, last + 1) if first <= last else [*range(first, 8), *range(1, last + 1)]
        days.update(span)
    if not days:
        raise ConfigurationError("days is empty: give at least one day, e.g. 'mon-fri' or 'daily'")
    return tuple(sorted(days))


def parse_minutes(text: str | int | None, what: str, *, off_words: tuple[str, ...] = _OFF) -> int | None:
    """``"90"``, ``"90m"``, ``"2h"``, ``"1h30m"`` -> minutes; an off word -> None."""
    if text is None or isinstance(text, int):
        return text
    key = text.strip().lower()
    if key in off_words:
        return None
    m = re.fullmatch(r"(?:(\d+)\s*h)?\s*(?:(\d+)\s*m?)?", key)
    if not key or m is None or (m.group(1) is None and m.group(2) is None):
        raise ConfigurationError(f"{what} {text!r}: use minutes ('90', '90m') or hours ('2h', '1h30m')")
    return int(m.group(1) or 0) * 60 + int(m.group(2) or 0)


def parse_weekday(text: str) -> int | None:
    """A day name -> ISO weekday; an off word -> None."""
    key = text.strip().lower()
    if key in _OFF:
        return None
    if key[:3] not in WEEKDAYS:
        raise ConfigurationError(f"weekly summary day {text!r}: use a day name such as 'mon', or 'off'")
    return WEEKDAYS[key[:3]]


def parse_switch(text: str, what: str) -> bool:
    """``on``/``yes``/``true`` -> True, ``off``/``no``/``false`` -> False; anything else is refused."""
    key = text.strip().lower()
    if key in ("on", "yes", "true", "1"):
        return True
    if key in ("off", "no", "false", "0"):
        return False
    raise ConfigurationError(f"{what} {text[:40]!r}: use 'on' or 'off'")


def days_text(days: tuple[int, ...]) -> str:
    """ISO weekdays as APScheduler cron and people read them: ``"mon,tue,wed"``."""
    return ",".join(DAY_NAMES[d] for d in sorted(days))


def merge(
    base: ScheduleConfig | None,
    *,
    post_time: str | None = None,
    timezone: str | None = None,
    days: str | None = None,
    problems: int | None = None,
    time_limit_s: int | None = None,
    attempts: int | None = None,
    window: str | None = None,
    reminder: str | None = None,
    weekly_summary: str | None = None,
    team_report: str | None = None,
    default_timezone: str = "UTC",
) -> ScheduleConfig:
    """Apply an admin's changes (None: keep) to a stored config (or the defaults) and validate."""
    if base is None:
        if post_time is None:
            raise ConfigurationError("a new schedule needs a post time, e.g. --time 09:00")
        base = ScheduleConfig(0, 0, default_timezone)
    cfg = base
    if post_time is not None:
        hour, minute = parse_time(post_time)
        cfg = replace(cfg, hour=hour, minute=minute)
    if timezone is not None:
        cfg = replace(cfg, timezone=timezone.strip())
    if days is not None:
        cfg = replace(cfg, days=parse_days(days))
    if problems is not None:
        cfg = replace(cfg, problems=problems)
    if time_limit_s is not None:
        cfg = replace(cfg, time_limit_s=time_limit_s or None)
    if attempts is not None:
        cfg = replace(cfg, attempts=attempts or None)
    if window is not None:
        cfg = replace(cfg, window_minutes=parse_minutes(window, "window", off_words=("next", "", "none")))
    if reminder is not None:
        cfg = replace(cfg, reminder_minutes=parse_minutes(reminder, "reminder"))
    if weekly_summary is not None:
        cfg = replace(cfg, summary_day=parse_weekday(weekly_summary))
    if team_report is not None:
        cfg = replace(cfg, team_report=parse_switch(team_report, "team report"))
    return cfg.validate()


# ---------------------------------------------------------------------- slots
def slot_on(cfg: ScheduleConfig, day: dt.date) -> dt.datetime:
    """The post instant (UTC) on a local date, whatever that day's UTC offset is."""
    local = dt.datetime.combine(day, dt.time(cfg.hour, cfg.minute), tzinfo=zone(cfg.timezone))
    return local.astimezone(dt.UTC)


def previous_slot(cfg: ScheduleConfig, now: dt.datetime) -> dt.datetime | None:
    """The latest post instant at or before ``now`` (None if there was none in the past week)."""
    today = now.astimezone(zone(cfg.timezone)).date()
    for back in range(8):
        day = today - dt.timedelta(days=back)
        if day.isoweekday() in cfg.days and (slot := slot_on(cfg, day)) <= now:
            return slot
    return None


def next_slot(cfg: ScheduleConfig, after: dt.datetime) -> dt.datetime:
    """The earliest post instant strictly after ``after``."""
    today = after.astimezone(zone(cfg.timezone)).date()
    for ahead in range(9):
        day = today + dt.timedelta(days=ahead)
        if day.isoweekday() in cfg.days and (slot := slot_on(cfg, day)) > after:
            return slot
    raise ConfigurationError("the schedule has no posting day")  # validate() makes this unreachable


def window_end(cfg: ScheduleConfig, slot: dt.datetime) -> dt.datetime:
    """When the challenge posted at ``slot`` closes: after the window, or at the next post."""
    if cfg.window_minutes is not None:
        return slot + dt.timedelta(minutes=cfg.window_minutes)
    return next_slot(cfg, slot)


def local_date(cfg: ScheduleConfig, instant: dt.datetime) -> dt.date:
    """The schedule's local calendar date of an instant."""
    return instant.astimezone(zone(cfg.timezone)).date()
