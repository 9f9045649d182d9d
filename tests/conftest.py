"""Shared fixtures: migrated databases on SQLite and PostgreSQL, a frozen clock, a small test bank.

PostgreSQL comes from RANKZERO_TEST_PG_URL (default: the local server). Its tests are skipped only when
no server answers, and never under CI (CI=true): there a missing server is a failure.

Every test is marked here by what it needs (``pytest --markers``; ``--strict-markers`` refuses any other):
``sandbox`` (real bubblewrap sandboxes: everything under tests/runner/ and the modules that start a runner),
``process`` (the module starts processes: the CLI, ``serve``, a runner server), ``postgres`` (the
PostgreSQL side of a two-backend test), and ``slow`` where a module says so. ``make test`` runs them all;
``make test-fast`` only the in-process tier (``-m "not slow and not sandbox and not process"``).
"""

from __future__ import annotations

import ast
import asyncio
import datetime as dt
import functools
import logging
import os
import shutil
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import discord
import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from bot.core.models import Actor, ChannelRef, PlayerRef
from bot.core.service import QuizService
from bot.services import App
from bot.storage.db import make_engine, upgrade
from bot.storage.models import Base
from tests.discord_fake import FakeDiscord
from tests.fakes import FakePlatform, FrozenClock
from tests.runner_server import RunnerServer, runner_server

# pytest-xdist hooks (the controller side of `make test`'s parallel run): the sandbox tests on one worker.
from tests.xdist_groups import (  # noqa: F401 (hook implementations, found by name)
    pytest_configure_node,
    pytest_unconfigure,
    pytest_xdist_make_scheduler,
    record_sandbox_tests,
)

PG_URL = os.environ.get("RANKZERO_TEST_PG_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres")
START = dt.datetime(2026, 11, 21, 9, 0, tzinfo=dt.UTC)
CHANNEL = ChannelRef("test", "ws1", "general", "general")

TESTS = Path(__file__).resolve().parent
# Imports that make a module's tests start processes (``process``) or real sandboxes (``sandbox``); a
# module that only names the RunnerServer type is neither (the ``runner`` fixture marks its users).
PROCESS_IMPORTS = {"subprocess", "multiprocessing", "pexpect", "tests.runner_server.runner_server"}
SANDBOX_IMPORTS = {"tests.runner_server.runner_server", "runner.service", "runner.pool", "runner.sandbox"}
# Fixtures that make a test start a runner server with its sandboxes.
RUNNER_FIXTURES = {"runner"}


def module_kinds(source: str, folder: tuple[str, ...] = ()) -> frozenset[str]:
    """The markers a test module's tests get from its folder (relative to tests/) and its imports."""
    imported: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            imported.add(node.module)
            imported |= {f"{node.module}.{alias.name}" for alias in node.names}
    kinds = set()
    if folder[:1] == ("runner",) or imported & SANDBOX_IMPORTS:
        kinds.add("sandbox")
    if imported & PROCESS_IMPORTS:
        kinds.add("process")
    return frozenset(kinds)


