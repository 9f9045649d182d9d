"""describe_schedule: a schedule as the sentence every platform shows (a table of cases)."""

from __future__ import annotations

import pytest

from bot.core.schedule import ScheduleConfig
from bot.core.schedule_text import describe_schedule

CASES: list[tuple[ScheduleConfig, str]] = [
    (
        ScheduleConfig(9, 0, "Europe/Berlin", days=(1, 2, 3, 4, 5)),
        "Mon–Fri at 09:00 Europe/Berlin, 5 problems, open until the next post",
    ),
    (
        ScheduleConfig(
            7, 5, "UTC", problems=1, time_limit_s=90, attempts=1, window_minutes=90, reminder_minutes=30
        ),
        "Every day at 07:05 UTC, 1 problem, 90 s each, 1 attempt, open 1 h 30 min,"
        " reminder 30 min before closing",
    ),
    (
        ScheduleConfig(18, 30, "America/New_York", days=(1, 3, 5), attempts=3, window_minutes=1440),
        "Mon, Wed, Fri at 18:30 America/New_York, 5 problems, 3 attempts, open 1 day",
    ),
    (
        ScheduleConfig(12, 0, "Asia/Tokyo", days=(6, 7), summary_day=1, paused=True),
        "Sat–Sun at 12:00 Asia/Tokyo, 5 problems, open until the next post,"
        " weekly summary on Mondays (paused)",
    ),
    (
        ScheduleConfig(8, 0, "UTC", days=(1, 2, 3, 5), window_minutes=2 * 1440 + 60),
        "Mon–Wed, Fri at 08:00 UTC, 5 problems, open 2 days 1 h",
    ),
    (
        ScheduleConfig(8, 0, "UTC", days=(1, 2)),
        "Mon, Tue at 08:00 UTC, 5 problems, open until the next post",
    ),
]


@pytest.mark.parametrize(("config", "sentence"), CASES)
def test_describe_schedule(config: ScheduleConfig, sentence: str) -> None:
    assert describe_schedule(config.validate()) == sentence
    assert "ScheduleConfig" not in describe_schedule(config)
