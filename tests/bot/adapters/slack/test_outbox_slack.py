"""Results are never lost silently on Slack (issue 25 §1), end to end: signed ``close-now`` commands into
the Bolt app, every Web API call into the strict fake. The admin who closes is told the truth (closed;
results posted, or queued and why), the results reach the channel once the cause is gone, and the admin
channel hears of each cause once, and of a give-up.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.core.outbox import OutboxTiming
from tests.bot.adapters.slack.test_slack_adapter import LISTED, Harness, _harness
from tests.conftest import test_bank
from tests.slack_fake import Call

TIMING = OutboxTiming(lease_s=60, retry_base_s=30, retry_max_s=600, give_up_s=3 * 3600)


@pytest.fixture
async def slack(tmp_path: Path, sqlite_template: Path) -> AsyncIterator[Harness]:
    async for h in _harness(tmp_path, sqlite_template, test_bank(), slack_admin_channel_id="CADMIN"):
        h.services.quiz.outbox.timing = TIMING
        yield h


def results(slack: Harness) -> list[Call]:
    """Results messages Slack accepted in the challenge's channel."""
    return [
        c
        for c in slack.api.of("chat.postMessage")
        if c.args.get("channel") == "C1" and "Results" in json.dumps(c.args.get("blocks"))
    ]


def notices(slack: Harness) -> list[str]:
    return [c.dump() for c in slack.api.of("chat.postMessage") if c.args.get("channel") == "CADMIN"]


async def close_now(slack: Harness) -> str:
    """``close-now`` by an admin; what they read."""
    before = {id(c) for c in slack.api.of("response")}
    r = await slack.send.command(LISTED, "close-now")
    assert r.status_code == 200
    # The reply comes through the response_url after the ack; a hang guard of a minute (not a speed bound:
    # a loaded 2-core machine took more than 10 s here).
    for _ in range(1200):
        replies = [c.dump() for c in slack.api.of("response") if id(c) not in before]
        said = [t for t in replies if "losed" in t or "went wrong" in t]
        if said:
            return said[0]
        await asyncio.sleep(0.05)
    raise AssertionError("close-now got no answer")


async def drain_after(slack: Harness, seconds: float) -> None:
    slack.clock.advance(seconds)
    slack.api.clock_offset_s += seconds  # Slack's side of the same time (its rate budgets refill)
    await slack.services.schedules.deliver_outbox()


async def test_a_deleted_daily_post_does_not_stop_the_results(slack: Harness) -> None:
    challenge_id = await slack.post_challenge()
    ref = (await slack.services.quiz.get_challenge(challenge_id)).message_ref
    assert ref is not None
    slack.api.delete_message(*ref.split(":", 1))  # someone deleted the daily post
    slack.expected_refusals.append(("chat.update", "message_not_found"))
    said = await close_now(slack)
    assert "results posted" in said and "Something went wrong" not in said
    [posted] = results(slack)
    assert "thread_ts" not in posted.args  # posted anew in the channel, not in a deleted post's thread
    assert notices(slack) == []


async def test_an_archived_channel_queues_the_results_tells_once_and_posts_after_unarchive(
    slack: Harness,
) -> None:
    await slack.post_challenge()
    slack.api.channels["C1"].archived = True
    said = await close_now(slack)
    assert "Closed" in said and "not posted yet" in said and "archived" in said
    assert "Something went wrong" not in said
    [told] = notices(slack)
    assert "could not post the results" in told and "archived" in told
    await drain_after(slack, TIMING.retry_max_s)  # still archived: tried, not told again
    assert len(notices(slack)) == 1 and results(slack) == []
    again = await close_now(slack)  # a second close-now says what is true: closed already
    assert "already closed" in again
    slack.api.channels["C1"].archived = False
    await drain_after(slack, TIMING.retry_max_s)
    assert len(results(slack)) == 1
    await drain_after(slack, TIMING.retry_max_s)
    assert len(results(slack)) == 1  # once
    refused = {r for r in slack.api.refused if r[1] != "ratelimited"}
    assert refused == {("chat.update", "is_archived"), ("chat.postMessage", "is_archived")}
    slack.expected_refusals.extend(refused)


async def test_a_deleted_channel_is_given_up_with_a_notice(slack: Harness) -> None:
    challenge_id = await slack.post_challenge()
    del slack.api.channels["C1"]  # the channel was deleted
    said = await close_now(slack)
    assert "not posted yet" in said and "cannot see channel C1" in said
    for _ in range(20):  # tried until the give-up time (3 h)
        await drain_after(slack, TIMING.retry_max_s)
    told = notices(slack)
    assert len(told) == 2, told  # the cause once, then the give-up
    assert "tries again" in told[0] and "gave up" in told[1]
    tried = sum(1 for m, _ in slack.api.refused if m == "chat.postMessage")
    await drain_after(slack, 86400)
    assert sum(1 for m, _ in slack.api.refused if m == "chat.postMessage") == tried  # never again
    async with slack.services.quiz._uow() as uow:
        row = await uow.outbox.find(challenge_id, "results")
    assert row is not None and row.status == "failed"
    slack.expected_refusals.extend({r for r in slack.api.refused if r[1] == "channel_not_found"})


async def test_the_bot_removed_from_the_channel_then_invited_back(slack: Harness) -> None:
    await slack.post_challenge()
    slack.api.channels["C1"].member = False  # removed; without chat:write.public it cannot post there
    slack.api.scopes.discard("chat:write.public")
    said = await close_now(slack)
    assert "not posted yet" in said and "/invite @RankZero" in said
    assert len(notices(slack)) == 1
    slack.api.channels["C1"].member = True  # invited back
    await drain_after(slack, TIMING.retry_max_s)
    [posted] = results(slack)
    assert posted.args.get("thread_ts")  # the daily post is still there: in its thread
    slack.expected_refusals.extend({r for r in slack.api.refused if r[1] == "not_in_channel"})


async def test_a_refused_weekly_summary_is_told_once_and_posted_after_unarchive(slack: Harness) -> None:
    from tests.conftest import ADMIN

    schedules = slack.services.schedules
    channel = (await slack.services.quiz.get_challenge(await slack.post_challenge())).channel
    now = slack.clock.now()
    day = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")[now.weekday()]
    saved = await schedules.set_schedule(
        ADMIN, channel, post_time=f"{now:%H:%M}", timezone="UTC", weekly_summary=day
    )
    slack.api.channels["C1"].archived = True
    card = await schedules.weekly_summary(saved.channel_pk)
    assert card is not None and card.title.startswith("Weekly summary")

    def summaries() -> list[Call]:
        return [
            c
            for c in slack.api.of("chat.postMessage")
            if c.args.get("channel") == "C1" and "Weekly summary" in json.dumps(c.args)
        ]

    [told] = notices(slack)
    assert "could not post the weekly summary" in told and "archived" in told
    assert await schedules.weekly_summary(saved.channel_pk) is None  # claimed: the outbox has it
    await drain_after(slack, TIMING.retry_max_s)
    assert len(notices(slack)) == 1 and summaries() == []
    slack.api.channels["C1"].archived = False
    await drain_after(slack, TIMING.retry_max_s)
    assert len(summaries()) == 1
    await drain_after(slack, TIMING.retry_max_s)
    assert len(summaries()) == 1  # once
    refused = {r for r in slack.api.refused if r[1] != "ratelimited"}
    assert refused == {("chat.postMessage", "is_archived")}
    slack.expected_refusals.extend(refused)