@functools.cache
def _kinds_of(path: Path) -> frozenset[str]:
    try:
        folder = path.resolve().relative_to(TESTS).parts[:-1]
    except ValueError:
        return frozenset()
    return module_kinds(path.read_text(encoding="utf-8"), folder)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test by the tier it belongs to (see the module docstring)."""
    for item in items:
        kinds = set(_kinds_of(Path(item.path)))
        fixtures = set(getattr(item, "fixturenames", ()))
        if fixtures & RUNNER_FIXTURES:
            kinds |= {"sandbox", "process"}
        if "pg_database" in fixtures and item.get_closest_marker("postgres") is None:
            kinds.add("postgres")
        for kind in sorted(kinds):
            item.add_marker(kind)
    record_sandbox_tests(config, items)  # for `make test`'s parallel run (tests/xdist_groups.py)


async def _pg_admin(sql: str) -> None:
    import asyncpg

    url = make_url(PG_URL)
    conn = await asyncpg.connect(
        host=url.host,
        port=url.port or 5432,
        user=url.username,
        password=url.password,
        database=url.database,
        timeout=5,
    )
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


def _pg_available() -> str | None:
    try:
        asyncio.run(_pg_admin("SELECT 1"))
    except Exception as exc:  # any failure to connect means "no server answers"
        return f"{type(exc).__name__}: {exc}"
    return None


@pytest.fixture(scope="session")
def pg_database() -> Iterator[str]:
    """A fresh PostgreSQL database for this test session, migrated to head; dropped afterwards."""
    problem = _pg_available()
    if problem is not None:
        if os.environ.get("CI"):
            pytest.fail(f"PostgreSQL at {PG_URL} does not answer under CI: {problem}")
        pytest.skip(f"no PostgreSQL server answers at {PG_URL}: {problem}")
    name = f"rz_test_{uuid.uuid4().hex[:10]}"
    asyncio.run(_pg_admin(f'CREATE DATABASE "{name}"'))
    url = make_url(PG_URL).set(database=name).render_as_string(hide_password=False)
    upgrade(url)
    yield url
    asyncio.run(_pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated SQLite file copied for each test (faster than migrating every time)."""
    path = tmp_path_factory.mktemp("tpl") / "template.db"
    upgrade(f"sqlite+aiosqlite:///{path}")
    return path


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path, sqlite_template: Path) -> Iterator[str]:
    """A migrated, empty database on each backend."""
    if request.param == "sqlite":
        target = tmp_path / "rz.db"
        shutil.copy(sqlite_template, target)
        yield f"sqlite+aiosqlite:///{target}"
        return
    # Emptying the session's database, not a copy of a template per test: CREATE DATABASE ... TEMPLATE
    # measured 0.5 s a test on a quiet 2-core machine (issue 29: 62 PostgreSQL tests took 34-38 s that
    # way, 15 s truncating), so a per-test database is only worth it for running tests in parallel.
    url: str = request.getfixturevalue("pg_database")
    asyncio.run(_empty_pg(url))
    yield url


# What ``TRUNCATE <every table> RESTART IDENTITY CASCADE`` leaves (no rows, every sequence at its start),
# by DELETE instead: a test leaves a few rows, and TRUNCATE gives each of the 33 tables new files, which
# cost 0.5-0.8 s a test against 0.04 s (issue 29, 193 PostgreSQL tests in the fast tier). Children
# first, so that no foreign key refuses a delete; the migrations define no triggers a DELETE would fire.
_EMPTY_PG = """
DO $$
DECLARE
    seq record;
BEGIN
    {deletes}
    FOR seq IN SELECT schemaname, sequencename FROM pg_sequences WHERE schemaname = current_schema() LOOP
        EXECUTE format('ALTER SEQUENCE %I.%I RESTART', seq.schemaname, seq.sequencename);
    END LOOP;
END
$$
"""


async def _empty_pg(url: str) -> None:
    """Empty every table of a migrated PostgreSQL database and restart its sequences."""
    deletes = " ".join(f'DELETE FROM "{t.name}";' for t in reversed(Base.metadata.sorted_tables))
    engine = make_engine(url)
    try:
        async with engine.begin() as conn:
            await conn.execute(text(_EMPTY_PG.format(deletes=deletes)))
    finally:
        await engine.dispose()


@pytest.fixture
def db(tmp_path: Path, sqlite_template: Path) -> str:
    """A migrated, empty SQLite database (the adapter tests run on SQLite only)."""
    target = tmp_path / "rz.db"
    shutil.copy(sqlite_template, target)
    return f"sqlite+aiosqlite:///{target}"


@pytest.fixture(scope="session")
def runner() -> Iterator[RunnerServer]:
    """One real ``rankzero-runner serve`` for the whole session, for every test that only sends it jobs.

    Every job gets a fresh bubblewrap sandbox anyway, so sharing the server shares only its warm pool
    (one 1-rank and one 2-rank sandbox) and saves a start-up and a pool warm-up per module. A test that
    needs a runner configured otherwise (tests/bot/test_runner_fleet.py) starts its own with runner_server().
    """
    with runner_server(pool="1:1,2:1") as server:
        yield server


