"""Standings keys as typed values (bot/core/standings.py): the stored strings, the ISO week at a year's
edge, and which key a leaderboard's scope and period pick."""

from __future__ import annotations

import datetime as dt

import pytest

from bot.core.models import ChannelRef
from bot.core.standings import PeriodKey, ScopeKey, standing_keys
from bot.core.vocabulary import Period, Scope

CHANNEL = ChannelRef("discord", "123", "general", "general", "UTC")


def test_a_solved_problem_counts_towards_both_scopes_over_three_periods_stored_as_before() -> None:
    keys = standing_keys(12, CHANNEL, dt.date(2026, 1, 14))
    assert [s.key for s in keys.scopes] == ["ch:12", "ws:discord:123"]
    assert [p.key for p in keys.periods] == ["all", "d:2026-01-14", "w:2026-W03"]
    assert keys.pairs() == [
        (s, p) for s in ("ch:12", "ws:discord:123") for p in ("all", "d:2026-01-14", "w:2026-W03")
    ]


@pytest.mark.parametrize(
    ("day", "week"),
    [
        (dt.date(2027, 1, 1), "2026-W53"),  # a Friday: still the last ISO week of 2026
        (dt.date(2024, 12, 30), "2025-W01"),  # a Monday: already the first ISO week of 2025
        (dt.date(2026, 3, 2), "2026-W10"),
    ],
)
def test_the_week_key_is_the_iso_week_even_across_a_year_edge(day: dt.date, week: str) -> None:
    assert PeriodKey.week(day).label == week
    assert PeriodKey.week(day).key == f"w:{week}"


def test_a_leaderboard_picks_its_keys_by_name_not_by_position() -> None:
    day = dt.date(2026, 1, 14)
    assert PeriodKey.of(Period.ALL, day) == PeriodKey.all_time()
    assert PeriodKey.of(Period.TODAY, day).key == "d:2026-01-14"
    assert PeriodKey.of(Period.WEEK, day).key == "w:2026-W03"
    assert ScopeKey.of(Scope.CHANNEL, 12, CHANNEL) == ScopeKey(Scope.CHANNEL, "ch:12")
    assert ScopeKey.of(Scope.WORKSPACE, 12, CHANNEL) == ScopeKey(Scope.WORKSPACE, "ws:discord:123")
    # The plain strings chat commands carry pick the same keys (Scope and Period are StrEnums).
    assert ScopeKey.of(Scope("workspace"), 12, CHANNEL).key == "ws:discord:123"
