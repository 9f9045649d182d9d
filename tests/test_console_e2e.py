"""Drive `rankzero play` through a pseudo-terminal like a person: see the problem, ask a hint, answer."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pexpect


def _spawn(tmp_path: Path, *args: str) -> pexpect.spawn:
    env = dict(
        os.environ,
        TERM="xterm-256color",
        COLUMNS="100",
        LINES="50",
        HOME=str(tmp_path),
        XDG_DATA_HOME=str(tmp_path / "data"),
    )
    env.pop("RANKZERO_DATABASE_URL", None)
    return pexpect.spawn(
        sys.executable, ["-m", "bot.cli", *args], env=env, encoding="utf-8", timeout=60, dimensions=(50, 100)
    )


def test_play_a_problem_in_the_terminal(tmp_path: Path) -> None:
    child = _spawn(tmp_path, "play", "--player", "Tess")
    child.expect("Multi-GPU challenge")  # the challenge header
    child.expect("Problem 1/5")
    child.expect(r"Attempts: 2 left")
    child.expect(r"[01]:\d\d remaining")  # the live countdown
    child.send("h")
    child.expect("Hint")
    child.send("a")
    index = child.expect([r"Correct! \+\d+ points", r"Not quite: 1 attempt left"])
    if index == 1:
        child.expect("Attempts: 1 left")
        child.send("b")
        child.expect([r"Correct!", r"Wrong: the answer was [A-F]"])
    child.expect("Correct answer: [A-F]")  # the explanation panel, once the problem is over
    child.expect("Press any key for the next problem")
    child.send("q")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    # The attempt was stored: the same database shows it in the player's stats.
    stats = _spawn(tmp_path, "stats", "--player", "Tess")
    stats.expect(r"solved [01]/1")
    stats.expect(pexpect.EOF)
    assert (tmp_path / "data" / "rankzero" / "rankzero.db").exists()
