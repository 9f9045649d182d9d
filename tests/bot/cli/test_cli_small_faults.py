"""Small faults of the command line (issue 25, section 5): a bank path that never ends, and a half Slack
configuration.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from bot.cli import main
from questions.reading import MAX_FILE_BYTES


def _limit_memory() -> None:
    # 1 GiB of address space: reading /dev/zero without a bound fails here (MemoryError) instead of
    # taking the machine's memory; a bounded read needs MAX_FILE_BYTES.
    limit = 1024 * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def test_validate_of_an_endless_device_reads_a_bounded_amount_and_says_why() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bot.cli", "questions", "validate", "/dev/zero"],
        capture_output=True,
        text=True,
        preexec_fn=_limit_memory,
    )
    assert done.returncode == 1, done.stderr
    assert f"/dev/zero:1: (file): more than {MAX_FILE_BYTES} bytes (the limit per bank file)" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("variables", "lacking"),
    [
        ({"RANKZERO_SLACK_BOT_TOKEN": "xoxb-1"}, "RANKZERO_SLACK_SIGNING_SECRET (HTTP mode) or"),
        ({"RANKZERO_SLACK_APP_TOKEN": "xapp-1"}, "also needs RANKZERO_SLACK_BOT_TOKEN"),
        ({"RANKZERO_SLACK_SIGNING_SECRET": "s3cret"}, "also needs RANKZERO_SLACK_BOT_TOKEN"),
        # With Discord configured, the half Slack configuration was silently left out.
        (
            {"RANKZERO_DISCORD_TOKEN": "d.i.s", "RANKZERO_SLACK_BOT_TOKEN": "xoxb-1"},
            "RANKZERO_SLACK_SIGNING_SECRET (HTTP mode) or",
        ),
    ],
)
def test_a_half_slack_configuration_is_named_not_called_missing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, variables: dict[str, str], lacking: str
) -> None:
    for name in [n for n in os.environ if n.startswith("RANKZERO_")]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)  # no .env or rankzero.toml of the checkout
    result = CliRunner().invoke(main, ["serve"], env=variables)
    assert result.exit_code == 2, result.output
    assert "Slack is half configured" in result.output and lacking in result.output
    assert "no chat platform is configured" not in result.output
    for secret in variables.values():
        assert secret not in result.output  # names, never values
