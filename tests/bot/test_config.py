"""Settings from rankzero.toml, .env and the environment; secrets never shown in reprs or serve's output.

The process tests run ``rankzero -v serve`` (INFO logging) with every secret configured through the
files, and search everything the process printed for them: once while it runs and stops on SIGTERM,
once while it fails on an unreachable database.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest
from pydantic import ValidationError
from sqlalchemy.engine import make_url

from bot.config import Settings, mask_url
from tests.slack_fake import FakeSlackApi, running_in_thread
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
RANKZERO = [sys.executable, "-m", "bot.cli"]

SECRETS = {
    "discord_token": "discord-SECRET-d1",
    "slack_bot_token": "xoxb-SECRET-b2",
    "slack_app_token": "xapp-SECRET-a3",
    "slack_signing_secret": "signing-SECRET-s4",
    "runner_token": "runner-SECRET-r5",
}
DB_PASSWORD = "db-SECRET-p6"


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty working directory and an environment without any RANKZERO_ setting."""
    for name in list(os.environ):
        if name.startswith("RANKZERO_") and name != "RANKZERO_TEST_PG_URL":
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _toml(path: Path, values: Mapping[str, object]) -> Path:
    lines = []
    for key, value in values.items():
        lines.append(f"{key} = {value}" if isinstance(value, int) else f'{key} = "{value}"')
    path.write_text("\n".join(lines) + "\n")
    return path


def test_toml_then_dotenv_then_environment_take_precedence(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _toml(
        workdir / "rankzero.toml",
        {
            "grace_minutes": 15,
            "default_timezone": "Europe/Berlin",
            "runner_url": "http://toml-runner:8000",
            "discord_token": "from-toml",
            "health_port": 9001,
        },
    )
    (workdir / ".env").write_text(
        "RANKZERO_DISCORD_TOKEN=from-dotenv\nRANKZERO_GRACE_MINUTES=20\nRANKZERO_HEALTH_PORT=9002\n"
    )
    monkeypatch.setenv("RANKZERO_GRACE_MINUTES", "30")

    s = Settings()
    assert s.default_timezone == "Europe/Berlin" and s.runner_url == "http://toml-runner:8000"  # toml only
    assert s.discord_token is not None and s.discord_token.get_secret_value() == "from-dotenv"  # .env > toml
    assert s.health_port == 9002
    assert s.grace_minutes == 30  # environment > .env > toml
    assert Settings(grace_minutes=45).grace_minutes == 45  # arguments (the --db option) above all


def test_rankzero_config_names_another_toml_file(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _toml(workdir / "rankzero.toml", {"grace_minutes": 15})
    elsewhere = workdir / "etc" / "bot.toml"
    elsewhere.parent.mkdir()
    _toml(elsewhere, {"grace_minutes": 25, "default_timezone": "Asia/Tokyo"})
    monkeypatch.setenv("RANKZERO_CONFIG", str(elsewhere))
    s = Settings()
    assert (s.grace_minutes, s.default_timezone) == (25, "Asia/Tokyo"), "read at build time, not import"

    monkeypatch.setenv("RANKZERO_CONFIG", str(workdir / "missing.toml"))
    with pytest.raises(FileNotFoundError, match=r"RANKZERO_CONFIG names .*missing\.toml"):
        Settings()


def test_an_emptied_dotenv_line_leaves_the_platform_off(workdir: Path) -> None:
    (workdir / ".env").write_text("RANKZERO_DISCORD_TOKEN=\nRANKZERO_SLACK_BOT_TOKEN=\n")
    s = Settings()
    assert s.discord_token is None and s.slack_bot_token is None


def test_secrets_and_the_database_password_never_appear_in_repr_or_str(workdir: Path) -> None:
    _toml(workdir / "rankzero.toml", dict(SECRETS))
    url = f"postgresql+asyncpg://rankzero:{DB_PASSWORD}@db.internal:5432/rankzero"
    (workdir / ".env").write_text(f"RANKZERO_DATABASE_URL={url}\n")
    s = Settings()
    assert s.database_url == url, "the real URL is kept for connecting"
    assert s.runner_token is not None and s.runner_token.get_secret_value() == SECRETS["runner_token"]
    for shown in (repr(s), str(s)):
        for secret in [*SECRETS.values(), DB_PASSWORD]:
            assert secret not in shown
        assert "rankzero:***@db.internal:5432/rankzero" in shown


def test_mask_url() -> None:
    assert mask_url("postgresql://u:p%40ss@h/db") == "postgresql://u:***@h/db"
    assert mask_url("sqlite+aiosqlite:////tmp/x.db") == "sqlite+aiosqlite:////tmp/x.db"
    assert mask_url("not a url://u:pw@h") == "not a url://u:***@h"  # unparsable: masked all the same
    # "://" mistyped: the password is hidden all the same
    assert mask_url("postgresql+asyncpg//u:pw-SECRET@h/db") == "postgresql+asyncpg//u:***@h/db"


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("mysql://u:db-SECRET@h/x", "'mysql' database is not supported"),
        ("postgresql+asyncpg://u:db-SECRET@h:notaport/x", "not a database URL"),
        ("postgresql+asyncpg//u:db-SECRET@h/x", "not a database URL"),
    ],
)
def test_a_bad_database_url_is_refused_without_echoing_it(url: str, says: str) -> None:
    """Refused when settings are read (one line naming the field), not as a driver traceback later."""
    with pytest.raises(ValidationError) as caught:
        Settings(database_url=url)
    (error,) = caught.value.errors()
    assert error["loc"] == ("database_url",) and says in error["msg"] and "db-SECRET" not in error["msg"]


