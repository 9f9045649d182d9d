"""The CLI imports per command: ``rankzero --help`` loads none of the heavy libraries.

(How fast that makes it is measured in benchmarks/cli_startup.py, not here.)
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from bot.cli import main
from bot.cli.root import _LAZY_MAIN, _LAZY_QUESTIONS

ROOT = Path(__file__).resolve().parents[3]
HEAVY = (
    "sqlalchemy",
    "pydantic",
    "pydantic_settings",
    "rich",
    "yaml",
    "discord",
    "slack_bolt",
    "httpx",
    "asyncio",
    "matplotlib",  # the stats chart (issue 30): imported when a chart is drawn
)


# (A subcommand's --help runs the group's callback, which reads the settings: pydantic is loaded then.)
@pytest.mark.parametrize("argv", [["--help"], ["no-such-command"]])
def test_help_and_a_typo_import_no_heavy_library(argv: list[str]) -> None:
    script = (
        "import sys\nfrom bot.cli import main\n"
        f"try:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stdout + done.stderr


def test_help_lists_every_command_with_its_own_short_help() -> None:
    listed = CliRunner().invoke(main, ["--help"]).output
    for name in ("play", "serve", "schedule", "dispute", "questions", "db"):
        assert f"  {name} " in listed
    for lazy, group in ((_LAZY_MAIN, "main"), (_LAZY_QUESTIONS, "questions")):
        for name, (module, attribute, summary) in lazy.items():
            command = getattr(importlib.import_module(module), attribute)
            assert isinstance(command, click.Command), f"{group} {name}"
            first = (command.help or "").split("\n\n")[0].replace("\n", " ").strip()
            assert summary == first, f"the stored short help of {group} {name} is stale"


def test_a_lazy_command_runs() -> None:
    result = CliRunner().invoke(main, ["schedule", "--help"])
    assert result.exit_code == 0 and "--channel" not in result.output and "set" in result.output


def test_questions_validate_without_a_path_validates_the_shipped_bank() -> None:
    result = CliRunner().invoke(main, ["questions", "validate"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("ok: ") and "questions valid" in result.output
