"""One Slack workspace is one tenant whatever the payload (security review of issue 24, finding 3): in
single-token mode on Enterprise Grid, a slash command says ``enterprise_id``, a click ``enterprise.id``
and a modal ``team.enterprise_id``; each must key as ``E.../T...``, the key the allow-list checks.
"""

from __future__ import annotations

import json
import urllib.parse
from typing import Any

import pytest
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.web.async_client import AsyncWebClient

from bot.adapters.slack.app import workspace_of
from bot.adapters.slack.budget import RequestBudget
from bot.adapters.slack.context import SlackContext

ORG, TEAM = "E0ORG", "T0TEAM"


def slash_command(grid: bool, org_wide: bool = False) -> dict[str, Any]:
    """The form fields of a slash command, as Slack posts them (form-encoded, all strings)."""
    return {
        "token": "t",
        "team_id": TEAM,
        "team_domain": "acme",
        **({"enterprise_id": ORG, "enterprise_name": "Acme"} if grid else {}),
        "channel_id": "C1",
        "channel_name": "quiz",
        "user_id": "U1",
        "user_name": "ann",
        "command": "/rankzero",
        "text": "help",
        "api_app_id": "A1",
        "is_enterprise_install": "true" if org_wide else "false",
        "response_url": "https://hooks.slack.com/commands/x",
        "trigger_id": "1.2.3",
    }


def block_actions(grid: bool, org_wide: bool = False) -> dict[str, Any]:
    """A click on a button of a channel post."""
    team = {
        "id": TEAM,
        "domain": "acme",
        **({"enterprise_id": ORG, "enterprise_name": "Acme"} if grid else {}),
    }
    return {
        "type": "block_actions",
        "user": {"id": "U1", "username": "ann", "name": "ann", "team_id": TEAM},
        "api_app_id": "A1",
        "token": "t",
        "container": {"type": "message", "message_ts": "1.1", "channel_id": "C1", "is_ephemeral": False},
        "trigger_id": "1.2.3",
        "team": None if org_wide else team,
        "enterprise": {"id": ORG, "name": "Acme"} if grid else None,
        "is_enterprise_install": org_wide,
        "channel": {"id": "C1", "name": "quiz"},
        "actions": [{"type": "button", "action_id": "rz:start:1", "block_id": "b", "action_ts": "1.3"}],
    }


def view_submission(grid: bool, with_enterprise: bool = True, org_wide: bool = False) -> dict[str, Any]:
    """A modal's submission: the org can be both in ``enterprise`` and in ``team.enterprise_id``, or
    (``with_enterprise`` False) in the team only.
    """
    team = {
        "id": TEAM,
        "domain": "acme",
        **({"enterprise_id": ORG, "enterprise_name": "Acme"} if grid else {}),
    }
    return {
        "type": "view_submission",
        "team": None if org_wide else team,
        "user": {"id": "U1", "username": "ann", "name": "ann", "team_id": TEAM},
        "api_app_id": "A1",
        "token": "t",
        "trigger_id": "1.2.3",
        "view": {
            "id": "V1",
            "team_id": TEAM,
            "type": "modal",
            "callback_id": "rz_question",
            "state": {"values": {}},
            "private_metadata": "",
            "app_installed_team_id": TEAM,
        },
        **({"enterprise": {"id": ORG, "name": "Acme"} if grid else None} if with_enterprise else {}),
        "is_enterprise_install": org_wide,
    }


def bolt_key(body: dict[str, Any], form: bool) -> str:
    """The key Bolt's request context gives the same payload (the allow-list middleware checks it)."""
    raw = urllib.parse.urlencode(body if form else {"payload": json.dumps(body)})
    req = AsyncBoltRequest(body=raw, headers={"content-type": ["application/x-www-form-urlencoded"]})
    return workspace_of(req.context).key


@pytest.mark.parametrize(
    ("grid", "expected"), [(True, f"{ORG}/{TEAM}"), (False, TEAM)], ids=["grid-team", "plain-workspace"]
)
def test_every_payload_shape_keys_the_same_tenant(grid: bool, expected: str) -> None:
    ctx = SlackContext(AsyncWebClient(token="xoxb-test"))
    shapes: dict[str, tuple[dict[str, Any], bool]] = {
        "slash command": (slash_command(grid), True),
        "block_actions": (block_actions(grid), False),
        "view_submission": (view_submission(grid), False),
        "view_submission, org in team only": (view_submission(grid, with_enterprise=False), False),
    }
    keys = {name: ctx.workspace_id(body) for name, (body, _) in shapes.items()}
    assert keys == dict.fromkeys(shapes, expected)
    assert {name: bolt_key(body, form) for name, (body, form) in shapes.items()} == keys


def test_an_org_wide_install_is_its_org_for_every_payload() -> None:
    ctx = SlackContext(AsyncWebClient(token="xoxb-test"))
    bodies = [slash_command(True, org_wide=True), block_actions(True, org_wide=True)]
    bodies.append(view_submission(True, org_wide=True))
    assert [ctx.workspace_id(b) for b in bodies] == [ORG, ORG, ORG]


async def test_a_player_clicking_on_while_the_budget_is_spent_queues_one_lookup() -> None:
    # users.info's budget spent: every click still gets an answer at once (the payload's name), and the
    # display-name lookup behind the budget is queued once per player, not once per click.
    ctx = SlackContext(AsyncWebClient(token="xoxb-test"))
    ctx.budget = RequestBudget(per_minute=1, burst=1)
    assert ctx.budget.try_take(ctx.workspace_key(), "users.info")  # the burst is spent
    body = block_actions(False)
    try:
        for _ in range(50):
            actor = await ctx.player_actor(body)
            assert actor.player.user_id == "U1" and not actor.is_admin
        assert len(ctx._lookups) == 1
        other = {**body, "user": {**body["user"], "id": "U2"}}
        await ctx.player_actor(other)
        assert len(ctx._lookups) == 2
    finally:
        await ctx.stop_timers()
