"""Player names: ``--player`` is checked (stripped, bounded, no control characters) on every console
command, and names from Discord and Slack are bounded and cleaned the same way before they are stored.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import discord
import pytest
from click.testing import CliRunner

from bot.adapters.discord.play import actor_of
from bot.adapters.slack.context import SlackContext
from bot.cli import main
from bot.cli._common import console_player
from bot.core.models import MAX_PLAYER_NAME, bounded_display_name, player_name_problem

#: Every command with a --player option (arguments that get it past Click's own parsing).
COMMANDS = [
    ["play"],
    ["leaderboard"],
    ["stats"],
    ["quiz"],
    ["review"],
    ["explain"],
    ["dispute", "today:1"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("   ", "cannot be empty or only spaces"),
        ("x" * 100_000, f"at most {MAX_PLAYER_NAME} characters, this one has 100000"),
        ("eve\x1b[2J", "control or text-direction characters (U+001B at position 4)"),
        ("eve\nalice 9999 pts", "(U+000A at position 4)"),
        ("\u202eevil", "(U+202E at position 1)"),
    ],
    ids=["blank", "huge", "escape", "newline", "bidi"],
)
def test_a_bad_player_name_is_a_usage_error_on_every_command(
    tmp_path: Path, command: list[str], name: str, why: str
) -> None:
    db = f"sqlite+aiosqlite:///{tmp_path / 'rz.db'}"
    result = CliRunner().invoke(main, ["--db", db, *command, "--player", name])
    assert result.exit_code == 2, result.output
    assert "Invalid value for '--player'" in result.output and why in result.output
    if name.strip():  # a 100,000-character or hostile name is not echoed back
        assert name not in result.output
    assert not (tmp_path / "rz.db").exists()  # refused before anything ran


def test_a_good_name_is_stripped_and_kept() -> None:
    assert player_name_problem("  Ada Lovelace ") is None
    assert player_name_problem("x" * MAX_PLAYER_NAME) is None
    ref = console_player("  Ada Lovelace ")
    assert ref.display_name == "Ada Lovelace" and ref.user_id == "ada lovelace"


def test_the_login_name_default_is_made_safe_not_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("getpass.getuser", lambda: "  bob\x1b[2J" + "o" * 200)
    ref = console_player(None)
    assert "\x1b" not in ref.display_name and len(ref.display_name) == MAX_PLAYER_NAME


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("x" * 500, "x" * (MAX_PLAYER_NAME - 1) + "…"),
        ("  Ada\n\x1b[31mLovelace\u202e ", "Ada [31mLovelace"),
        ("\x00\x1b ", "U123"),  # nothing left: the user id
    ],
)
def test_platform_names_are_bounded_and_cleaned_the_same_way(raw: str, shown: str) -> None:
    assert bounded_display_name(raw, "U123") == shown
    # Slack: from a payload's user object, or an id and a users.info name.
    assert SlackContext.player({"id": "U123", "name": raw}).display_name == shown
    assert SlackContext.player("U123", raw).display_name == shown
    # Discord: the member behind an interaction.
    user = SimpleNamespace(id=123, display_name=raw, roles=())
    interaction = SimpleNamespace(user=user, permissions=discord.Permissions.none(), guild_id=42)
    fallback = bounded_display_name(raw, "123")
    assert actor_of(interaction).player.display_name == fallback  # type: ignore[arg-type]
    assert len(fallback) <= MAX_PLAYER_NAME
