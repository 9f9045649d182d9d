"""``/rankzero web`` on Slack (issue 30 §3): any member gets, privately, a signed link to the channel's
read-only page, which opens that channel of that workspace; with the page off, the reply says how an
operator turns it on.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from pydantic import SecretStr

from tests.bot.adapters.slack.test_slack_adapter import PLAYER, _harness
from tests.conftest import test_bank
from tests.slack_fake import TEAM

WEB = {
    "web_secret": SecretStr("a-web-secret-of-at-least-thirty-two-characters"),
    "public_url": "https://rz.example.org",
}


async def test_a_member_gets_a_private_link_to_this_channel(tmp_path: Path, sqlite_template: Path) -> None:
    async for slack in _harness(tmp_path, sqlite_template, test_bank(), **WEB):
        await slack.send.command(PLAYER, "web", channel="C7")
        reply = (await slack.api.wait_for("response"))[-1]
        assert reply.args["response_type"] == "ephemeral"
        found = re.search(r"https://rz\.example\.org/web/([A-Za-z0-9_.-]+)", json.dumps(reply.args))
        assert found is not None, reply.dump()
        links = slack.services.web_links
        assert links is not None
        target = links.check(found.group(1))
        assert (target.platform, target.workspace_id, target.channel_id) == ("slack", TEAM, "C7")
        await slack.send.command(PLAYER, "web now")
        refused = (await slack.api.wait_for("response", 2))[-1]
        assert "usage: /rankzero web" in refused.dump()


async def test_without_a_secret_the_reply_says_how_to_turn_it_on(
    tmp_path: Path, sqlite_template: Path
) -> None:
    async for slack in _harness(tmp_path, sqlite_template, test_bank()):
        assert slack.services.web_links is None
        await slack.send.command(PLAYER, "web")
        reply = (await slack.api.wait_for("response"))[-1]
        assert "RANKZERO_WEB_SECRET" in reply.dump() and "/web/" not in reply.dump()
