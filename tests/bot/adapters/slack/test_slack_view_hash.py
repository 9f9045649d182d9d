"""views.update always sends the view's hash (issue 25 §5): an update computed from older state is refused
by Slack (``hash_conflict``, as the strict fake answers) instead of overwriting a newer view, and the
adapter handles the refusal: it shows the state read again, or drops the stale update.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.adapters.slack import blocks as bk
from tests.bot.adapters.slack.test_slack_adapter import PLAYER, Harness, _harness, buttons, text_of
from tests.conftest import test_bank


@pytest.fixture
async def slack(tmp_path: Path, sqlite_template: Path) -> AsyncIterator[Harness]:
    async for h in _harness(tmp_path, sqlite_template, test_bank()):
        yield h


async def test_every_problem_update_sends_the_hash_of_the_view_shown(slack: Harness) -> None:
    challenge_id = await slack.post_challenge()
    view_id, view = await slack.start(challenge_id)
    pid = int(buttons(view)[0].split(":")[2])
    await slack.click_in_view(PLAYER, f"rz:answer:{pid}:B", view_id)
    await slack.click_in_view(PLAYER, f"rz:hint:{pid}", view_id)
    updates = slack.api.of("views.update")
    assert len(updates) == 3
    assert all(u.args.get("hash") for u in updates), [u.args.get("hash") for u in updates]


async def test_a_stale_update_is_refused_and_the_fresh_state_is_shown(slack: Harness) -> None:
    challenge_id = await slack.post_challenge()
    view_id, _ = await slack.start(challenge_id)
    ctx = slack.adapter.ctx
    # Another process (or a racing click) changed the modal after our last update: our hash is stale.
    slack.api.show(view_id, bk.message_view("newer state"))
    slack.expected_refusals += [("views.update", "hash_conflict")] * 2

    dropped = await ctx.update_view(view_id, bk.message_view("stale state"))
    assert dropped is False
    assert "newer state" in json.dumps(slack.api.views[view_id].view)  # not overwritten

    async def fresh() -> dict[str, object]:
        return bk.message_view("read again")

    shown = await ctx.update_view(view_id, bk.message_view("stale state"), rerender=fresh)
    assert shown is True
    assert "read again" in text_of(slack.api.views[view_id].view)
    assert ("views.update", "hash_conflict") in slack.api.refused
    # And the next update goes with the hash Slack gave the re-read view: accepted.
    assert await ctx.update_view(view_id, bk.message_view("next"))
    assert slack.api.of("views.update")[-1].args["hash"]
