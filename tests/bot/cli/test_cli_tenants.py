"""The operator's CLI with two tenants (issue 24): ``questions list`` shows the shared bank, or with
``--tenant`` what one tenant sees; ``questions retire --tenant`` retires for that tenant only, and a
question of another tenant reads as missing.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from bot.cli import main
from bot.core.models import Tenant
from bot.storage.db import make_engine, upgrade
from bot.storage.uow import SqlUnitOfWork, session_factory
from tests.conftest import make_spec

A = Tenant("discord", "111")
B = Tenant("slack", "E1/T2")
T0 = dt.datetime(2026, 11, 21, 9, 0, tzinfo=dt.UTC)


async def _seed(url: str) -> None:
    engine = make_engine(url)
    async with SqlUnitOfWork(session_factory(engine)) as uow:
        await uow.questions.sync_questions(None, [make_spec("shared-1", "beginner", "DDP")], T0)
        await uow.questions.sync_questions(A, [make_spec("a-own", "expert", "NCCL")], T0)
    await engine.dispose()


@pytest.fixture
def db(tmp_path: Path) -> str:
    url = f"sqlite+aiosqlite:///{tmp_path / 'cli.db'}"
    upgrade(url)
    asyncio.run(_seed(url))
    return url


def _run(db: str, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["--db", db, "questions", *args])
    return result.exit_code, result.output


def _ids(output: str) -> list[str]:
    return [line.split()[0] for line in output.splitlines() if line.strip()]


def test_list_and_retire_per_tenant(db: str) -> None:
    assert _ids(_run(db, "list")[1]) == ["shared-1"], "the operator's bank: no tenant's own question"
    assert _ids(_run(db, "list", "--tenant", A.key)[1]) == ["a-own", "shared-1"]
    assert _ids(_run(db, "list", "--tenant", B.key)[1]) == ["shared-1"]

    code, out = _run(db, "retire", "shared-1", "--tenant", B.key)
    assert code == 0 and "retired shared-1 for slack:E1/T2" in out
    assert _ids(_run(db, "list", "--tenant", B.key)[1]) == []
    assert _ids(_run(db, "list", "--tenant", A.key)[1]) == ["a-own", "shared-1"], "A keeps playing it"
    assert _ids(_run(db, "list")[1]) == ["shared-1"]

    theirs = _run(db, "retire", "a-own", "--tenant", B.key)
    missing = _run(db, "retire", "nope", "--tenant", B.key)
    assert theirs[0] == missing[0] != 0
    assert theirs[1].replace("a-own", "X") == missing[1].replace("nope", "X")
    assert "a-own" in _ids(_run(db, "list", "--tenant", A.key)[1]), "nothing changed for A"


@pytest.mark.parametrize("junk", ["discord", "discord:", ":111"])
def test_a_malformed_tenant_is_a_usage_error(db: str, junk: str) -> None:
    code, out = _run(db, "list", "--tenant", junk)
    assert code == 2 and "--tenant" in out and "discord:123456789012345678" in out


def test_the_operators_import_renames_a_tenants_question_with_its_id(db: str, tmp_path: Path) -> None:
    """Security review of issue 24: the operator's import is never refused because a tenant's own
    question has one of its ids; the tenant's question is renamed within the tenant, and said so.
    """
    bank = tmp_path / "bank.yaml"
    bank.write_text(yaml.safe_dump({"questions": [make_spec("a-own", "beginner", "DDP")]}))
    code, out = _run(db, "import", str(bank))
    assert code == 0, out
    assert "renamed discord:111's own question a-own to a-own-own: the shared bank now uses its id" in out
    assert _ids(_run(db, "list")[1]) == ["a-own", "shared-1"]
    assert _ids(_run(db, "list", "--tenant", A.key)[1]) == ["a-own", "a-own-own", "shared-1"]
