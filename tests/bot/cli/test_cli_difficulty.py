"""``rankzero questions stats --tenant T``: the bank's figures, then the questions whose difficulty learned
from that tenant's first attempts disagrees with the label (and only that tenant's).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from bot.cli import main
from bot.core.difficulty import DifficultyEstimate
from bot.core.models import Tenant
from bot.storage.db import make_engine, upgrade
from bot.storage.uow import SqlUnitOfWork, session_factory
from tests.conftest import make_spec

A = Tenant("discord", "111")
B = Tenant("slack", "T2")
T0 = dt.datetime(2026, 11, 21, 9, 0, tzinfo=dt.UTC)
SPECS = [make_spec("q-easy", "beginner", "DDP"), make_spec("q-hard", "expert", "Checkpointing")]


async def _seed(url: str) -> None:
    engine = make_engine(url)
    rows = {
        A: {"q-easy": ("beginner", DifficultyEstimate(1.7, 12.0, 40, 6))},
        B: {"q-hard": ("expert", DifficultyEstimate(-1.8, 12.0, 40, 35))},
    }
    async with SqlUnitOfWork(session_factory(engine)) as uow:
        await uow.questions.sync_questions(None, SPECS, T0)
        for tenant, learned in rows.items():
            labels = {qid: label for qid, (label, _) in learned.items()}
            await uow.difficulty.lock_estimates(tenant, labels, T0)
            await uow.difficulty.save_estimates(tenant, {q: e for q, (_, e) in learned.items()}, labels, T0)
    await engine.dispose()


@pytest.fixture
def setup(tmp_path: Path) -> tuple[str, Path]:
    url = f"sqlite+aiosqlite:///{tmp_path / 'cli.db'}"
    upgrade(url)
    asyncio.run(_seed(url))
    bank = tmp_path / "bank.yaml"
    bank.write_text(yaml.safe_dump({"questions": SPECS}), encoding="utf-8")
    return url, bank


def test_stats_lists_the_tenants_disagreements(setup: tuple[str, Path]) -> None:
    url, bank = setup
    result = CliRunner().invoke(main, ["--db", url, "questions", "stats", str(bank), "--tenant", A.key])
    assert result.exit_code == 0, result.output
    assert (
        "learned difficulty (discord:111): 1 questions with 20+ first attempts, 1 disagree" in result.output
    )
    assert "q-easy" in result.output and "beginner     -> expert" in result.output
    assert "q-hard" not in result.output.split("learned difficulty")[1], "another tenant's data"


def test_stats_json_and_without_tenant(setup: tuple[str, Path]) -> None:
    url, bank = setup
    result = CliRunner().invoke(
        main, ["--db", url, "questions", "stats", str(bank), "--tenant", B.key, "--json"]
    )
    assert result.exit_code == 0, result.output
    learned = json.loads(result.output)["learned_difficulty"]
    assert learned["tenant"] == B.key and learned["disagreeing"] == 1
    assert [(q["id"], q["label"], q["learned"]) for q in learned["questions"]] == [
        ("q-hard", "expert", "beginner")
    ]
    plain = CliRunner().invoke(main, ["--db", url, "questions", "stats", str(bank)])
    assert plain.exit_code == 0 and "learned difficulty" not in plain.output


def test_insights_reads_one_tenant(setup: tuple[str, Path]) -> None:
    url, _ = setup
    result = CliRunner().invoke(main, ["--db", url, "insights", "--tenant", A.key])
    assert result.exit_code == 0, result.output
    assert "weakest topics of discord:111, last 30 days (10+ first attempts):\n  none yet" in result.output
    assert "q-easy" in result.output and "q-hard" not in result.output
    missing = CliRunner().invoke(main, ["--db", url, "insights"])
    assert missing.exit_code == 2 and "--tenant" in missing.output
