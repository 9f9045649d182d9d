"""Exactly once on Discord when a sender dies between Discord's acceptance and its outbox commit: every
outbox message carries a nonce derived from the outbox row (with ``enforce_nonce``), so the sender that
takes the expired lease over gets the message Discord made the first time instead of a second one. The
death is simulated for certain (tests/fakes.py's DiesAfterAcceptance), and the strict fake dedups as
Discord documents it: same author, same nonce, within a few minutes.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest

from bot.adapters.discord.platform import NONCE_MAX
from bot.core import parts
from bot.core.outbox import OutboxTiming
from bot.core.service import QuizService
from tests.bot.adapters.discord.test_discord_failures import OPTIONS
from tests.discord_env import CHANNEL, Bot, BotOptions
from tests.discord_fake import CHANNEL_ID, NONCE_WINDOW_S, FakeDiscord, no_unexpected_rejections
from tests.fakes import Died, die_mid_post, survivor

TIMING = OutboxTiming(lease_s=60, retry_base_s=30, retry_max_s=600, give_up_s=3 * 3600)


@pytest.fixture
def bot_options() -> BotOptions:
    """tests/bot/adapters/discord/test_discord_failures.py's bot, with the outbox's times above."""
    return OPTIONS.but(outbox=TIMING)


@pytest.fixture(autouse=True)
def _strict_discord(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    no_unexpected_rejections(request)


def in_channel(fake: FakeDiscord) -> list[dict[str, Any]]:
    """The messages in the challenge's channel."""
    return [m for m in fake.messages.values() if m["channel_id"] == str(CHANNEL_ID)]


async def queued(quiz: QuizService) -> tuple[int, int]:
    """Today's challenge, created with its post queued (not sent): (challenge id, its post's outbox id)."""
    challenge, created = await quiz.open_challenge(
        CHANNEL, closes_at=dt.datetime(2030, 1, 1, tzinfo=dt.UTC), queue_post=True
    )
    assert created
    async with quiz._uow() as uow:
        item = await uow.outbox.find(challenge.id, "challenge")
    assert item is not None
    return challenge.id, item.id


async def takes_over(bot: Bot, item_id: int, after_s: float) -> str:
    """Another process's sender ``after_s`` later (past the dead one's lease): its delivery's status."""
    bot.clock.advance(after_s)
    bot.fake.advance(after_s)
    return (await survivor(bot.quiz.outbox, bot.clock).deliver(item_id)).status


async def test_the_daily_post_accepted_before_a_death_is_not_posted_again(bot: Bot) -> None:
    challenge_id, item_id = await queued(bot.quiz)
    await die_mid_post(bot.quiz.outbox, item_id)
    [accepted] = in_channel(bot.fake)
    [create] = [c for c in bot.fake.calls("POST", rf"/channels/{CHANNEL_ID}/messages")]
    assert create.body["enforce_nonce"] is True and 0 < len(create.body["nonce"]) <= NONCE_MAX

    assert await takes_over(bot, item_id, TIMING.lease_s + 1) == "sent"
    assert in_channel(bot.fake) == [accepted]  # Discord answered the second create with the first message
    challenge = await bot.quiz.get_challenge(challenge_id)
    assert challenge.message_ref == accepted["id"]


async def test_results_accepted_before_a_death_are_not_posted_again(
    bot: Bot, monkeypatch: pytest.MonkeyPatch
) -> None:
    challenge_id, post_id = await queued(bot.quiz)
    assert (await bot.quiz.outbox.deliver(post_id)).status == "sent"
    async with bot.quiz._uow() as uow:
        challenge = await uow.challenges.get_challenge_by_id(challenge_id)
        assert challenge is not None
        results_id = await bot.quiz.outbox.queue(uow, challenge, "results", {"notes": []})
    assert results_id is not None
    # The results go through send_parts, which records each accepted message: die before that record.
    with monkeypatch.context() as patched:
        patched.setattr(parts.PartLedger, "accepted", _dies)
        await die_mid_post(bot.quiz.outbox, results_id)
    before = [m["id"] for m in in_channel(bot.fake)]
    assert len(before) == 2  # the daily post and the results
    assert await takes_over(bot, results_id, TIMING.lease_s + 1) == "sent"
    assert [m["id"] for m in in_channel(bot.fake)] == before  # (the daily post was edited: closed)


async def _dies(self: parts.PartLedger, count: int, digest: str) -> None:
    raise Died


async def test_each_post_has_its_own_nonce(bot: Bot) -> None:
    # Two posts never share a nonce (Discord would answer the second with the first's message).
    for day in (dt.date(2026, 3, 1), dt.date(2026, 3, 2)):
        await bot.quiz.post_daily(CHANNEL, day, closes_at=dt.datetime(2030, 1, 1, tzinfo=dt.UTC))
    nonces = [c.body["nonce"] for c in bot.fake.calls("POST", rf"/channels/{CHANNEL_ID}/messages")]
    assert len(nonces) == 2 and len(set(nonces)) == 2 and len(in_channel(bot.fake)) == 2


async def test_the_fake_dedups_a_nonce_only_within_its_window_and_with_enforce_nonce(bot: Bot) -> None:
    channel = bot.client.get_partial_messageable(CHANNEL_ID)
    first = await channel.send("one", nonce="n-1")
    again = await channel.send("one", nonce="n-1")
    assert again.id == first.id and len(in_channel(bot.fake)) == 1
    bot.fake.advance(NONCE_WINDOW_S + 1)
    later = await channel.send("one", nonce="n-1")  # past Discord's few minutes: a new message
    assert later.id != first.id and len(in_channel(bot.fake)) == 2
