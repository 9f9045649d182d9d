"""``rankzero`` processes started into faults: a taken health port, a misspelled or unreachable database.

Each ends with one line on stderr that names the real cause, and touches nothing it should not.
"""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from bot.adapters.file.platform import read_records
from tests.conftest import PG_URL
from tests.test_serve_process import RANKZERO, ROOT, _schedule_now

pytestmark = pytest.mark.slow


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RANKZERO_")}
    return env | extra


def test_a_taken_health_port_stops_serve_before_it_posts(db_url: str, tmp_path: Path) -> None:
    record = tmp_path / "posts.jsonl"
    _schedule_now(db_url)  # a post is due: a serve that got as far as its scheduler would make it
    with socket.socket() as other:  # what another `rankzero serve` on this host holds
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        done = subprocess.run(
            [*RANKZERO, "serve"],
            cwd=ROOT,
            env=_env(
                RANKZERO_DATABASE_URL=db_url,
                RANKZERO_RECORD_FILE=str(record),
                RANKZERO_HEALTH_PORT=str(port),
            ),
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f"health port 127.0.0.1:{port}" in lines[0] and "RANKZERO_HEALTH_PORT" in lines[0]
    assert "database" not in lines[0], "the database is not to blame"
    assert not record.exists() or read_records(record) == [], "nothing was posted"


@pytest.mark.postgres
@pytest.mark.parametrize("command", [["serve"], ["leaderboard"], ["db", "upgrade"]])
def test_a_misspelled_postgres_database_is_one_line(command: list[str], pg_database: str) -> None:
    url = make_url(PG_URL).set(database="rz_no_such_database").render_as_string(hide_password=False)
    done = subprocess.run(
        [*RANKZERO, *command],
        cwd=ROOT,
        env=_env(RANKZERO_DATABASE_URL=url, RANKZERO_HEALTH_PORT="0", RANKZERO_RECORD_FILE="/dev/null"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert 'database "rz_no_such_database" does not exist' in lines[0]
    assert lines[0].startswith("error: cannot use the database at postgresql+asyncpg://")


@pytest.mark.parametrize("command", [["serve"], ["leaderboard"]])
def test_an_unreachable_database_port_is_one_line(command: list[str]) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"postgresql+asyncpg://postgres:secret@127.0.0.1:{port}/rankzero"
    done = subprocess.run(
        [*RANKZERO, *command],
        cwd=ROOT,
        env=_env(RANKZERO_DATABASE_URL=url, RANKZERO_HEALTH_PORT="0", RANKZERO_RECORD_FILE="/dev/null"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "Connect call failed" in lines[0] and "secret" not in lines[0]
