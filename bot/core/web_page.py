"""What a channel's read-only web page shows (issue 30 §3): its weekly and all-time leaderboards and the
team report of its last complete week, read for the one channel a signed link names (bot/core/web_links.py).

The page shows what the channel already sees in chat: no player's private figures, and no explanation of
a most-missed problem (those stay behind the chat button, which refuses a challenge still open).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from bot.core.cards import LeaderboardCard, TeamReportCard
from bot.core.service import QuizService
from bot.core.vocabulary import Period, Scope
from bot.core.web_links import LinkTarget

#: Players each leaderboard of the page lists.
PAGE_TOP = 20


@dataclass(frozen=True)
class ChannelPage:
    """The page of one channel: what the link named, its two leaderboards and its last week's report."""

    target: LinkTarget
    week: LeaderboardCard
    all_time: LeaderboardCard
    report: TeamReportCard

    @property
    def expires_at(self) -> dt.datetime:
        """When the link that opened the page stops working."""
        return self.target.expires_at


async def channel_page(quiz: QuizService, target: LinkTarget, timezone: str = "UTC") -> ChannelPage:
    """The page of the channel ``target`` names, read only in that channel (its tenant's rows)."""
    # "This week" and "last week" in the schedule's timezone when the channel has one (the weeks its
    # chat posts count), not the bot default's.
    channel = target.channel(await quiz.schedule_timezone(target.channel(timezone)))
    week = await quiz.leaderboard(channel, scope=Scope.CHANNEL, period=Period.WEEK, limit=PAGE_TOP)
    all_time = await quiz.leaderboard(channel, scope=Scope.CHANNEL, period=Period.ALL, limit=PAGE_TOP)
    report = await quiz.last_week_report(channel)
    return ChannelPage(target, week, all_time, report)
