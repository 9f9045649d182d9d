"""``/web`` on Discord (issue 30 §3): any member gets a private (ephemeral) link to this channel's page,
which opens this channel of this server; with the page off, the reply says how to turn it on.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator

import pytest

from bot.core.web_links import WebLinks
from tests.discord_env import Bot
from tests.discord_fake import CHANNEL_ID, GUILD_ID, no_unexpected_rejections

EPHEMERAL = 1 << 6


@pytest.fixture(autouse=True)
def _strict_discord(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    no_unexpected_rejections(request)


def _replies(bot: Bot, token: str) -> list[dict[str, object]]:
    return bot.followups(token)


async def test_web_replies_privately_with_this_channels_link(bot: Bot) -> None:
    links = WebLinks(
        "a-web-secret-of-at-least-thirty-two-characters",
        "https://rz.example.org",
        dt.timedelta(days=7),
        bot.clock,
    )
    assert bot.adapter.commands is not None
    bot.adapter.commands.web_links = links
    token = bot.act.command(bot.client, "web")
    await bot.fake.wait_for(lambda: bot.followups(token))
    [reply] = _replies(bot, token)
    assert int(str(reply.get("flags") or 0)) & EPHEMERAL
    # Wrapped in <...>: Discord shows no preview, so it never fetches the page.
    found = re.search(r"<https://rz\.example\.org/web/([A-Za-z0-9_.-]+)>", str(reply["content"]))
    assert found is not None, reply
    target = links.check(found.group(1))
    assert (target.platform, target.workspace_id, target.channel_id) == (
        "discord",
        str(GUILD_ID),
        str(CHANNEL_ID),
    )


async def test_web_off_says_how_to_turn_it_on(bot: Bot) -> None:
    # What serve wires: the services' signer, None without RANKZERO_WEB_SECRET.
    assert bot.adapter.commands is not None
    assert bot.services.web_links is None and bot.adapter.commands.web_links is None
    token = bot.act.command(bot.client, "web")
    await bot.fake.wait_for(lambda: bot.followups(token))
    content = " ".join(str(r.get("content")) for r in _replies(bot, token))
    assert "RANKZERO_WEB_SECRET" in content and "/web/" not in content
