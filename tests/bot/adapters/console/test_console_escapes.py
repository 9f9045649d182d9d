"""Terminal escape sequences in question text, player names and runner output never reach the terminal raw.

A whole console game (play, answer, dispute on a runner whose output carries escapes, summary,
leaderboard, results) with hostile text everywhere; the rich console writes to a buffer with no styling,
so any ESC, BEL or C1 byte in the output came from the hostile text.
"""

from __future__ import annotations

import io

from rich.console import Console

from bot.adapters.console.play import ConsoleGame, ConsolePlatform, KeyReader
from bot.adapters.console.safe import clean, visible
from bot.core.models import Actor, PlayerRef
from tests.bootstrap import build_test_app
from tests.bot.adapters.console.test_console_dispute import FakeRunner
from tests.conftest import CHANNEL, make_spec
from tests.fakes import FakePlatform, FrozenClock

CLEAR = "\x1b[2J\x1b[H"  # clear the screen, cursor home
TITLE = "\x1b]0;pwned\x07"  # OSC: set the window title
CSI8 = "\x9b31m"  # the one-byte C1 CSI
HOSTILE = f"{CLEAR}{TITLE}{CSI8}\r"


def test_visible_keeps_text_newlines_and_tabs_and_shows_controls() -> None:
    assert visible("a\tb\nc") == "a\tb\nc"
    assert visible(HOSTILE) == "\\x1b[2J\\x1b[H\\x1b]0;pwned\\x07\\x9b31m\\x0d"
    same = ("plain", ["text"])
    assert clean(same) is same, "nothing to change: the same object"


async def test_a_console_game_with_hostile_text_prints_no_control_characters(
    db_url: str, clock: FrozenClock
) -> None:
    platform = FakePlatform()
    runner = FakeRunner(f"second{HOSTILE}\n")
    spec = make_spec(
        "hostile-escapes",
        "advanced",
        f"DDP{HOSTILE}",
        kind="predict_output",
        code=f"print('{HOSTILE}')\n",
        runner={"mode": "python", "nproc": 1, "gpus": 0, "init_process_group": False},
        prompt=f"What does it print?{HOSTILE}",
        hint=f"hint{HOSTILE}",
        explanation=f"because{HOSTILE}",
        choices=[
            {"text": f"first{HOSTILE}", "correct": True, "feedback": f"fb{HOSTILE}"},
            {"text": "second", "correct": False},
        ],
    )
    app = await build_test_app(
        db_url, clock=clock, platform=platform, runner=runner, bank=[spec], problems_per_challenge=1
    )
    quiz = app.service
    out = io.StringIO()
    console = Console(file=out, width=120, force_terminal=False, color_system=None)
    # In the channel's tenant: for a player of another tenant the problem does not exist.
    player = Actor(PlayerRef(CHANNEL.platform, "mallory", f"Mallory{HOSTILE}"), tenant=CHANNEL.tenant)
    keys = KeyReader(io.StringIO("h\na\nd\n"))  # hint, answer A, dispute
    game = ConsoleGame(quiz, clock, player, CHANNEL, console, keys, app.disputes)
    try:
        assert await game.run() == 0
        challenge, _ = await quiz.open_challenge(CHANNEL)
        await quiz.close_challenge(challenge.id)
        shown = ConsolePlatform(console)
        for channel, card, ref in platform.results:
            await shown.post_results(channel, card, ref)
    finally:
        await app.close()
    text = out.getvalue()
    assert runner.specs, "the dispute ran"
    assert "What does it print?" in text and "Mallory" in text and "first" in text
    for raw in ("\x1b", "\x07", "\x9b", "\r"):
        assert raw not in text, f"{raw!r} reached the terminal"
    assert "\\x1b[2J" in text, "shown as a visible escape"
