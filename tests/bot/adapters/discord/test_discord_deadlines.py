"""Every Discord interaction ends within RANKZERO_HANDLER_DEADLINE_S (issue 25, section 2).

The service calls hang here the way they do on a frozen database (an await that never completes); the
player is still told, in one sentence, that the bot could not finish, and the cause is logged. Through
discord.py's real client and the strict fake of Discord's API, as in test_discord_failures.py.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from tests.bot.adapters.discord.test_discord_failures import OPTIONS, _answered
from tests.discord_env import Bot, BotOptions
from tests.discord_fake import no_unexpected_rejections

DEADLINE_S = 0.5
COULD_NOT = f"I could not finish this within {DEADLINE_S:g} s"


@pytest.fixture(autouse=True)
def _strict_discord(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    no_unexpected_rejections(request)


@pytest.fixture
def bot_options() -> BotOptions:
    """tests/bot/adapters/discord/test_discord_failures.py's bot, with a deadline on every interaction's
    work."""
    return OPTIONS.but(adapter={"handler_deadline_s": DEADLINE_S})


async def _silent(*_: Any, **__: Any) -> Any:
    await asyncio.Event().wait()  # a statement the frozen server never answers


async def test_a_start_click_on_a_silent_database_is_answered_at_the_deadline(
    bot: Bot, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    post = await bot.post()
    monkeypatch.setattr(bot.quiz, "next_problem", _silent)
    with caplog.at_level(logging.ERROR, logger="bot.adapters.discord.failures"):
        token = bot.act.click(bot.client, post, bot.buttons(post)["Start"])
        said = await _answered(bot, token, COULD_NOT)
    assert str(bot.callbacks(token)[0]["type"]) == "5", "acknowledged first, then told"
    assert "try again in a moment" in said
    [record] = [r for r in caplog.records if "button start failed" in r.getMessage()]
    assert record.exc_info is not None, "the log keeps where it was stuck"


async def test_a_slash_command_on_a_silent_database_is_answered_at_the_deadline(
    bot: Bot, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bot.quiz, "leaderboard", _silent)
    token = bot.act.command(bot.client, "leaderboard")
    said = await _answered(bot, token, COULD_NOT)
    assert "thinking" not in said
