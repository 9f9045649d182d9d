"""The Slack "Explanation" button's action id is matched strictly: ASCII digits only, the whole id."""

from __future__ import annotations

import pytest

from bot.adapters.slack.listeners.reports import MISS_ACTION


@pytest.mark.parametrize(
    "action_id", ["rz:miss:١٢٣", "rz:miss:12\n", "rz:miss:", "rz:miss:1234567890123456789", "xrz:miss:1"]
)
def test_a_malformed_action_id_does_not_match(action_id: str) -> None:
    """Non-ASCII digits (which ``\\d`` takes), a trailing newline (which ``$`` lets in), too many digits."""
    assert MISS_ACTION.fullmatch(action_id) is None


def test_an_action_id_gives_its_problem_id() -> None:
    """Up to 18 ASCII digits."""
    hit = MISS_ACTION.fullmatch("rz:miss:999999999999999999")
    assert hit is not None and int(hit[1]) == 999999999999999999
