"""Fakes for the core's ports: a clock the test moves by hand and a platform that records posts."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from bot.core.cards import ChallengeCard, LeaderboardCard, PracticeNudgeCard, ReminderCard, ResultsCard
from bot.core.disputes import AdminNotice
from bot.core.models import ChannelRef, PlayerRef


class FrozenClock:
    """A clock that only moves when told to."""

    def __init__(self, start: dt.datetime) -> None:
        self.current = start

    def now(self) -> dt.datetime:
        return self.current

    def advance(self, seconds: float) -> None:
        self.current += dt.timedelta(seconds=seconds)


@dataclass
class FakePlatform:
    """Records every outbound call."""

    posts: list[tuple[ChannelRef, ChallengeCard]] = field(default_factory=list)
    results: list[tuple[ChannelRef, ResultsCard, str | None]] = field(default_factory=list)
    reminders: list[tuple[ChannelRef, ReminderCard, str | None]] = field(default_factory=list)
    summaries: list[tuple[ChannelRef, LeaderboardCard]] = field(default_factory=list)
    admin_notices: list[AdminNotice] = field(default_factory=list)
    nudges: list[tuple[PlayerRef, PracticeNudgeCard]] = field(default_factory=list)
    #: User ids whose DMs are closed: a nudge to them fails as on the real platforms.
    unreachable: set[str] = field(default_factory=set)

    async def post_challenge(self, channel: ChannelRef, card: ChallengeCard) -> str | None:
        self.posts.append((channel, card))
        return f"msg-{card.challenge_id}"

    async def post_results(self, channel: ChannelRef, card: ResultsCard, message_ref: str | None) -> None:
        self.results.append((channel, card, message_ref))

    async def post_reminder(self, channel: ChannelRef, card: ReminderCard, message_ref: str | None) -> None:
        self.reminders.append((channel, card, message_ref))

    async def post_weekly_summary(self, channel: ChannelRef, card: LeaderboardCard) -> None:
        self.summaries.append((channel, card))

    async def post_admin_notice(self, notice: AdminNotice) -> None:
        self.admin_notices.append(notice)

    async def send_practice_nudge(self, player: PlayerRef, card: PracticeNudgeCard) -> None:
        if player.user_id in self.unreachable:
            raise ConnectionRefusedError(f"cannot send messages to {player.user_id}")
        self.nudges.append((player, card))
