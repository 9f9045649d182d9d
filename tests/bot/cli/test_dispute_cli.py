"""The console commands of disputes, run as real processes: dispute, flags, correct, preview."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from bot.bootstrap import build_app
from bot.cli import CONSOLE_CHANNEL
from bot.config import Settings
from tests.conftest import ADMIN
from tests.runner_server import RunnerServer

RANKZERO = str(Path(sys.executable).parent / "rankzero")
SPEC = {
    "id": "cli-off-by-one",
    "kind": "predict_output",
    "topic": "Multi-GPU basics",
    "difficulty": "beginner",
    "prompt": "What is printed?",
    "code": "print(len(range(1, 10)))\n",
    "runner": {"mode": "python", "nproc": 1, "gpus": 0},
    "choices": [{"text": "10", "correct": True}, {"text": "9"}],
}


def rankzero(db: str, runner: RunnerServer, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RANKZERO_")}
    env.update(COLUMNS="200", RANKZERO_RUNNER_URL=runner.url, RANKZERO_RUNNER_TOKEN=runner.token)
    return subprocess.run(
        [RANKZERO, "--db", db, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


async def test_dispute_flag_correct_and_preview_from_the_console(
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
    pid = str(challenge.problems[0].id)

    done = rankzero(db, runner, tmp_path, "dispute", pid, "--player", "alice")
    assert done.returncode == 0, done.stderr
    assert "contradicted: it printed '9': choice B matches, but the official answer is A" in done.stdout
    assert "flag #1" in done.stdout  # the console is its own admin channel
    assert "flagged for the admins" in done.stdout

    flags = rankzero(db, runner, tmp_path, "questions", "flags")
    assert "#1 open     cli-off-by-one v1: official A, runner B" in flags.stdout

    fixed = rankzero(db, runner, tmp_path, "questions", "correct", "cli-off-by-one", "B")
    assert fixed.returncode == 0, fixed.stderr
    assert "cli-off-by-one: answer A → B (v1 → v2)" in fixed.stdout
    assert "1 flag(s) resolved" in fixed.stdout

    again = rankzero(db, runner, tmp_path, "questions", "correct", "cli-off-by-one", "B")
    assert again.returncode == 1 and "already the official answer" in again.stderr

    path = tmp_path / "new.yaml"
    path.write_text(yaml.safe_dump({"questions": [{**SPEC, "id": "cli-new-question"}]}, sort_keys=False))
    preview = rankzero(db, runner, tmp_path, "questions", "preview", str(path))
    # A contradicted answer is a problem found: exit 1, as `questions verify` (it was 0, issue 25).
    assert preview.returncode == 1, preview.stderr
    assert "cli-new-question" in preview.stdout and "contradicted" in preview.stdout
    assert "contradicts the official answer of 1 question(s): cli-new-question" in preview.stderr
    confirmed = {
        **SPEC,
        "id": "cli-new-question",
        "choices": [{"text": "10"}, {"text": "9", "correct": True}],
    }
    path.write_text(yaml.safe_dump({"questions": [confirmed]}, sort_keys=False))
    fine = rankzero(db, runner, tmp_path, "questions", "preview", str(path))
    assert fine.returncode == 0, fine.stderr

    early = rankzero(db, runner, tmp_path, "dispute", "999")
    assert early.returncode == 1 and "no problem with id 999" in early.stderr
