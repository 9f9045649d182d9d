"""A tenant dropped from RANKZERO_ALLOWED_TENANTS gets nothing from the bot on its own either (security
review of issue 24, finding 2): its stored schedule opens and posts no challenge, and no post of any
kind (challenge, results) reaches its workspace; the refusal is logged once. Slack through the adapter
and its fake Web API; Discord buttons on a post made before the server was dropped are refused.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bot.core.models import Actor, ChannelRef, PlayerRef
from tests.bot.adapters.slack.test_slack_adapter import _harness
from tests.conftest import test_bank
from tests.slack_fake import TEAM

OPERATOR = Actor(PlayerRef("console", "op", "Op"), True, is_operator=True)


async def test_a_dropped_workspace_gets_no_scheduled_or_other_post(
    tmp_path: Path, sqlite_template: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("WARNING", logger="bot.core.tenancy")
    async for h in _harness(tmp_path, sqlite_template, test_bank(), allowed_tenants=["slack:T0ELSE"]):
        channel = ChannelRef("slack", TEAM, "C1", "quiz")
        hour = (h.clock.now().hour - 1) % 24  # its slot an hour ago: due now
        await h.services.schedules.set_schedule(OPERATOR, channel, post_time=f"{hour:02d}:00")
        [schedule] = await h.services.schedules.schedules()

        outcome = await h.services.schedules.post_scheduled(schedule.channel_pk)

        assert outcome.status == "skipped" and "RANKZERO_ALLOWED_TENANTS" in outcome.reason
        assert await h.services.quiz.find_challenge(channel) is None, "no challenge opened for nobody"
        # Any other post to it (a challenge opened before it was dropped, its results) is refused too.
        card = await h.services.quiz.post_daily(channel)
        await h.services.quiz.close_challenge(card.challenge_id)
        await asyncio.sleep(0.2)
        assert [c.method for c in h.api.calls if c.method.startswith("chat.")] == []
        assert caplog.text.count(f"not posting to slack:{TEAM}") == 1, "logged once, not at every post"
