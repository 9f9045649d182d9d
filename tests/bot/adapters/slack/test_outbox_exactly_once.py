"""Exactly once on Slack when a sender dies between Slack's acceptance and its outbox commit: the post's
message carries the outbox row's mark (message metadata), and the sender that takes the expired lease over
finds it in the channel instead of posting again. The death is simulated for certain, not by timing: a
platform wrapper lets the strict fake accept the post and then raises a BaseException the outbox does not
catch (as a SIGKILL, nothing after the acceptance is recorded).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.core.models import Challenge, ChannelRef
from bot.core.outbox import OutboxTiming
from tests.bot.adapters.slack.test_slack_adapter import Harness, _harness
from tests.conftest import test_bank
from tests.fakes import die_mid_post, survivor
from tests.slack_fake import TEAM

TIMING = OutboxTiming(lease_s=60, retry_base_s=30, retry_max_s=600, give_up_s=3 * 3600)
CHANNEL = ChannelRef("slack", TEAM, "C1")


@pytest.fixture
async def slack(tmp_path: Path, sqlite_template: Path) -> AsyncIterator[Harness]:
    async for h in _harness(tmp_path, sqlite_template, test_bank(), slack_admin_channel_id="CADMIN"):
        h.services.quiz.outbox.timing = TIMING
        yield h


def top_level(slack: Harness) -> list[dict[str, Any]]:
    """The messages of channel C1 itself (not thread replies)."""
    return [m for m in slack.api.posts_in("C1") if m.get("thread_ts") in (None, m["ts"])]


async def queued(slack: Harness) -> tuple[Challenge, int]:
    """Today's challenge of C1, created with its post queued (not sent); (challenge, outbox id)."""
    quiz = slack.services.quiz
    challenge, created = await quiz.open_challenge(CHANNEL, queue_post=True)
    assert created
    async with quiz._uow() as uow:
        item = await uow.outbox.find(challenge.id, "challenge")
    assert item is not None
    return challenge, item.id


async def survivor_takes_over(slack: Harness, item_id: int) -> str:
    """Another sender after the dead one's lease: its delivery's status."""
    slack.clock.advance(TIMING.lease_s + 1)
    slack.api.clock_offset_s += TIMING.lease_s + 1
    delivery = await survivor(slack.services.quiz.outbox, slack.clock).deliver(item_id)
    return delivery.status


async def test_the_daily_post_accepted_before_a_death_is_not_posted_again(slack: Harness) -> None:
    challenge, item_id = await queued(slack)
    await die_mid_post(slack.services.quiz.outbox, item_id)
    [accepted] = top_level(slack)
    assert accepted["metadata"]["event_type"] == "rankzero_post"

    assert await survivor_takes_over(slack, item_id) == "sent"
    assert top_level(slack) == [accepted]  # exactly one message in the channel
    history = slack.api.of("conversations.history")
    assert history and all(c.args["include_all_metadata"] in (True, "true", "1") for c in history)
    # The message found stands for the post: its ts is the challenge's reference (results go in its thread).
    after = await slack.services.quiz.get_challenge(challenge.id)
    assert after.message_ref == f"C1:{accepted['ts']}"
    async with slack.services.quiz._uow() as uow:
        item = await uow.outbox.find(challenge.id, "challenge")
    assert item is not None and item.status == "sent" and item.attempts == 2


async def test_results_in_the_thread_accepted_before_a_death_are_not_posted_again(slack: Harness) -> None:
    challenge, post_id = await queued(slack)
    assert (await slack.services.quiz.outbox.deliver(post_id)).status == "sent"
    results_id = await queued_results(slack, challenge)
    await die_mid_post(slack.services.quiz.outbox, results_id)
    replies = [m for m in slack.api.posts_in("C1") if m.get("thread_ts")]
    assert len(replies) == 1 and "Results" in json.dumps(replies[0]["blocks"])

    assert await survivor_takes_over(slack, results_id) == "sent"
    assert [m for m in slack.api.posts_in("C1") if m.get("thread_ts")] == replies
    assert slack.api.of("conversations.replies")  # a thread's messages are looked up in the thread


async def queued_results(slack: Harness, challenge: Challenge) -> int:
    """The results of ``challenge`` queued (not sent); their outbox id."""
    quiz = slack.services.quiz
    async with quiz._uow() as uow:
        item_id = await quiz.outbox.queue(uow, challenge, "results", {"notes": []})
    assert item_id is not None
    return item_id


async def test_another_apps_message_with_the_same_mark_does_not_count(slack: Harness) -> None:
    _, item_id = await queued(slack)
    await die_mid_post(slack.services.quiz.outbox, item_id)
    [accepted] = top_level(slack)
    accepted["bot_id"] = "BOTHERAPP"  # as if another app had posted that metadata (hostile)
    assert await survivor_takes_over(slack, item_id) == "sent"
    assert len(top_level(slack)) == 2


async def test_without_the_history_scopes_the_post_goes_ahead_and_may_repeat(
    slack: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    # The documented fallback (README): no channels:history, no lookup; the post is not lost.
    slack.api.scopes.discard("channels:history")
    slack.expected_refusals.append(("conversations.history", "missing_scope"))
    _, item_id = await queued(slack)
    await die_mid_post(slack.services.quiz.outbox, item_id)
    assert await survivor_takes_over(slack, item_id) == "sent"
    assert len(top_level(slack)) == 2
    assert "cannot look for an earlier try" in caplog.text


async def test_a_first_try_does_not_look_and_marks_each_message(slack: Harness) -> None:
    _, item_id = await queued(slack)
    assert (await slack.services.quiz.outbox.deliver(item_id)).status == "sent"
    [posted] = top_level(slack)
    assert posted["metadata"]["event_payload"]["post"].endswith(".0")
    assert slack.api.of("conversations.history") == []  # no cost on the common path
