"""A channel's schedule as one sentence people read ("Mon–Fri at 09:00 Europe/Berlin, 5 problems, ..."),
shared by every platform's replies instead of a dataclass repr.
"""

from __future__ import annotations

from bot.core.schedule import Schedule, ScheduleConfig

_DAY = {1: "Mon", 2: "Tue", 3: "Wed", 4: "Thu", 5: "Fri", 6: "Sat", 7: "Sun"}
_FULL = {1: "Monday", 2: "Tuesday", 3: "Wednesday", 4: "Thursday", 5: "Friday", 6: "Saturday", 7: "Sunday"}


def days_phrase(days: tuple[int, ...]) -> str:
    """ISO weekdays as read: ``Every day``, ``Mon–Fri``, ``Sat–Sun``, ``Mon, Wed, Fri``, ``Mon–Wed, Fri``."""
    chosen = sorted(set(days))
    if chosen == list(range(1, 8)):
        return "Every day"
    runs: list[list[int]] = []
    for d in chosen:
        if runs and d == runs[-1][-1] + 1:
            runs[-1].append(d)
        else:
            runs.append([d])
    parts = []
    for run in runs:
        if len(run) >= 3 or (len(run) == 2 and run == [6, 7]):
            parts.append(f"{_DAY[run[0]]}–{_DAY[run[-1]]}")
        else:
            parts.extend(_DAY[d] for d in run)
    return ", ".join(parts)


def duration_phrase(minutes: int) -> str:
    """``90`` -> ``1 h 30 min``; ``1440`` -> ``1 day``; ``45`` -> ``45 min``."""
    days, rest = divmod(minutes, 24 * 60)
    hours, mins = divmod(rest, 60)
    parts = []
    if days:
        parts.append(f"{days} day{'s' if days > 1 else ''}")
    if hours:
        parts.append(f"{hours} h")
    if mins or not parts:
        parts.append(f"{mins} min")
    return " ".join(parts)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def describe_schedule(schedule: Schedule | ScheduleConfig) -> str:
    """One sentence for a schedule, e.g. ``Mon–Fri at 09:00 Europe/Berlin, 5 problems, 120 s each,
    2 attempts, open 8 h, reminder 1 h before closing, weekly summary on Mondays``; ``(paused)`` at the end
    of a paused one. Unset limits are left out (the defaults of the deployment apply).
    """
    c = schedule.config if isinstance(schedule, Schedule) else schedule
    parts = [
        f"{days_phrase(c.days)} at {c.hour:02d}:{c.minute:02d} {c.timezone}",
        _plural(c.problems, "problem"),
    ]
    if c.time_limit_s is not None:
        parts.append(f"{c.time_limit_s} s each")
    if c.attempts is not None:
        parts.append(_plural(c.attempts, "attempt"))
    if c.window_minutes is None:
        parts.append("open until the next post")
    else:
        parts.append(f"open {duration_phrase(c.window_minutes)}")
    if c.reminder_minutes is not None:
        parts.append(f"reminder {duration_phrase(c.reminder_minutes)} before closing")
    if c.summary_day is not None:
        report = " with the team report" if c.team_report else ""
        parts.append(f"weekly summary{report} on {_FULL[c.summary_day]}s")
    text = ", ".join(parts)
    return f"{text} (paused)" if c.paused else text


def meanwhile_text(schedule: Schedule) -> str:
    """What another admin changed while this command saved (empty when nobody did), as one sentence."""
    if not schedule.changed_meanwhile:
        return ""
    return (
        "Another admin changed this schedule at the same time ("
        + "; ".join(schedule.changed_meanwhile)
        + "): your change was applied on top of theirs."
    )
