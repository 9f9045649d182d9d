"""A channel's schedule as one plain sentence for people ("Mon–Fri at 09:00 Europe/Berlin, 5 problems, …").

Platform-neutral: no markup, so every adapter can show it as is (escaped for its own format).
"""

from __future__ import annotations

from bot.core.schedule import Schedule, ScheduleConfig

_DAY = {1: "Mon", 2: "Tue", 3: "Wed", 4: "Thu", 5: "Fri", 6: "Sat", 7: "Sun"}
_PLURAL_DAY = {
    1: "Mondays",
    2: "Tuesdays",
    3: "Wednesdays",
    4: "Thursdays",
    5: "Fridays",
    6: "Saturdays",
    7: "Sundays",
}


def describe_days(days: tuple[int, ...]) -> str:
    """ISO weekdays as people write them: 'every day', 'Mon–Fri', 'Mon, Wed, Fri', 'Mon–Wed, Sat'."""
    ordered = sorted(set(days))
    if ordered == list(range(1, 8)):
        return "every day"
    runs: list[list[int]] = []
    for day in ordered:
        if runs and day == runs[-1][-1] + 1:
            runs[-1].append(day)
        else:
            runs.append([day])
    parts: list[str] = []
    for run in runs:
        if len(run) >= 3:
            parts.append(f"{_DAY[run[0]]}–{_DAY[run[-1]]}")
        else:
            parts.extend(_DAY[d] for d in run)
    return ", ".join(parts)


def describe_minutes(minutes: int) -> str:
    """A duration: '45 min', '8 h', '1 h 30 min', '2 days', '1 day 4 h'."""
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


def describe_schedule(schedule: Schedule | ScheduleConfig) -> str:
    """One sentence for a schedule (or its config), e.g. 'Mon–Fri at 09:00 Europe/Berlin, 5 problems,
    open until the next post, a reminder 30 min before closing, weekly summary on Mondays'.
    """
    cfg = schedule.config if isinstance(schedule, Schedule) else schedule
    parts = [
        f"{describe_days(cfg.days)} at {cfg.hour:02d}:{cfg.minute:02d} {cfg.timezone}",
        f"{cfg.problems} problem{'s' if cfg.problems != 1 else ''}",
    ]
    if cfg.time_limit_s is not None:
        parts.append(f"{cfg.time_limit_s} s per problem")
    if cfg.attempts is not None:
        parts.append(f"{cfg.attempts} attempt{'s' if cfg.attempts != 1 else ''}")
    if cfg.window_minutes is None:
        parts.append("open until the next post")
    else:
        parts.append(f"open for {describe_minutes(cfg.window_minutes)}")
    if cfg.reminder_minutes:
        parts.append(f"a reminder {describe_minutes(cfg.reminder_minutes)} before closing")
    else:
        parts.append("no reminder")
    if cfg.summary_day is not None:
        parts.append(f"weekly summary on {_PLURAL_DAY[cfg.summary_day]}")
    sentence = ", ".join(parts)
    return f"Paused ({sentence})" if cfg.paused else sentence
