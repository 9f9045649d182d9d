"""Results are never lost silently on Discord (issue 25 §1): the close and its results post are one
transaction's outbox row, delivered until Discord accepts it, with the admins told once per cause and
given up only with a notice. Every failure goes through the strict fake at discord.py's HTTP boundary.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest

from bot.core.cards import ResultsCard
from bot.core.outbox import OutboxTiming
from bot.core.service import QuizService
from bot.storage.uow import SqlUnitOfWork
from tests.bot.adapters.discord.test_discord_failures import OPTIONS
from tests.discord_env import ADMIN_CHANNEL, CHANNEL, Bot, BotOptions
from tests.discord_fake import (
    ALL_PERMISSIONS,
    CHANNEL_ID,
    EMBED_LINKS,
    SEND_MESSAGES,
    FakeDiscord,
    no_unexpected_rejections,
)

POSTS = rf"/channels/{CHANNEL_ID}/messages"
NOTICES = rf"/channels/{ADMIN_CHANNEL}/messages"
TIMING = OutboxTiming(lease_s=60, retry_base_s=30, retry_max_s=600, give_up_s=3 * 3600)


@pytest.fixture
def bot_options() -> BotOptions:
    """tests/bot/adapters/discord/test_discord_failures.py's bot, with the outbox's times above."""
    return OPTIONS.but(outbox=TIMING)


@pytest.fixture(autouse=True)
def _strict_discord(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    no_unexpected_rejections(request)  # every refusal was one a test provoked and counted


def results_posts(fake: FakeDiscord) -> list[dict[str, Any]]:
    """The results messages Discord accepted in the challenge's channel (refused calls are not messages)."""
    return [
        m
        for m in fake.messages.values()
        if m["channel_id"] == str(CHANNEL_ID)
        and any(str(e.get("title", "")).startswith("Results") for e in m["embeds"])
    ]


def notices(fake: FakeDiscord) -> list[str]:
    return [str(c.body["content"]) for c in fake.calls("POST", NOTICES)]


async def _closed(bot: Bot) -> tuple[int, ResultsCard]:
    card = await bot.quiz.post_daily(CHANNEL, closes_at=bot.clock.now() + dt.timedelta(hours=1))
    return card.challenge_id, card  # type: ignore[return-value]


async def _drain_after(bot: Bot, seconds: float) -> None:
    bot.clock.advance(seconds)
    await bot.quiz.outbox.drain()


async def _outbox_row(quiz: QuizService, challenge_id: int) -> Any:
    async with quiz._uow() as uow:
        assert isinstance(uow, SqlUnitOfWork)
        return await uow.outbox.find(challenge_id, "results")


@pytest.mark.parametrize(
    ("name", "status", "body"),
    [
        ("a single 503", 503, {"message": "Service Unavailable", "code": 0}),
        ("the channel deleted", 404, {"message": "Unknown Channel", "code": 10003}),
        ("Embed Links removed", 403, {"message": "Missing Permissions", "code": 50013}),
    ],
)
async def test_a_refused_results_post_is_retried_and_told_once_then_posted(
    bot: Bot, name: str, status: int, body: dict[str, Any]
) -> None:
    challenge_id, _ = await _closed(bot)
    # The refusal lasts three tries (a single 503: one), then the cause is fixed.
    tries = 1 if status == 503 else 3
    for _ in range(tries):
        bot.fake.fail_next("POST", POSTS, status, body)
    results = await bot.quiz.close_challenge(challenge_id)
    assert results is not None and results.not_posted is not None, name
    assert str(status) in results.not_posted and "tries again" in results.not_posted
    assert results_posts(bot.fake) == []
    [told] = notices(bot.fake)
    assert "could not post the results" in told and f"challenge #{challenge_id}" in told
    assert str(status) in told
    for _ in range(tries - 1):  # the retries that meet the same cause: not told again
        await _drain_after(bot, TIMING.retry_max_s)
    assert len(notices(bot.fake)) == 1 and results_posts(bot.fake) == []
    await _drain_after(bot, TIMING.retry_max_s)
    assert len(results_posts(bot.fake)) == 1  # posted once the cause is gone
    await _drain_after(bot, TIMING.retry_max_s)
    assert len(results_posts(bot.fake)) == 1  # and never again
    assert (await _outbox_row(bot.quiz, challenge_id)).status == "sent"
    assert [r[0] for r in bot.fake.take_rejections()] == [status] * tries


async def test_a_deleted_channel_is_given_up_with_a_notice_and_never_tried_again(bot: Bot) -> None:
    challenge_id, _ = await _closed(bot)
    bot.fake.deleted_channels.add(CHANNEL_ID)
    results = await bot.quiz.close_challenge(challenge_id)
    assert results is not None and results.not_posted is not None and "Unknown Channel" in results.not_posted
    assert await bot.quiz.close_challenge(challenge_id) is None  # closed for good: the outbox has it
    for _ in range(20):  # a refusal every retry, up to the give-up time (3 h)
        await _drain_after(bot, TIMING.retry_max_s)
    told = notices(bot.fake)
    assert len(told) == 2, told  # the cause once, then the give-up
    assert "tries again" in told[0] and "gave up" in told[1]
    row = await _outbox_row(bot.quiz, challenge_id)
    assert row.status == "failed" and "10003" in (row.last_error or "")
    tried = len(bot.fake.calls("POST", POSTS))
    await _drain_after(bot, 86400)
    assert len(bot.fake.calls("POST", POSTS)) == tried  # given up: no more tries
    assert {r[0] for r in bot.fake.take_rejections()} == {404}