def test_a_plain_file_path_is_the_sqlite_file_it_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--db ./rankzero.db`` (a path, as people type it) is that SQLite file, made absolute."""
    monkeypatch.chdir(tmp_path)
    assert Settings(database_url="play.db").database_url == f"sqlite+aiosqlite:///{tmp_path / 'play.db'}"
    assert Settings(database_url=str(tmp_path / "x.sqlite")).database_url == (
        f"sqlite+aiosqlite:///{tmp_path / 'x.sqlite'}"
    )


# ---------------------------------------------------------------------- the serve process
def _configure_files(workdir: Path, db_url: str, slack_api_url: str | None = None) -> None:
    """All secrets via rankzero.toml or .env; Slack in HTTP mode (its Web API: ``slack_api_url``, a local
    fake that checks the token at start), the file platform.
    """
    toml: dict[str, object] = {
        k: v for k, v in SECRETS.items() if k not in ("discord_token", "slack_app_token")
    }
    toml |= {"slack_port": 0, "health_port": 0, "runner_url": "http://127.0.0.1:9"}
    if slack_api_url:
        toml["slack_api_url"] = slack_api_url
    _toml(workdir / "rankzero.toml", toml)
    # Discord and Socket Mode stay off: they would connect to the internet at start.
    (workdir / ".env").write_text(
        f"RANKZERO_DATABASE_URL={db_url}\nRANKZERO_RECORD_FILE={workdir / 'posts.jsonl'}\n"
    )


def _env(workdir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RANKZERO_")}
    return env | {"PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}


def _assert_nothing_secret(output: str, password: str) -> None:
    for secret in [*SECRETS.values(), password]:
        assert secret not in output, f"{secret!r} leaked into serve's output:\n{output[-3000:]}"


@pytest.mark.slow
@pytest.mark.postgres
def test_serve_logs_no_secret_while_running_and_stopping(pg_database: str, workdir: Path) -> None:
    url = make_url(pg_database)
    if url.password is None:
        url = url.set(password=DB_PASSWORD)  # trust auth ignores it; it must still never be shown
    password = str(url.password)
    slack = FakeSlackApi(bot_token=SECRETS["slack_bot_token"])  # auth.test at start accepts the token
    log = workdir / "serve.log"
    with running_in_thread(slack), log.open("wb") as out:
        _configure_files(workdir, url.render_as_string(hide_password=False), slack.base_url)
        proc = subprocess.Popen(
            [*RANKZERO, "-v", "serve"], cwd=workdir, env=_env(workdir), stdout=out, stderr=subprocess.STDOUT
        )
        try:

            def running() -> bool:
                assert proc.poll() is None, log.read_text()[-3000:]
                return "rankzero serve: running" in log.read_text()

            wait_until(running, "rankzero serve did not say it runs", polls=450, every_s=0.2)
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
    output = log.read_text()
    assert "running (slack, file)" in output and "INFO bot.storage.db: database at" in output
    assert ":***@" in output, "the database URL is logged, masked"
    _assert_nothing_secret(output, password)


@pytest.mark.slow
def test_serve_on_an_unreachable_database_says_so_without_secrets(workdir: Path) -> None:
    _configure_files(workdir, f"postgresql+asyncpg://rankzero:{DB_PASSWORD}@127.0.0.1:1/rankzero")
    done = subprocess.run(
        [*RANKZERO, "-v", "serve"], cwd=workdir, env=_env(workdir), capture_output=True, text=True, timeout=90
    )
    assert done.returncode == 1
    assert "error: cannot use the database at postgresql+asyncpg://rankzero:***@127.0.0.1:1/rankzero" in (
        done.stderr
    )
    assert "Traceback" not in done.stderr
    _assert_nothing_secret(done.stdout + done.stderr, DB_PASSWORD)


def test_cli_names_bad_settings_instead_of_a_traceback(workdir: Path) -> None:
    """A missing RANKZERO_CONFIG file or an out-of-range value: one clear line, exit 2, no traceback."""
    cases = [
        ({"RANKZERO_CONFIG": str(workdir / "missing.toml")}, "missing.toml"),
        ({"RANKZERO_PROBLEMS_PER_CHALLENGE": "99"}, "problems_per_challenge"),
        ({"RANKZERO_DATABASE_URL": "mysql://u:db-SECRET@h/x"}, "'mysql' database is not supported"),
    ]
    broken = workdir / "broken.toml"
    broken.write_text('database_url = "unterminated\n')  # not TOML at all: named, not a traceback
    cases.append(({"RANKZERO_CONFIG": str(broken)}, "broken.toml is not valid TOML"))
    for extra, named in cases:
        env = {**os.environ, **extra}
        done = subprocess.run(
            [*RANKZERO, "stats"], cwd=workdir, env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 2, done.stderr
        assert "error: bad RankZero settings" in done.stderr
        assert named in done.stderr
        assert "Traceback" not in done.stderr
