"""Disputing what the console shows: ``today:N`` or the question's id, with progress while the runner works.

The CLI half runs ``rankzero dispute`` as a real process against a real runner (tests/runner_server.py);
the game half plays a console game and checks that each problem's end names what ``dispute`` accepts.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from bot.adapters.console.play import ConsoleGame, KeyReader
from bot.bootstrap import build_app
from bot.cli import CONSOLE_CHANNEL
from bot.config import Settings
from bot.core.service import QuizService
from bot.storage.db import make_engine
from bot.storage.uow import SqlUnitOfWork, session_factory
from tests.bot.cli.test_dispute_cli import SPEC, rankzero
from tests.conftest import ADMIN, CHANNEL, actor, make_spec
from tests.fakes import FakePlatform, FrozenClock
from tests.runner_server import RunnerServer

pytestmark = pytest.mark.slow


async def test_dispute_accepts_today_n_and_the_question_id_and_shows_progress(
    tmp_path: Path, runner: RunnerServer
) -> None:
    db = f"sqlite+aiosqlite:///{tmp_path / 'rz.db'}"
    app = await build_app(Settings(database_url=db))
    try:
        await app.service.admin_import(ADMIN, [SPEC])
        challenge, _ = await app.service.open_challenge(CONSOLE_CHANNEL)
        await app.service.close_challenge(challenge.id)
    finally:
        await app.close()

    for reference, player in ((["today:1"], "alice"), (["today", "1"], "bob"), (["cli-off-by-one"], "carol")):
        done = rankzero(db, runner, tmp_path, "dispute", *reference, "--player", player)
        assert done.returncode == 0, done.stderr
        assert "contradicted: it printed '9'" in done.stdout, reference
        # Not a terminal: each step is a line (on a terminal, the text of a spinner).
        assert "checking the runner…" in done.stdout
        assert "running 1 rank (python) in the sandbox…" in done.stdout

    beyond = rankzero(db, runner, tmp_path, "dispute", "today:4")
    assert beyond.returncode == 1 and "today's challenge has problems 1 to 1, not 4" in beyond.stderr
    unknown = rankzero(db, runner, tmp_path, "dispute", "ddp-not-today")
    assert unknown.returncode == 1 and "1: cli-off-by-one" in unknown.stderr


async def test_the_end_of_each_problem_names_what_dispute_accepts(db_url: str, clock: FrozenClock) -> None:
    engine = make_engine(db_url)
    factory = session_factory(engine)
    quiz = QuizService(lambda: SqlUnitOfWork(factory), clock, FakePlatform(), problems_per_challenge=1)
    await quiz.admin_import(ADMIN, [make_spec("shown-id", "advanced", "DDP")])
    out = io.StringIO()
    console = Console(file=out, width=160, force_terminal=False)
    game = ConsoleGame(quiz, clock, actor("tess"), CHANNEL, console, KeyReader(io.StringIO("a\n")))
    try:
        assert await game.run() == 0
        challenge, _ = await quiz.open_challenge(CHANNEL)
    finally:
        await engine.dispose()
    text = out.getvalue()
    pid = challenge.problems[0].id
    shown = f"Problem 1 · question shown-id · problem #{pid} · dispute it later: rankzero dispute today:1"
    assert shown in text
