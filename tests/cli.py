"""The ``rankzero`` CLI run in-process, for the tests that check what a command does rather than the
process around it (a fresh interpreter costs 1-3 s per call on the 2-core machine; Click's runner a few
milliseconds). Tests of the process itself (signals, ``serve``, exit on a broken install, what a fresh
interpreter imports) keep running ``rankzero`` as a subprocess.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from click.testing import CliRunner

from bot.cli import main


@dataclass(frozen=True)
class Ran:
    """What a command left behind, named as ``subprocess.CompletedProcess`` names it."""

    returncode: int
    stdout: str
    stderr: str


def rankzero(*args: str, env: Mapping[str, str | None] | None = None, input: str | None = None) -> Ran:
    """Run ``rankzero *args`` in this process; ``env`` sets (a string) or removes (None) variables for the
    call only. An exception the CLI does not turn into an exit status fails the test with its traceback
    (a subprocess would have printed it and exited 1).
    """
    result = CliRunner().invoke(main, list(args), env=env, input=input, catch_exceptions=False)
    return Ran(result.exit_code, result.stdout, result.stderr)
