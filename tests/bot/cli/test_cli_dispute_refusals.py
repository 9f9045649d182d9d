"""``rankzero dispute`` refuses what cannot run before it starts or wakes a runner."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import NoReturn

import pytest

from bot.bootstrap import build_app
from bot.cli import CONSOLE_CHANNEL
from bot.cli.dispute import dispute_with_progress
from bot.config import Settings
from bot.core.errors import NotFoundError, TooEarlyError
from bot.core.verdicts import RunnerHealth, RunSpec
from tests.cli import rankzero
from tests.conftest import ADMIN, actor, make_spec


class UntouchableRunner:
    """A runner that fails the test when it is used at all (health or run)."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def health(self) -> RunnerHealth:
        """Recorded: a refused dispute must not reach the runner."""
        self.calls.append("health")
        raise AssertionError("the runner was asked for its health")

    async def run(self, spec: RunSpec) -> NoReturn:
        """Recorded: a refused dispute must not run anything."""
        self.calls.append("run")
        raise AssertionError(f"the runner was asked to run {spec}")

    async def aclose(self) -> None:
        """Nothing to release."""


async def _closed_challenge(db: str, *, close: bool = True) -> int:
    """Today's console challenge of one conceptual question (no code); its problem id."""
    app = await build_app(Settings(database_url=db))
    try:
        await app.service.admin_import(ADMIN, [make_spec("no-code-here", "advanced", "DDP")])
        challenge, _ = await app.service.open_challenge(CONSOLE_CHANNEL)
        if close:
            await app.service.close_challenge(challenge.id)
    finally:
        await app.close()
    return challenge.problems[0].id


@pytest.mark.parametrize(
    ("close", "error", "why"),
    [(True, NotFoundError, "has no runnable code"), (False, TooEarlyError, "once it is over for you")],
)
async def test_a_dispute_that_cannot_run_is_refused_without_the_runner(
    tmp_path: Path, close: bool, error: type[Exception], why: str
) -> None:
    db = f"sqlite+aiosqlite:///{tmp_path / 'rz.db'}"
    problem_id = await _closed_challenge(db, close=close)
    runner = UntouchableRunner()
    app = await build_app(Settings(database_url=db), runner=runner)
    steps: list[str] = []
    try:
        with pytest.raises(error, match=why):
            await dispute_with_progress(app, actor("alice", CONSOLE_CHANNEL), problem_id, None, steps.append)
    finally:
        await app.close()
    assert runner.calls == [] and steps == []


async def test_the_cli_says_there_is_nothing_to_run_without_starting_a_sandbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = f"sqlite+aiosqlite:///{tmp_path / 'rz.db'}"
    await _closed_challenge(db)
    # No RANKZERO_RUNNER_URL: before the fix this started a local runner first.
    env: dict[str, str | None] = {k: None for k in os.environ if k.startswith("RANKZERO_")}
    monkeypatch.chdir(tmp_path)
    # In a thread: the command runs its own event loop, as it does in a process.
    done = await asyncio.to_thread(
        rankzero,
        "--db",
        db,
        "dispute",
        "today:1",
        "--player",
        "alice",
        env={**env, "XDG_DATA_HOME": str(tmp_path)},
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "question 'no-code-here' has no runnable code" in done.stderr
    assert "sandbox" not in done.stdout and "runner…" not in done.stdout
