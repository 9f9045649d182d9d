"""Issue 24, section 3: one HTTP session (one connection pool) per process for Slack's Web API: Bolt's
per-request clients, posts (single token and OAuth workspaces' tokens) and response_url replies reuse its
connections instead of opening one per call. The strict fake records the TCP connection of every call.
"""

from __future__ import annotations

from tests.bot.adapters.slack.test_slack_adapter import OWNER, PLAYER, Harness
from tests.bot.adapters.slack.test_slack_oauth import ALPHA, BETA
from tests.bot.adapters.slack.test_slack_oauth import Harness as OAuthHarness
from tests.bot.adapters.slack.test_slack_oauth import oauth as oauth


async def test_web_api_calls_share_one_session(slack: Harness) -> None:
    challenge = await slack.post_challenge()  # auth.test, users.info, conversations.info, chat.postMessage
    await slack.start(challenge)  # views.open, views.update
    for n in range(1, 4):  # response_url replies too
        assert (await slack.send.command(PLAYER, "help")).status_code == 200
        await slack.api.wait_for("response", n)
    calls = len(slack.api.calls)
    assert calls >= 8
    # Sequential calls reuse one kept-alive connection; a call made while another is in flight may open
    # a second one. A session per call would make one connection per call.
    assert len(slack.api.connections) <= 2, (len(slack.api.connections), calls)


async def test_workspace_clients_share_the_session_too(oauth: OAuthHarness) -> None:
    for team in (ALPHA, BETA):
        assert (await oauth.install(team)).status_code == 200
    before = set(oauth.api.connections)
    for team, channel in ((ALPHA, "CA1"), (BETA, "CB1")):
        await oauth.post_now(oauth.sender(team), channel)  # each with its workspace's token
    new = oauth.api.connections - before
    assert len(oauth.api.calls) >= 4 and len(new) <= 1, new
    assert OWNER
