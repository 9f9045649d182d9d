"""200 players press Start in the same second on Slack (issue 25 §3), through signed HTTP into the Bolt
app against the strict fake's rate tiers, trigger expiry and response_url limits (tests/slack_rush.py).
The counts are asserted; the times are the benchmark's (benchmarks/slack_rush.py), never a test's.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bot.adapters.slack.budget import RequestBudget
from bot.core.models import Actor, PlayerRef
from tests.bot.adapters.slack.test_slack_adapter import PLAYER, _harness, buttons, text_of
from tests.conftest import test_bank
from tests.slack_rush import run_rush

RUSH = 200


@pytest.mark.slow
async def test_a_rush_of_200_starts_shows_every_problem_and_starts_no_clock_early(
    tmp_path: Path, sqlite_template: Path
) -> None:
    db = tmp_path / "rush.db"
    shutil.copy(sqlite_template, db)
    figures = await run_rush(RUSH, db)
    print("\nSLACK RUSH", figures.as_json())
    assert figures.shown == RUSH, figures
    assert figures.press_again == 0 and figures.errors == 0, figures
    # Most of the rush plays in private messages: modals are what the workspace's budget could open.
    assert figures.in_messages > 0 and figures.in_modals + figures.in_messages == RUSH, figures
    # Every player's clock started, and none before their problem was on screen.
    assert figures.clocks_started == RUSH and figures.clocks_started_before_shown == 0, figures
    # Late acks are a matter of the machine's speed (the senders and the fake share its CPU here): the
    # benchmark prints them; a test asserts no time.


async def test_a_budget_of_one_sends_the_second_player_to_a_private_message(
    tmp_path: Path, sqlite_template: Path
) -> None:
    # The budget is a setting: with a burst of 2 (keep 1 for answers), one modal, then messages.
    db = tmp_path / "rush.db"
    shutil.copy(sqlite_template, db)
    figures = await run_rush(3, db, per_minute=1, burst=2)
    assert figures.shown == 3 and figures.in_modals <= 1 and figures.in_messages >= 2, figures
    assert figures.clocks_started_before_shown == 0 and figures.rate_limited == 0, figures


async def test_a_player_in_a_private_message_answers_there_and_is_told_when_time_is_up(
    tmp_path: Path, sqlite_template: Path
) -> None:
    # A budget of one call at once never keeps one spare: every Start plays in a private message.
    async for h in _harness(tmp_path, sqlite_template, test_bank(), slack_tier4_burst=1):
        challenge_id = await h.post_challenge()
        await h.send.click(PLAYER, f"rz:start:{challenge_id}")
        shown = (await h.api.wait_for("response", 2))[-1]
        assert shown.args["_user"] == PLAYER and "Problem 1 of" in shown.dump()
        assert not h.api.of("views.open")  # no modal, no trigger needed
        (message,) = h.api.ephemeral[PLAYER]
        await h.clock_started(PLAYER, {"blocks": message.blocks})
        pid = int(buttons({"blocks": message.blocks})[0].split(":")[2])

        await h.send.click(PLAYER, f"rz:answer:{pid}:B", message_ts=message.ts)
        await h.api.wait_for("response", 3)
        (message,) = h.api.ephemeral[PLAYER]  # replaced, not a second message
        assert "Not quite: 1 attempt left" in text_of({"blocks": message.blocks})

        h.clock.advance(121)  # the timer tells the player through the latest click's response_url
        await h.api.wait_for("response", 4)
        (message,) = h.api.ephemeral[PLAYER]
        assert "Time is up" in text_of({"blocks": message.blocks})
        card = await h.services.quiz.view_problem(Actor(PlayerRef("slack", PLAYER, "Pat")), pid)
        assert card.over


async def test_the_request_budget_spends_a_burst_then_queues_in_order() -> None:
    now = [0.0]
    budget = RequestBudget(per_minute=60, burst=2, clock=lambda: now[0])
    assert budget.try_take("T1", "views.open") and budget.try_take("T1", "views.open")
    assert not budget.try_take("T1", "views.open")  # the burst is spent
    assert budget.try_take("T2", "views.open")  # another workspace has its own budget
    assert budget.try_take("T1", "views.update", keep=1)  # and each method its own
    assert not budget.try_take("T1", "views.update", keep=1)  # keeping one back for others
    now[0] += 1.0  # one call a second comes back
    assert budget.try_take("T1", "views.open") and not budget.try_take("T1", "views.open")
    with pytest.raises(ValueError, match="RANKZERO_SLACK_TIER4_PER_MINUTE"):
        RequestBudget(per_minute=0)
