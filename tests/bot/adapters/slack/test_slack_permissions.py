"""The bot must be able to post where it is asked to: ``schedule set`` and ``post-now`` check it first and
say what to grant; a post Slack refuses is reported to the admin channel and leaves no challenge that
nobody saw, so the next post-now (after the fix) really posts it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import async_sessionmaker

from bot.core.errors import PostRefusedError
from bot.storage.models import ChallengeRow, ScheduleRow
from tests.bot.adapters.slack.test_slack_adapter import OWNER, Harness, _harness
from tests.conftest import test_bank
from tests.slack_fake import TEAM, Channel


@pytest.fixture
async def slack(tmp_path: Path, sqlite_template: Path) -> AsyncIterator[Harness]:
    async for h in _harness(tmp_path, sqlite_template, test_bank(), slack_admin_channel_id="CADMIN"):
        yield h


def without_public_posting(h: Harness) -> None:
    """The app installed without chat:write.public (as auth.test reported at start)."""
    h.api.scopes.discard("chat:write.public")
    h.adapter.ctx.scopes = frozenset(h.api.scopes)


async def count(h: Harness, row: type) -> int:
    async with async_sessionmaker(h.services.app.engine)() as s:
        return int(await s.scalar(select(func.count()).select_from(row)) or 0)


async def test_post_now_and_schedule_set_refuse_where_the_bot_is_not_a_member(slack: Harness) -> None:
    without_public_posting(slack)
    slack.api.channels["C1"] = Channel("general", member=False)
    await slack.send.command(OWNER, "post-now")
    await slack.send.command(OWNER, "schedule set --time 09:00")
    replies = await slack.api.wait_for("response", 2)
    for reply in replies:
        assert "I am not a member of channel C1" in reply.dump() and "/invite @RankZero" in reply.dump()
        assert "chat:write.public" in reply.dump()
    assert not slack.api.of("chat.postMessage")
    assert await count(slack, ChallengeRow) == 0 and await count(slack, ScheduleRow) == 0


async def test_a_private_channel_the_bot_cannot_see_is_refused(slack: Harness) -> None:
    slack.api.channels["GSECRET"] = Channel("secret", member=False, private=True)
    slack.expected_refusals.append(("conversations.info", "channel_not_found"))
    await slack.send.command(OWNER, "post-now", channel="GSECRET")
    reply = (await slack.api.wait_for("response"))[0].dump()
    assert "I cannot see channel GSECRET" in reply and "/invite @RankZero" in reply
    assert await count(slack, ChallengeRow) == 0


async def test_a_refused_scheduled_post_is_reported_and_posted_after_the_fix(slack: Harness) -> None:
    # The bot was removed from the channel after its schedule was set: the scheduled post is refused.
    without_public_posting(slack)
    slack.api.channels["C1"] = Channel("general", member=False)
    slack.expected_refusals.append(("chat.postMessage", "not_in_channel"))
    with pytest.raises(PostRefusedError, match="invite me there"):
        await slack.services.quiz.post_daily(slack.adapter.ctx.channel(TEAM, "C1"))
    notice = (await slack.api.wait_for("chat.postMessage"))[0]
    assert notice.args["channel"] == "CADMIN" and "Could not post" in notice.dump()
    assert "/invite @RankZero" in notice.dump()
    assert await count(slack, ChallengeRow) == 0  # no challenge that nobody saw
    # The admin invites the bot and posts now: the day's challenge is really posted this time.
    slack.api.channels["C1"].member = True
    await slack.send.command(OWNER, "post-now")
    reply = (await slack.api.wait_for("response"))[0].dump()
    assert "Posted" in reply
    posts = [c for c in slack.api.of("chat.postMessage") if c.args["channel"] == "C1"]
    assert len(posts) == 1 and "rz:start:" in posts[0].dump()
    assert await count(slack, ChallengeRow) == 1


async def test_a_public_channel_needs_no_membership_with_chat_write_public(slack: Harness) -> None:
    assert "chat:write.public" in slack.adapter.ctx.scopes  # read from auth.test at start
    slack.api.channels["C1"] = Channel("general", member=False)
    await slack.send.command(OWNER, "post-now")
    assert "Posted" in (await slack.api.wait_for("response"))[0].dump()
    assert [c.args["channel"] for c in slack.api.of("chat.postMessage")] == ["C1"]


async def test_a_missing_scope_is_named(slack: Harness) -> None:
    slack.api.scopes.discard("channels:read")
    slack.expected_refusals.append(("conversations.info", "missing_scope"))
    await slack.send.command(OWNER, "schedule set --time 09:00")
    reply = (await slack.api.wait_for("response"))[0].dump()
    assert "lacks the `channels:read` scope" in reply and "reinstall" in reply
    assert await count(slack, ScheduleRow) == 0


async def test_a_refusal_retried_by_the_scheduler_is_told_to_the_admins_once(slack: Harness) -> None:
    # The scheduler retries a refused post every minute or so; the admin channel hears of it once.
    without_public_posting(slack)
    slack.api.channels["C1"] = Channel("general", member=False)
    slack.expected_refusals.extend([("chat.postMessage", "not_in_channel")] * 3)
    for _ in range(3):
        with pytest.raises(PostRefusedError):
            await slack.services.quiz.post_daily(slack.adapter.ctx.channel(TEAM, "C1"))
    notices = [c for c in slack.api.of("chat.postMessage") if c.args["channel"] == "CADMIN"]
    assert len(notices) == 1 and "Could not post" in notices[0].dump()
    assert await count(slack, ChallengeRow) == 0