async def test_the_bot_kicked_then_added_back_gets_its_results_posted(bot: Bot) -> None:
    challenge_id, _ = await _closed(bot)
    # Removed from the server: Discord answers every call in its channels 403 50001 Missing Access.
    bot.fake.set_permissions(CHANNEL_ID, 0)
    results = await bot.quiz.close_challenge(challenge_id)
    assert results is not None and results.not_posted is not None and "50001" in results.not_posted
    assert len(notices(bot.fake)) == 1
    await _drain_after(bot, TIMING.retry_max_s)
    assert len(notices(bot.fake)) == 1 and results_posts(bot.fake) == []
    bot.fake.permissions.pop(CHANNEL_ID)  # invited back
    await _drain_after(bot, TIMING.retry_max_s)
    assert len(results_posts(bot.fake)) == 1
    assert {r[3]["code"] for r in bot.fake.take_rejections()} == {50001}


async def test_a_new_cause_is_told_again(bot: Bot) -> None:
    challenge_id, _ = await _closed(bot)
    bot.fake.set_permissions(CHANNEL_ID, ALL_PERMISSIONS & ~SEND_MESSAGES)
    await bot.quiz.close_challenge(challenge_id)
    await _drain_after(bot, TIMING.retry_max_s)
    assert len(notices(bot.fake)) == 1
    bot.fake.permissions.pop(CHANNEL_ID)
    bot.fake.deleted_channels.add(CHANNEL_ID)  # another cause: told
    await _drain_after(bot, TIMING.retry_max_s)
    told = notices(bot.fake)
    assert len(told) == 2 and "Unknown Channel" in told[1]
    bot.fake.take_rejections()


async def test_a_refused_reminder_is_retried_until_the_close_then_skipped(bot: Bot) -> None:
    from bot.core.schedule_service import ScheduleService

    schedules = ScheduleService(bot.quiz._uow, bot.clock, bot.quiz, bot.adapter.platform)
    challenge_id, _ = await _closed(bot)
    bot.fake.set_permissions(CHANNEL_ID, ALL_PERMISSIONS & ~SEND_MESSAGES & ~EMBED_LINKS)
    assert await schedules.remind(challenge_id)
    assert len(notices(bot.fake)) == 1 and "closing reminder" in notices(bot.fake)[0]
    bot.fake.permissions.pop(CHANNEL_ID)
    before = len(bot.fake.calls("POST", POSTS))
    await _drain_after(bot, TIMING.retry_base_s)
    assert len(bot.fake.calls("POST", POSTS)) == before + 1  # the reminder, once the cause is gone
    assert "closes" in str(bot.fake.calls("POST", POSTS)[-1].body.get("content"))
    bot.fake.take_rejections()


async def test_a_results_post_in_several_messages_is_not_repeated_by_a_partial_retry(
    bot: Bot, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dataclasses

    from bot.adapters.discord.render import results_embeds
    from bot.core.models import StandingRow

    # A large tie: the results are over one embed's limits, so Discord gets several messages.
    real = bot.quiz.outbox._results

    async def large_tie(uow: Any, challenge: Any) -> ResultsCard:
        card = await real(uow, challenge)
        tied = tuple(
            StandingRow(1, 1000 + i, f"tied player {i:03d} " + "x" * 30, 10, 1, 9000) for i in range(300)
        )
        return dataclasses.replace(card, winners=tied)

    monkeypatch.setattr(bot.quiz.outbox, "_results", large_tie)
    challenge_id, _ = await _closed(bot)
    bot.fake.fail_next("POST", POSTS, 503, {"message": "Service Unavailable", "code": 0}, after=1)
    results = await bot.quiz.close_challenge(challenge_id)
    assert results is not None and results.not_posted is not None and "503" in results.not_posted
    async with bot.quiz._uow() as uow:
        parts = len(
            results_embeds(await large_tie(uow, await uow.challenges.get_challenge_by_id(challenge_id)))
        )
    assert parts >= 3
    assert len(results_posts(bot.fake)) == 1  # message 1 accepted, message 2 refused
    assert (await _outbox_row(bot.quiz, challenge_id)).parts_sent == 1
    await _drain_after(bot, TIMING.retry_max_s)
    posted = results_posts(bot.fake)
    assert len(posted) == parts  # messages 2.. at the retry; message 1 not again
    bodies = [str(m["embeds"]) for m in posted]
    assert len(set(bodies)) == parts
    assert (await _outbox_row(bot.quiz, challenge_id)).status == "sent"
    await _drain_after(bot, TIMING.retry_max_s)
    assert len(results_posts(bot.fake)) == parts
    assert [r[0] for r in bot.fake.take_rejections()] == [503]