@pytest.fixture
async def slack(tmp_path: Path, sqlite_template: Path) -> AsyncIterator[Any]:
    """The Slack adapter (HTTP mode) over the test bank: tests/bot/adapters/slack/test_slack_adapter.py's
    harness. A module that needs other settings or another bank defines its own ``slack``."""
    # Imported here, not at the top: only Slack tests import Bolt.
    from tests.bot.adapters.slack.test_slack_adapter import _harness

    async for h in _harness(tmp_path, sqlite_template, test_bank()):
        yield h


@pytest.fixture
async def fake(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeDiscord]:
    """The local fake of the Discord REST API, with discord.py's HTTP routes pointed at it."""
    server = FakeDiscord()
    monkeypatch.setattr(discord.http.Route, "BASE", await server.start())
    yield server
    await server.stop()


@pytest.fixture
def bot_options() -> Any:
    """How the ``bot`` fixture opens its Discord bot (tests/discord_env.py's BotOptions; a module overrides
    this fixture to change them)."""
    from tests.discord_env import BotOptions

    return BotOptions()


@pytest.fixture
async def bot(fake: FakeDiscord, db: str, clock: FrozenClock, bot_options: Any) -> AsyncIterator[Any]:
    """A Discord bot logged in against the fake with the services attached (tests/discord_env.py)."""
    from tests.discord_env import close_bot, open_bot  # here, not at the top: it imports this module

    opened = await open_bot(fake, db, clock, bot_options)
    yield opened
    await close_bot(opened)


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock(START)


@pytest.fixture
def platform() -> FakePlatform:
    return FakePlatform()


def make_spec(
    qid: str,
    difficulty: str,
    topic: str,
    *,
    kind: str = "conceptual",
    correct: int = 0,
    n_choices: int = 4,
    **extra: Any,
) -> dict[str, Any]:
    """A valid multiple-choice spec for tests."""
    spec: dict[str, Any] = {
        "id": qid,
        "kind": kind,
        "topic": topic,
        "difficulty": difficulty,
        "prompt": f"Question {qid}?",
        "hint": f"hint for {qid}",
        "explanation": f"because {qid}",
        "time_limit_s": 120,
        "attempts": 2,
        "tags": [],
        "choices": [
            {"text": f"{qid} choice {i}", "correct": i == correct, "feedback": f"fb {i}"}
            for i in range(n_choices)
        ],
    }
    spec.update(extra)
    return spec


TOPICS = ["DDP", "Collectives", "FSDP", "Scaling", "Checkpointing", "Mixed precision"]


def test_bank() -> list[dict[str, Any]]:
    """18 questions: 6 intermediate, 6 advanced, 6 expert, topics mixed; the correct answer is A."""
    specs = []
    for level in ("intermediate", "advanced", "expert"):
        for i in range(6):
            specs.append(make_spec(f"{level[:3]}-{i}", level, TOPICS[i]))
    return specs


test_bank.__test__ = False  # type: ignore[attr-defined]


#: The operator (as on the CLI): manages the shared bank; tests of a tenant's admins build their own.
ADMIN = Actor(PlayerRef("test", "admin", "Admin"), is_admin=True, is_operator=True)


def actor(name: str, channel: ChannelRef = CHANNEL) -> Actor:
    """A player acting in ``channel``'s tenant."""
    return Actor(PlayerRef("test", name, name.title()), tenant=channel.tenant)


@pytest.fixture
async def app(db_url: str, clock: FrozenClock, platform: FakePlatform) -> AsyncIterator[App]:
    """The app as the CLI builds it (tests/bootstrap.py) on a migrated database holding the test bank,
    posting to ``platform`` on ``clock``."""
    from tests.bootstrap import build_test_app  # here, not at the top: it imports this module

    made = await build_test_app(db_url, clock=clock, platform=platform, bank=test_bank())
    yield made
    await made.close()


@pytest.fixture
def service(app: App) -> QuizService:
    """The app's quiz service (its start and answer paths go through group commit, as in the app)."""
    return app.service


@pytest.fixture(autouse=True)
def _root_logging_restored() -> Iterator[None]:
    """A CLI run in-process (``runner.cli.main``, ``rankzero`` through CliRunner) configures the root
    logger as a process would: its handlers and level are put back after each test, so one test's logging
    set-up never writes into the next test's output.
    """
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
