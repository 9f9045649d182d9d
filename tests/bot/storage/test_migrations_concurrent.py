"""Several processes migrating one fresh database at the same moment (``rankzero serve`` x N at boot).

Real processes, each running ``alembic upgrade head`` through bot.storage.db.upgrade, released together at
one wall-clock instant after their imports. Without the advisory lock, PostgreSQL fails all but one with
an IntegrityError on ``CREATE TABLE alembic_version``.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic import command
from sqlalchemy.engine import make_url

from bot.storage.db import alembic_config
from tests.conftest import PG_URL, _pg_admin

ROOT = Path(__file__).resolve().parents[3]
PROCESSES = 4
#: Each process imports, then sleeps until ``at`` so that all of them migrate at the same moment.
SCRIPT = """
import sys, time
from bot.storage.db import upgrade
url, at = sys.argv[1], float(sys.argv[2])
time.sleep(max(0.0, at - time.time()))
upgrade(url)
"""


def _migrate_together(url: str) -> list[subprocess.CompletedProcess[str]]:
    at = time.time() + 6  # after every process has imported SQLAlchemy and Alembic
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", SCRIPT, url, str(at)],
            cwd=ROOT,
            env=os.environ.copy(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(PROCESSES)
    ]
    done = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        done.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    return done


@pytest.fixture
def fresh_pg(pg_database: str) -> Iterator[str]:
    name = f"rz_race_{uuid.uuid4().hex[:8]}"
    asyncio.run(_pg_admin(f'CREATE DATABASE "{name}"'))
    yield make_url(PG_URL).set(database=name).render_as_string(hide_password=False)
    asyncio.run(_pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_processes_migrating_a_fresh_database_together_all_succeed(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if backend == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp_path / 'race.db'}"
    else:
        url = request.getfixturevalue("fresh_pg")
    results = _migrate_together(url)
    failures = [r.stderr[-2000:] for r in results if r.returncode != 0]
    assert failures == [], failures[0] if failures else ""
    command.check(alembic_config(url))  # one schema, at head, as the models say
