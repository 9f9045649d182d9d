"""The results post of a busy day fits one Slack message (badges grouped), checked by the strict fake."""

from __future__ import annotations

import datetime as dt
import json

from slack_sdk.web.async_client import AsyncWebClient

from bot.adapters.slack.failures import add_retries
from bot.adapters.slack.platform import SlackPlatform
from bot.core.cards import BadgeAward, ProblemResult, ResultsCard, StreakLine
from bot.core.models import ChannelRef, StandingRow
from tests.slack_fake import TEAM, FakeSlackApi

BADGES = (
    BadgeAward("perfect-day", "Perfect day", ":star:", "all correct"),
    BadgeAward("speedrun", "Speedrun", ":zap:", "fast"),
    BadgeAward("first-try", "First try", ":dart:", "no wrong answer"),
)


def busy_day(finishers: int = 41) -> ResultsCard:
    names = [f"Player number {i:02d} <!here>" for i in range(finishers)]
    problems = tuple(
        ProblemResult(n, f"q-{n}", "DDP", "A", {"A": 30, "B": 6, "C": 3, "D": 2}, finishers, 30)
        for n in range(1, 6)
    )
    winners = tuple(StandingRow(i + 1, i, names[i], 500 - i, 5, 1000) for i in range(3))
    return ResultsCard(
        challenge_id=7,
        title="Daily · 2026-11-25",
        day=dt.date(2026, 11, 25),
        problems=problems,
        winners=winners,
        badges=tuple((name, badge) for name in names for badge in BADGES),
        players=finishers,
        streaks=tuple(StreakLine(names[i], 10 - i, i == 3) for i in range(10)),
    )


async def test_41_finishers_results_are_one_message_with_badges_grouped() -> None:
    api = FakeSlackApi()
    await api.start()
    try:
        client = add_retries(AsyncWebClient(token="xoxb-test", base_url=api.base_url))
        platform = SlackPlatform(client)
        channel = ChannelRef("slack", TEAM, "C1", "general", "UTC")
        await platform.post_results(channel, busy_day(), "C1:1700000000.000001")
        posts = api.of("chat.postMessage")
        assert len(posts) == 1, f"{len(posts)} messages"  # was 3 messages of 129+ blocks
        blocks = posts[0].args["blocks"]
        assert len(blocks) <= 10
        text = json.dumps(blocks, ensure_ascii=False)
        for badge in BADGES:
            assert text.count(badge.name) == 1  # one line per badge, listing its 41 earners
        assert text.count("Player number 40") == 3  # one mention per badge
        assert "<!here>" not in text
        assert posts[0].args["thread_ts"] == "1700000000.000001"
        assert not api.refused
    finally:
        await api.stop()


async def test_a_huge_day_still_posts_within_slack_limits() -> None:
    api = FakeSlackApi()
    api.limits["chat.postMessage"] = (100, 1.0)
    await api.start()
    try:
        client = add_retries(AsyncWebClient(token="xoxb-test", base_url=api.base_url))
        await SlackPlatform(client).post_results(ChannelRef("slack", TEAM, "C1"), busy_day(2000), None)
        posts = api.of("chat.postMessage")
        assert posts and not api.refused  # every section under 3000 characters, every message valid
        assert sum(json.dumps(p.args["blocks"]).count("Player number 1999") for p in posts) == 3
    finally:
        await api.stop()
