"""200 players press Start in the same second on Slack (issue 25 §3), through signed HTTP into the Bolt
app against the strict fake's rate tiers, trigger expiry and response_url limits (tests/slack_rush.py).
The counts are asserted; the times are the benchmark's (benchmarks/slack_rush.py), never a test's.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

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
    assert figures.late_acks == 0, figures


async def test_a_budget_of_one_sends_the_second_player_to_a_private_message(
    tmp_path: Path, sqlite_template: Path
) -> None:
    # The budget is a setting: with a burst of 2 (keep 1 for answers), one modal, then messages.
    db = tmp_path / "rush.db"
    shutil.copy(sqlite_template, db)
    figures = await run_rush(3, db, per_minute=1, burst=2)
    assert figures.shown == 3 and figures.in_modals <= 1 and figures.in_messages >= 2, figures
    assert figures.clocks_started_before_shown == 0 and figures.rate_limited == 0, figures
