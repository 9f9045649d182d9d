"""Drive `rankzero play` through a pseudo-terminal like a person: see the problem, ask a hint, answer.

Also a whole challenge on a seeded database (score, badge, leaderboard) and the `leaderboard` and `close`
commands on it.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import re
import sys
import time
from pathlib import Path

import pexpect
import yaml

from bot.bootstrap import build_app
from bot.cli import CONSOLE_CHANNEL
from bot.config import Settings
from tests.cli import Ran, rankzero


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
        sys.executable, ["-m", "bot.cli", *args], env=env, encoding="utf-8", timeout=120, dimensions=(50, 100)
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


ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")

#: The 5-question test bank: (token, difficulty, correct index). One question per ramp slot, so today's
#: challenge holds exactly these; the correct answer sits at a different letter in each.
E2E_BANK = [
    ("alpha", "intermediate", 0),
    ("bravo", "intermediate", 2),
    ("charlie", "advanced", 1),
    ("delta", "advanced", 3),
    ("echo", "expert", 2),
]
#: One top-level topic per question (the schema accepts only the taxonomy's topics).
E2E_TOPIC = {
    "alpha": "DDP",
    "bravo": "Collectives",
    "charlie": "Checkpointing",
    "delta": "Data loading",
    "echo": "Mixed precision",
}
#: 1.2 x base for an instant answer: 2 x 120 + 2 x 180 + 240.
MAX_POINTS = 840


def _write_bank(path: Path) -> None:
    questions = [
        {
            "id": f"e2e-{token}",
            "kind": "conceptual",
            "topic": E2E_TOPIC[token],
            "difficulty": level,
            "prompt": f"Which option is marked {token}?",
            "explanation": f"The {token} option is the marked one.",
            "choices": [
                {"text": f"{token} option {i}" + (" (marked)" if i == right else ""), "correct": i == right}
                for i in range(4)
            ],
        }
        for token, level, right in E2E_BANK
    ]
    path.write_text(yaml.safe_dump({"questions": questions}, sort_keys=False), encoding="utf-8")


def _cli(tmp_path: Path, *args: str) -> Ran:
    """A command that is not interactive, in-process (``play`` itself runs in a real terminal above)."""
    env = {"HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "data"), "COLUMNS": "120"}
    return rankzero(*args, env={**env, "RANKZERO_DATABASE_URL": None})


def _open_today_from_the_test_bank(url: str) -> list[str]:
    """Open today's console challenge before `play` syncs the shipped bank, so it holds the test bank."""
    now = dt.datetime.now(dt.UTC)
    to_midnight = (dt.datetime.combine(now.date(), dt.time(), dt.UTC) + dt.timedelta(days=1) - now).seconds
    if to_midnight < 300:  # the console channel's day is UTC: do not open it just before it rolls over
        time.sleep(to_midnight + 1)

    async def main() -> list[str]:
        app = await build_app(Settings(database_url=url))
        try:
            challenge, _ = await app.service.open_challenge(CONSOLE_CHANNEL)
            return [p.question.id for p in challenge.problems]
        finally:
            await app.close()

    return asyncio.run(main())


def test_play_a_whole_challenge_then_leaderboard_and_close(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'e2e.db'}"
    bank = tmp_path / "e2e.yaml"
    _write_bank(bank)
    imported = _cli(tmp_path, "--db", url, "questions", "import", str(bank))
    assert imported.returncode == 0 and "imported: 5 new" in imported.stdout, imported.stderr
    assert sorted(_open_today_from_the_test_bank(url)) == sorted(f"e2e-{t}" for t, _, _ in E2E_BANK)

    child = _spawn(tmp_path, "--db", url, "play", "--player", "Tess")
    tokens = [token for token, _, _ in E2E_BANK]
    right = {token: "ABCD"[index] for token, _, index in E2E_BANK}
    earned = 0
    for n in range(1, 6):
        child.expect(f"Problem {n}/5")
        child.expect(r"Which option is marked (" + "|".join(tokens) + r")\?")
        token = child.match.group(1)
        child.expect("Attempts: 2 left")
        child.send(right[token].lower())
        child.expect(r"Correct! \+(\d+) points")
        earned += int(child.match.group(1))
        child.expect(f"Correct answer: {right[token]}")
        tokens.remove(token)
        if n < 5:
            child.expect("Press any key for the next problem")
            child.send(" ")
    assert not tokens, "every question of the test bank was asked once"
    child.expect(r"Score: (\d+) points · 5/5 correct")
    score = int(child.match.group(1))
    assert score == earned and 0.5 * MAX_POINTS < score <= MAX_POINTS
    child.expect("Badge earned: Multi-GPU Master")
    child.expect("Leaderboard · this channel · today")
    child.expect(pexpect.EOF)
    table = ANSI.sub("", child.before)  # the player's own row is bold
    assert re.search(rf"1 │ Tess\s+│\s+{score} │\s+5 │", table), table
    child.close()
    assert child.exitstatus == 0

    board = _cli(tmp_path, "--db", url, "leaderboard", "--player", "Tess")
    assert board.returncode == 0, board.stderr
    assert "Leaderboard · this channel · all time" in board.stdout
    assert re.search(rf"1 │ Tess\s+│\s+{score} │\s+5 │", board.stdout), board.stdout
    outsider = _cli(tmp_path, "--db", url, "leaderboard", "--period", "week", "--player", "Newcomer")
    assert outsider.returncode == 0 and "Tess" in outsider.stdout and "Newcomer" not in outsider.stdout

    closed = _cli(tmp_path, "--db", url, "close")
    assert closed.returncode == 0, closed.stderr
    assert "Results ·" in closed.stdout and "Winners: Tess" in closed.stdout
    assert "Tess earned Multi-GPU Master" in closed.stdout
    for token, _, index in E2E_BANK:
        letter = "ABCD"[index]
        row = rf"{re.escape(E2E_TOPIC[token])}\s+│ {letter}\s+│ [A-D:0 ]*{letter}:1[A-D:0 ]*│\s+1/1 │"
        assert re.search(row, closed.stdout), closed.stdout
    again = _cli(tmp_path, "--db", url, "close")
    assert again.returncode == 0 and "Already closed." in again.stdout
