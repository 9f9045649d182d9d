"""Fakes for the core's ports: a clock the test moves by hand and a platform that records posts."""

from __future__ import annotations

import asyncio
import datetime as dt
from dataclasses import dataclass, field
from typing import Any, cast

from bot.core.cards import (
    ChallengeCard,
    DeliveryNotice,
    LeaderboardCard,
    PracticeNudgeCard,
    ReminderCard,
    ResultsCard,
    TeamReportCard,
)
from bot.core.disputes import AdminNotice
from bot.core.models import ChannelRef, PlayerRef
from bot.core.outbox import Outbox
from bot.core.ports import ChatPlatform, Clock


class FrozenClock:
    """A clock that only moves when told to; ``sleep_until`` sleepers wake when it is moved past them."""

    def __init__(self, start: dt.datetime) -> None:
        self._current = start
        self._sleepers: list[tuple[dt.datetime, asyncio.Future[None]]] = []

    @property
    def current(self) -> dt.datetime:
        return self._current

    @current.setter
    def current(self, when: dt.datetime) -> None:
        self._current = when
        self._wake()

    def now(self) -> dt.datetime:
        return self._current

    def advance(self, seconds: float) -> None:
        self.current = self._current + dt.timedelta(seconds=seconds)

    @property
    def sleepers(self) -> int:
        """How many ``sleep_until`` calls are waiting (for tests that wait until a timer is armed)."""
        return sum(1 for _, fut in self._sleepers if not fut.done())

    async def sleep_until(self, when: dt.datetime) -> None:
        if self._current >= when:
            await asyncio.sleep(0)  # still a suspension point, like a real sleep of 0
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (when, fut)
        self._sleepers.append(entry)
        try:
            await fut
        finally:
            self._sleepers.remove(entry)

    def _wake(self) -> None:
        for when, fut in list(self._sleepers):
            if when <= self._current and not fut.done():
                # Thread-safe: a test may move the clock from outside the sleeper's event loop.
                fut.get_loop().call_soon_threadsafe(_resolve, fut)


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


@dataclass
class FakePlatform:
    """Records every outbound call."""

    posts: list[tuple[ChannelRef, ChallengeCard]] = field(default_factory=list)
    results: list[tuple[ChannelRef, ResultsCard, str | None]] = field(default_factory=list)
    reminders: list[tuple[ChannelRef, ReminderCard, str | None]] = field(default_factory=list)
    summaries: list[tuple[ChannelRef, LeaderboardCard]] = field(default_factory=list)
    team_reports: list[tuple[ChannelRef, TeamReportCard]] = field(default_factory=list)
    admin_notices: list[AdminNotice] = field(default_factory=list)
    delivery_notices: list[tuple[ChannelRef, DeliveryNotice]] = field(default_factory=list)
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

    async def post_team_report(self, channel: ChannelRef, card: TeamReportCard) -> None:
        self.team_reports.append((channel, card))

    async def post_admin_notice(self, notice: AdminNotice, channel: ChannelRef | None = None) -> None:
        self.admin_notices.append(notice)

    async def post_delivery_notice(self, channel: ChannelRef, notice: DeliveryNotice) -> None:
        self.delivery_notices.append((channel, notice))

    async def send_practice_nudge(self, player: PlayerRef, card: PracticeNudgeCard) -> None:
        if player.user_id in self.unreachable:
            raise ConnectionRefusedError(f"cannot send messages to {player.user_id}")
        self.nudges.append((player, card))


class Died(BaseException):
    """The process died: no ``except Exception`` of the outbox runs, so nothing after it is recorded."""


class DiesAfterAcceptance:
    """A real platform, except that the process "dies" (raises :class:`Died`) right after the platform
    accepted a daily post, results or a weekly post (summary, team report): the window between acceptance
    and the outbox's commit, for certain.
    Everything else passes through.
    """

    def __init__(self, real: ChatPlatform) -> None:
        self.real = real

    async def post_challenge(self, channel: ChannelRef, card: ChallengeCard) -> str | None:
        """Post, then die."""
        await self.real.post_challenge(channel, card)
        raise Died

    async def post_results(self, channel: ChannelRef, card: ResultsCard, message_ref: str | None) -> None:
        """Post, then die."""
        await self.real.post_results(channel, card, message_ref)
        raise Died

    async def post_weekly_summary(self, channel: ChannelRef, card: LeaderboardCard) -> None:
        """Post, then die."""
        await self.real.post_weekly_summary(channel, card)
        raise Died

    async def post_team_report(self, channel: ChannelRef, card: TeamReportCard) -> None:
        """Post, then die."""
        await self.real.post_team_report(channel, card)
        raise Died

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


async def die_mid_post(outbox: Outbox, item_id: int) -> None:
    """Deliver ``item_id`` through a sender that dies once the platform accepted it (its claim stays)."""
    real = outbox.platform
    assert real is not None
    outbox.platform = cast(ChatPlatform, DiesAfterAcceptance(real))
    try:
        try:
            await outbox.deliver(item_id)
        except Died:
            return
        raise AssertionError("the sender did not reach the platform")
    finally:
        outbox.platform = real


def survivor(outbox: Outbox, clock: Clock) -> Outbox:
    """Another process's sender over the same database and platform (the replica that takes over)."""
    assert outbox.platform is not None
    return Outbox(
        outbox._uow,
        clock,
        outbox.platform,
        results=outbox._results,
        challenge_card=outbox._challenge_card,
        timing=outbox.timing,
    )
