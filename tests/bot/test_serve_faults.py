"""``rankzero`` processes started into faults: a taken health port, a misspelled or unreachable database.

Each ends with one line on stderr that names the real cause, and touches nothing it should not.
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import socket
import subprocess
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from bot.adapters.file.platform import read_records
from tests.bot.test_serve_process import RANKZERO, ROOT, _schedule_now
from tests.conftest import PG_URL
from tests.net import free_port
from tests.waiting import wait_until

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


def test_the_readme_demo_after_make_play_prints_the_post_and_its_window(tmp_path: Path) -> None:
    """`make play` first (today's challenge opened, no window), then the README's `serve --console` try."""
    env = _env(
        RANKZERO_DATABASE_URL=f"sqlite+aiosqlite:///{tmp_path / 'console.db'}",
        RANKZERO_HEALTH_PORT=str(free_port()),
        COLUMNS="120",
    )

    def cli(*args: str, stdin: str | None = None) -> None:
        done = subprocess.run(
            [*RANKZERO, *args], env=env, cwd=ROOT, input=stdin, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr

    cli("play", "--player", "newcomer", stdin="q\n")  # opens today's challenge, then quits
    now = dt.datetime.now(dt.UTC)
    cli("schedule", "set", "--time", f"{now:%H:%M}", "--tz", "UTC", "--days", "daily", "--window", "10m")
    out = tmp_path / "serve.out"
    with out.open("wb") as sink:
        serve = [*RANKZERO, "serve", "--console"]
        proc = subprocess.Popen(serve, env=env, cwd=ROOT, stdout=sink, stderr=sink)
        try:

            def posted() -> bool:
                assert proc.poll() is None, out.read_text(errors="replace")
                return "problems" in out.read_text(errors="replace")

            wait_until(posted, "serve --console printed no post", polls=300, every_s=0.2)
        finally:
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(timeout=30)
    shown = out.read_text(errors="replace")
    assert code == 0, shown
    assert "missed post" not in shown and "Traceback" not in shown


async def test_the_health_port_answers_starting_until_the_scheduler_runs() -> None:
    from bot.serve import HealthServer
    from tests.bot.test_serve_health import _get

    server = HealthServer(None, 0)  # as serve binds it, before migrating
    await server.start()
    try:
        status, body = await _get(server.port, "/healthz")
        assert status == 503 and body == {"ok": False, "state": "starting"}

        async def running() -> dict[str, object]:
            return {"ok": True}

        server.set_report(running)
        status, body = await _get(server.port, "/healthz")
        assert status == 200 and body == {"ok": True}
    finally:
        await server.stop()
