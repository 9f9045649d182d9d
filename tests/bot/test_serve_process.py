"""``rankzero serve`` as real processes: SIGKILL mid-window and restart, two instances on PostgreSQL.

Posts go to the file platform (RANKZERO_RECORD_FILE): every process appends one JSON line per post, so
the test counts posts and results across processes. The schedule's slot is the current minute, so a
starting process makes the post at once (a missed post within the grace period); the window is then
shortened in the database ("the window ended"), as the stored closing time is what every process obeys.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import http.client
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update

from bot.adapters.file.platform import read_records
from bot.core.models import ChannelRef
from bot.core.ports import SystemClock
from bot.core.schedule_service import ScheduleService
from bot.core.service import QuizService
from bot.storage.db import make_engine
from bot.storage.models import ChallengeRow
from bot.storage.uow import SqlUnitOfWork, session_factory
from tests.conftest import ADMIN
from tests.net import free_port
from tests.waiting import wait_until

pytestmark = pytest.mark.slow

#: ``rankzero`` from this checkout (not whatever an installed entry point would import).
ROOT = Path(__file__).resolve().parents[2]
RANKZERO = [sys.executable, "-m", "bot.cli"]
FILE_CHANNEL = ChannelRef("file", "local", "daily", "daily")


def _db(db_url: str, body: Callable[[Any], Any]) -> Any:
    async def main() -> Any:
        engine = make_engine(db_url)
        try:
            return await body(session_factory(engine))
        finally:
            await engine.dispose()

    return asyncio.run(main())


def _schedule_now(db_url: str, window: str = "10m") -> None:
    """A daily schedule whose slot is this minute (UTC): a starting process posts at once."""
    now = dt.datetime.now(dt.UTC)

    async def body(factory: Any) -> None:
        quiz = QuizService(lambda: SqlUnitOfWork(factory), SystemClock())
        svc = ScheduleService(lambda: SqlUnitOfWork(factory), SystemClock(), quiz)
        await svc.set_schedule(
            ADMIN, FILE_CHANNEL, post_time=f"{now:%H:%M}", timezone="UTC", days="daily", window=window
        )

    _db(db_url, body)


def _end_window_soon(db_url: str, challenge_id: int, seconds: float) -> None:
    closes = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=seconds)

    async def body(factory: Any) -> None:
        async with factory() as s, s.begin():
            await s.execute(
                update(ChallengeRow).where(ChallengeRow.id == challenge_id).values(closes_at=closes)
            )

    _db(db_url, body)


class Serve:
    """One ``rankzero serve`` process with its own health port."""

    def __init__(self, db_url: str, record: Path, log: Path, **extra_env: str) -> None:
        """``extra_env``: more settings (``RANKZERO_...`` names) for this process."""
        self.port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("RANKZERO_")}
        env |= {
            "RANKZERO_DATABASE_URL": db_url,
            "RANKZERO_RECORD_FILE": str(record),
            "RANKZERO_HEALTH_PORT": str(self.port),
            "RANKZERO_SCHEDULE_SYNC_S": "0.5",
        }
        env |= extra_env
        self._log = log.open("ab")
        self.proc = subprocess.Popen(
            [*RANKZERO, "serve"], cwd=ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT
        )

    def health(self) -> dict[str, Any] | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=2) as resp:
                report: dict[str, Any] = json.loads(resp.read())
                return report
        except (urllib.error.URLError, ConnectionError, TimeoutError, http.client.HTTPException):
            return None

    def wait_healthy(self, polls: int = 900) -> dict[str, Any]:
        """Poll /healthz until it says ok (a hang guard of ``polls`` tries 0.2 s apart, no speed bound)."""
        for _ in range(polls):
            assert self.proc.poll() is None, f"serve exited with {self.proc.returncode}"
            if (report := self.health()) is not None and report["ok"]:
                return report
            time.sleep(0.2)
        raise AssertionError("serve never became healthy")

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        code = self.proc.wait(timeout=30)
        self._log.close()
        return code


@pytest.fixture
def procs() -> Iterator[list[Serve]]:
    started: list[Serve] = []
    yield started
    for p in started:
        if p.proc.poll() is None:
            p.stop(signal.SIGKILL)


def _wait_for(record: Path, kind: str, count: int, polls: int = 900) -> list[dict[str, Any]]:
    """Poll the record for ``count`` records of ``kind`` (a hang guard of ``polls`` tries, no speed bound)."""
    for _ in range(polls):
        found = [r for r in read_records(record) if r["kind"] == kind]
        if len(found) >= count:
            return found
        time.sleep(0.2)
    raise AssertionError(f"no {count} {kind!r} record(s) in {read_records(record)}")


def _kinds(record: Path) -> list[str]:
    return [r["kind"] for r in read_records(record)]


def test_sigkill_mid_window_then_restart_closes_once(db_url: str, tmp_path: Path, procs: list[Serve]) -> None:
    record, log = tmp_path / "posts.jsonl", tmp_path / "serve.log"
    _schedule_now(db_url)
    first = Serve(db_url, record, log)
    procs.append(first)
    report = first.wait_healthy()
    assert report["database"]["ok"] and report["scheduler"]["state"] == "running"
    post = _wait_for(record, "post", 1)[0]
    job_ids = {j["id"] for j in first.wait_healthy()["scheduler"]["jobs"]}
    assert f"close:{post['challenge_id']}" in job_ids and any(j.startswith("post:") for j in job_ids)

    assert first.stop(signal.SIGKILL) == -signal.SIGKILL  # mid-window: nothing closed yet
    assert _kinds(record) == ["post"]
    _end_window_soon(db_url, post["challenge_id"], 3)

    second = Serve(db_url, record, log)
    procs.append(second)
    second.wait_healthy()
    results = _wait_for(record, "results", 1)
    assert results[0]["challenge_id"] == post["challenge_id"] and results[0]["pid"] == second.proc.pid
    assert second.stop() == 0

    third = Serve(db_url, record, log)  # a later restart finds nothing left to do
    procs.append(third)
    third.wait_healthy()
    time.sleep(1.5)
    assert third.stop() == 0
    assert _kinds(record) == ["post", "results"], log.read_text()[-3000:]


@pytest.mark.postgres
def test_two_serve_processes_post_and_close_once(
    pg_database: str, tmp_path: Path, procs: list[Serve]
) -> None:
    db_url = pg_database
    # The shared PostgreSQL test database may hold other tests' rows: start from a clean channel.
    _db(db_url, _truncate)
    record, log = tmp_path / "posts.jsonl", tmp_path / "serve.log"
    _schedule_now(db_url)
    a, b = Serve(db_url, record, log), Serve(db_url, record, log)
    procs += [a, b]
    a.wait_healthy()
    b.wait_healthy()
    post = _wait_for(record, "post", 1)[0]
    time.sleep(1.0)
    assert _kinds(record) == ["post"], "two instances, one post"
    _end_window_soon(db_url, post["challenge_id"], 2)
    _wait_for(record, "results", 1)
    time.sleep(2.0)  # both instances' close jobs have fired by now
    assert a.stop() == 0 and b.stop() == 0
    assert _kinds(record) == ["post", "results"], log.read_text()[-3000:]


async def _truncate(factory: Any) -> None:
    from sqlalchemy import text

    from bot.storage.models import Base

    tables = ", ".join(f'"{t.name}"' for t in Base.metadata.sorted_tables)
    async with factory() as s, s.begin():
        await s.execute(text(f"TRUNCATE {tables} RESTART IDENTITY CASCADE"))


def test_serve_without_platform_says_what_to_set(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RANKZERO_")}
    env["RANKZERO_DATABASE_URL"] = f"sqlite+aiosqlite:///{tmp_path / 'x.db'}"
    done = subprocess.run([*RANKZERO, "serve"], env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    for variable in ("RANKZERO_DISCORD_TOKEN", "RANKZERO_SLACK_BOT_TOKEN", "RANKZERO_SLACK_APP_TOKEN"):
        assert variable in done.stderr
    assert "rankzero serve --console" in done.stderr
    assert not (tmp_path / "x.db").exists(), "nothing is touched when there is nowhere to post"


def test_serve_console_prints_the_post_of_a_due_schedule(tmp_path: Path) -> None:
    """The manual try of the README: `schedule set` for this minute, `serve --console` prints the post."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RANKZERO_")}
    env |= {
        "RANKZERO_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'console.db'}",
        "RANKZERO_HEALTH_PORT": str(free_port()),
        "COLUMNS": "120",
    }

    def cli(*args: str) -> None:
        done = subprocess.run(
            [*RANKZERO, *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr

    cli("questions", "import", "questions/bank")
    now = dt.datetime.now(dt.UTC)
    cli("schedule", "set", "--time", f"{now:%H:%M}", "--tz", "UTC", "--days", "daily", "--window", "10m")
    out = tmp_path / "serve.out"
    with out.open("wb") as sink:
        serve = [*RANKZERO, "serve", "--console"]
        proc = subprocess.Popen(serve, env=env, cwd=ROOT, stdout=sink, stderr=sink)
        try:

            def posted() -> bool:
                assert proc.poll() is None, out.read_text(errors="replace")
                return "Multi-GPU challenge" in out.read_text(errors="replace")

            wait_until(posted, "serve --console printed no challenge", polls=300, every_s=0.2)
        finally:
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(timeout=30)
    shown = out.read_text(errors="replace")
    assert code == 0, shown
    assert "5 problems" in shown and "Traceback" not in shown


@pytest.mark.parametrize(
    "signal_on",
    ["Multi-GPU challenge", "post for channel", "rankzero serve: running"],
    ids=["during-the-post", "after-the-post-before-the-scheduler-runs", "running"],
)
def test_serve_console_stops_cleanly_on_sigterm_at_each_point(tmp_path: Path, signal_on: str) -> None:
    """SIGTERM as the post prints, as the starting scheduler records it, or once running: exit 0, no
    traceback (a cancelled job's connection reset used to be logged by SQLAlchemy's pool as an error).
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("RANKZERO_")}
    env |= {
        "RANKZERO_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'stop.db'}",
        "RANKZERO_HEALTH_PORT": str(free_port()),
        "COLUMNS": "120",
    }
    for args in (
        ("questions", "import", "questions/bank"),
        ("schedule", "set", "--time", f"{dt.datetime.now(dt.UTC):%H:%M}", "--tz", "UTC", "--days", "daily"),
    ):
        done = subprocess.run(
            [*RANKZERO, *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
    out = tmp_path / "serve.out"
    with out.open("wb") as sink:
        proc = subprocess.Popen(
            [*RANKZERO, "serve", "--console"], env=env, cwd=ROOT, stdout=sink, stderr=sink
        )
        try:

            def reached() -> bool:
                assert proc.poll() is None, out.read_text(errors="replace")
                return signal_on in out.read_text(errors="replace")

            wait_until(reached, f"serve --console never printed {signal_on!r}", polls=3000, every_s=0.02)
        finally:
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(timeout=60)
    shown = out.read_text(errors="replace")
    assert code == 0, shown
    assert "Traceback" not in shown and "ERROR" not in shown, shown
