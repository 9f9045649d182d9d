"""Standings keys as typed values: which leaderboard rows a solved problem counts towards.

A standing is one player's total in one *scope* (a channel, or its whole workspace) over one *period*
(all time, one day, one ISO week). Storage keeps each as a short string (``ch:12``, ``ws:discord:123``,
``all``, ``d:2026-01-01``, ``w:2026-W03``); the core builds and reads them only through these values, so
no caller picks a key out of a tuple by position.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from bot.core.calendar import iso_week
from bot.core.models import ChannelRef
from bot.core.vocabulary import Period, Scope


@dataclass(frozen=True, slots=True)
class ScopeKey:
    """Whose players a standing ranks; ``key`` is its stored form."""

    scope: Scope
    key: str

    @classmethod
    def channel(cls, channel_pk: int) -> ScopeKey:
        """One channel's standings."""
        return cls(Scope.CHANNEL, f"ch:{channel_pk}")

    @classmethod
    def workspace(cls, channel: ChannelRef) -> ScopeKey:
        """The standings of the channel's workspace (Discord server / Slack workspace)."""
        return cls(Scope.WORKSPACE, f"ws:{channel.platform}:{channel.workspace_id}")

    @classmethod
    def of(cls, scope: Scope, channel_pk: int, channel: ChannelRef) -> ScopeKey:
        """The ``scope`` standings a channel belongs to."""
        return cls.channel(channel_pk) if scope == Scope.CHANNEL else cls.workspace(channel)


@dataclass(frozen=True, slots=True)
class PeriodKey:
    """The time span a standing covers; ``key`` is its stored form, ``label`` the span alone."""

    period: Period
    label: str

    @property
    def key(self) -> str:
        """``all``, ``d:2026-01-01`` or ``w:2026-W03``."""
        if self.period == Period.ALL:
            return "all"
        return f"{'d' if self.period == Period.TODAY else 'w'}:{self.label}"

    @classmethod
    def all_time(cls) -> PeriodKey:
        """Every day ever."""
        return cls(Period.ALL, "all")

    @classmethod
    def day(cls, day: dt.date) -> PeriodKey:
        """One calendar day (in the channel's timezone)."""
        return cls(Period.TODAY, day.isoformat())

    @classmethod
    def week(cls, day: dt.date) -> PeriodKey:
        """The ISO week ``day`` belongs to."""
        return cls(Period.WEEK, iso_week(day))

    @classmethod
    def of(cls, period: Period, day: dt.date) -> PeriodKey:
        """The ``period`` that contains ``day``."""
        if period == Period.ALL:
            return cls.all_time()
        return cls.day(day) if period == Period.TODAY else cls.week(day)


@dataclass(frozen=True, slots=True)
class StandingKeys:
    """Every (scope, period) standing one challenge's points count towards."""

    scopes: tuple[ScopeKey, ...]
    periods: tuple[PeriodKey, ...]

    def pairs(self) -> list[tuple[str, str]]:
        """The stored (scope, period) keys, every scope with every period."""
        return [(s.key, p.key) for s in self.scopes for p in self.periods]


def standing_keys(channel_pk: int, channel: ChannelRef, day: dt.date) -> StandingKeys:
    """What a problem of a challenge on ``day`` in this channel counts towards: the channel and its
    workspace, each over all time, the day and its ISO week.
    """
    return StandingKeys(
        (ScopeKey.channel(channel_pk), ScopeKey.workspace(channel)),
        (PeriodKey.all_time(), PeriodKey.day(day), PeriodKey.week(day)),
    )
