"""Settings from environment variables (prefix ``RANKZERO_``) and an optional ``.env`` file.

Built only in the entry points (bot/cli/) and passed down as arguments.
"""

from __future__ import annotations

import ipaddress
import os
import re
import socket
from pathlib import Path
from typing import Any

from pydantic import Field, SecretStr, ValidationInfo, field_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from bot.core.errors import ConfigurationError
from bot.core.sharding import MAX_SHARDS, ShardSet, parse_shards, shard_of_pod
from bot.core.tenancy import TenantAllowList

#: The TOML file read when RANKZERO_CONFIG names none (relative to the working directory).
DEFAULT_TOML = "rankzero.toml"


def mask_url(url: str) -> str:
    """``url`` with its password replaced by ``***``: safe to log or show (the original is not changed)."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        # Not a URL SQLAlchemy parses (a typo): still never show what sits between "user:" and "@".
        masked = re.sub(r"(://[^/@:]*:)[^@]*@", r"\1***@", url)
        if masked == url and "@" in url:
            # No "://" (a typo such as "postgresql//u:pw@h"): hide what follows the first ":" up to the host.
            head, _, host = url.rpartition("@")
            user, colon, _ = head.partition(":")
            masked = f"{user}:***@{host}" if colon else url
        return masked


def toml_path() -> Path:
    """The TOML settings file: the path in RANKZERO_CONFIG (which must exist), else ./rankzero.toml.

    Read when Settings are built, not at import, so RANKZERO_CONFIG set by a wrapper or a test counts.
    """
    named = os.environ.get("RANKZERO_CONFIG")
    if not named:
        return Path(DEFAULT_TOML)
    path = Path(named).expanduser()
    if not path.is_file():
        # An explicitly named file that is missing is a mistake, not "no file": say so instead of
        # silently running on defaults.
        raise FileNotFoundError(f"RANKZERO_CONFIG names {named!r}, which is not a readable file")
    return path


def default_data_dir() -> Path:
    """Where the embedded SQLite database lives: ``$XDG_DATA_HOME/rankzero`` (~/.local/share/rankzero)."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "rankzero"


class Settings(BaseSettings):
    """Every setting of the bot. Secrets are SecretStr so they never show up in logs or reprs."""

    model_config = SettingsConfigDict(
        env_prefix="RANKZERO_",
        env_file=".env",
        extra="ignore",
        # "RANKZERO_DISCORD_TOKEN=" (an emptied line in .env) means unset, not an empty token that would
        # enable the adapter.
        env_ignore_empty=True,
        # The optional TOML file (keys as the field names) is chosen by toml_path() at build time.
    )

    data_dir: Path = Field(default_factory=default_data_dir)
    database_url: str = ""
    problems_per_challenge: int = Field(default=5, ge=1, le=10)
    #: First attempts a team must have made on a question before its learned difficulty (bot/core/
    #: difficulty.py) replaces the bank's label in the daily ramp and counts as disagreeing with it.
    learned_difficulty_min_attempts: int = Field(default=20, ge=1, le=100_000)
    default_timezone: str = "UTC"
    runner_url: str | None = None
    runner_token: SecretStr | None = None
    #: Runner runs (disputes and variants) a player may ask for per hour.
    disputes_per_hour: int = Field(default=6, ge=1, le=1000)
    #: Runner jobs (disputes and question previews together) one tenant may start per hour, and run at
    #: once, so that one large server or workspace cannot starve the others.
    runner_jobs_per_tenant_hour: int = Field(default=60, ge=1, le=100_000)
    runner_jobs_per_tenant_at_once: int = Field(default=2, ge=1, le=1000)
    admins: list[str] = Field(default_factory=list)
    #: The tenants this bot serves (issue 24): ``discord:<guild id>``, ``slack:<team id>`` or
    #: ``slack:<enterprise id>`` (a whole Grid org). Empty: every server or workspace that adds it. The
    #: Discord adapter leaves other servers; the Slack app ignores their requests and refuses installs.
    allowed_tenants: list[str] = Field(default_factory=list)
    # --- rankzero serve (bot/serve.py); chat tokens are SecretStr: never logged, never in reprs
    discord_token: SecretStr | None = None
    #: Discord roles (ids) whose members are RankZero admins, besides Manage Server holders.
    discord_admin_roles: list[int] = Field(default_factory=list)
    #: Sync slash commands to this guild only (instant; global commands take up to an hour to appear).
    discord_guild_id: int | None = None
    #: Where admin notices (contradicted answers) are posted.
    discord_admin_channel_id: int | None = None
    #: Run an AutoShardedClient (large bots: many guilds).
    discord_sharded: bool = False
    #: The Discord shards this process connects and schedules for, "IDS/COUNT" ("0,1/4": shards 0 and 1 of
    #: 4). Unset: one process for every guild. Slack, console and file channels are served by every process.
    discord_shards: str | None = None
    #: One shard per StatefulSet pod (deploy/bot.yaml): this pod's shard id, e.g. from the downward API's
    #: ``apps.kubernetes.io/pod-index`` label; unset: the ordinal at the end of the hostname (the pod name).
    discord_shard_index: int | None = Field(default=None, ge=0, lt=MAX_SHARDS)
    #: One shard per StatefulSet pod: the shard count, equal to the StatefulSet's replicas. Set, the process
    #: runs shard (index or ordinal) of this count; RANKZERO_DISCORD_SHARDS must then be unset.
    discord_shard_count: int | None = Field(default=None, ge=1, le=MAX_SHARDS)
    #: Discord's REST base URL (default discord.py's, https://discord.com/api/v10); for a proxy or a fake.
    discord_api_url: str | None = None
    #: Discord's gateway URL (default discord.py's, wss://gateway.discord.gg/); for a proxy or a fake.
    discord_gateway_url: str | None = None
    slack_bot_token: SecretStr | None = None
    slack_app_token: SecretStr | None = None
    slack_signing_secret: SecretStr | None = None
    #: Where Slack admin notices (contradicted answers) are posted: a channel id (C...) the bot is in.
    slack_admin_channel_id: str | None = None
    #: The Slack Web API's base URL (default Slack's own); for an egress proxy, or a local fake in tests.
    slack_api_url: str | None = None
    #: Slack HTTP mode (no app token): where /slack/events listens (put a TLS proxy in front).
    slack_host: str = "127.0.0.1"
    slack_port: int = Field(default=3000, ge=0, le=65535)
    #: Our own per-workspace budget of Slack's Tier 4 methods (views.open/update/push, users.info), calls a
    #: minute per method, and how many may go at once (bot/adapters/slack/budget.py). Slack documents Tier 4
    #: as "100+ per minute" with bursts (https://api.slack.com/docs/rate-limits); a rush past the budget
    #: plays in private messages instead of modals, and later calls wait their turn here instead of 429s.
    slack_tier4_per_minute: float = Field(default=100, gt=0, le=10_000)
    slack_tier4_burst: int = Field(default=20, ge=1, le=1_000)
    # --- Slack OAuth mode (one RankZero, many workspaces): chosen when RANKZERO_SLACK_CLIENT_ID,
    # RANKZERO_SLACK_CLIENT_SECRET and RANKZERO_SLACK_SIGNING_SECRET are set (Basic Information > App
    # Credentials). Workspaces install at https://<host>/slack/install; Slack sends the installer back to
    # /slack/oauth_redirect; each workspace's bot token is kept in the database (slack_installations,
    # slack_bots), and the OAuth ``state`` too (slack_oauth_states: good once, for 10 minutes, tied to the
    # installer's browser by a cookie, so no separate state secret is needed). RANKZERO_SLACK_BOT_TOKEN is
    # then not used.
    slack_client_id: str | None = None
    slack_client_secret: SecretStr | None = None
    #: The public https URL of /slack/oauth_redirect, exactly as listed under OAuth & Permissions >
    #: Redirect URLs (unset: Slack uses the app's only redirect URL).
    slack_redirect_uri: str | None = None
    #: Slack's authorization page (default Slack's own; a local fake in tests).
    slack_authorize_url: str | None = None
    #: The key(s) stored Slack tokens are encrypted with (bot/secret_box.py): Fernet keys, comma-separated,
    #: the first encrypting; required in Slack OAuth mode. `rankzero secrets new-key` makes one.
    secret_key: SecretStr | None = None

    @property
    def slack_oauth(self) -> bool:
        """True when Slack runs in OAuth mode (client id, client secret and signing secret are set)."""
        return bool(self.slack_client_id and self.slack_client_secret and self.slack_signing_secret)

    #: The file platform (bot/adapters/file): append every post to this JSON-lines file.
    record_file: Path | None = None
    #: A post missed while no process ran is still made at start within this many minutes.
    grace_minutes: int = Field(default=60, ge=0, le=24 * 60)
    #: How often (seconds) serve looks for schedule changes made by another process.
    schedule_sync_s: float = Field(default=30.0, gt=0)
    #: /healthz, /livez and /readyz at this port (0: no health endpoint).
    health_port: int = Field(default=8787, ge=0, le=65535)
    #: The address the health endpoint listens on: loopback by default (only this host can probe it);
    #: 0.0.0.0 (or ::) in a container, where the orchestrator probes the pod's address.
    health_host: str = "127.0.0.1"
    # --- the read-only web page of a channel (issue 30 §3; bot/adapters/web): off unless both are set.
    #: The secret web page links are signed with (HMAC-SHA256; at least 32 characters, e.g. from `rankzero
    #: secrets new-key`). Changing it ends every link given out.
    web_secret: SecretStr | None = None
    #: The public base URL the links point at (https://..., a TLS proxy in front of the web port).
    public_url: str | None = None
    #: Days a link works after `/rankzero web` (Slack) or `/web` (Discord) gave it.
    web_link_days: float = Field(default=7.0, gt=0, le=90)
    #: Where the page listens (loopback by default: put the TLS proxy on this host, or 0.0.0.0 in a
    #: container); its own port, apart from the health port.
    web_host: str = "127.0.0.1"
    web_port: int = Field(default=8790, ge=1, le=65535)

    @property
    def web_enabled(self) -> bool:
        """True when the web page is on (a secret and a public URL are set)."""
        return bool(self.web_secret and self.web_secret.get_secret_value() and self.public_url)

    # --- a database that stops answering (a frozen server, a network that drops packets) must fail calls
    # within these bounds instead of holding a job, a click or shutdown for good (issue 25).
    #: Seconds to open a PostgreSQL connection (asyncpg's own default is 60).
    db_connect_timeout_s: float = Field(default=10.0, gt=0, le=600)
    #: Seconds one PostgreSQL statement may wait for its answer (asyncpg's command_timeout, counted on the
    #: client: it also ends a wait on a server that answers nothing).
    db_statement_timeout_s: float = Field(default=30.0, gt=0, le=3600)
    #: Seconds a call waits for a free pooled connection before it fails.
    db_pool_timeout_s: float = Field(default=30.0, gt=0, le=3600)
    #: PostgreSQL connections each process keeps open in its pool, and how many more it may open in a
    #: burst (closed again when returned): at most size + overflow at once. Size the database's
    #: max_connections for every process (bot replicas, migrations, the CLI) at its most. SQLite always
    #: uses one connection (every transaction takes the file's write lock anyway).
    db_pool_size: int = Field(default=10, ge=1, le=1000)
    db_pool_overflow: int = Field(default=10, ge=0, le=1000)
    #: Seconds a SQLite statement waits for another process's lock on the file (SQLite's busy timeout).
    sqlite_busy_timeout_s: float = Field(default=30.0, gt=0, le=3600)
    #: Seconds one scheduler job (a post, close, reminder, summary, the schedule sync...) may run; past it
    #: the job is cancelled, reported on /healthz and retried like a failure.
    job_deadline_s: float = Field(default=120.0, gt=0, le=3600)
    #: Seconds one chat interaction (a command, a button, a form) may take before the user is told that
    #: the bot could not finish it.
    handler_deadline_s: float = Field(default=60.0, gt=0, le=900)
    #: How log lines are written to stderr: ``text`` (one readable line, the default for a terminal) or
    #: ``json`` (one JSON object per line, for a log collector; bot/logs.py lists the keys).
    log_format: str = "text"
    #: Seconds serve takes to stop after SIGTERM/SIGINT, whatever the database does; work still running
    #: then is abandoned (and named in the log).
    shutdown_timeout_s: float = Field(default=15.0, gt=0, le=600)
    # --- the outbox (bot/core/outbox.py): posts queued with their cause until the platform accepts them.
    #: Seconds a sender holds a queued post: a process killed mid-send leaves it to another (or to the
    #: restart) after this long. Longer than one post can take.
    outbox_lease_s: float = Field(default=120.0, gt=0, le=3600)
    #: Seconds before the first retry of a refused post; doubled per try up to ``outbox_retry_max_s``.
    outbox_retry_base_s: float = Field(default=30.0, gt=0, le=3600)
    outbox_retry_max_s: float = Field(default=1800.0, gt=0, le=86400)
    #: Seconds after it was queued that a post still refused is given up (the admins are told).
    outbox_give_up_s: float = Field(default=86400.0, gt=0, le=7 * 86400)
    #: How often the scheduler delivers the queued posts that are due, seconds.
    outbox_interval_s: float = Field(default=15.0, gt=0, le=3600)
    # --- fan-out of scheduled posts (bot/core/fanout.py: the rates and their sources)
    #: Scheduled posts of one platform under way at once.
    post_concurrency_discord: int = Field(default=16, ge=1, le=1000)
    post_concurrency_slack: int = Field(default=16, ge=1, le=1000)
    #: Scheduled posts started per second, at most, per platform (Discord's global limit is 50 requests/s
    #: per bot; Slack's chat.postMessage is 1/s per channel with an unpublished workspace limit).
    post_rate_discord: float = Field(default=40.0, gt=0, le=1000)
    post_rate_slack: float = Field(default=20.0, gt=0, le=1000)
    #: Pooled connections kept for clicks and other jobs while posts fan out (the posts get the rest).
    post_db_reserve: int = Field(default=4, ge=0, le=1000)

    @field_validator("allowed_tenants")
    @classmethod
    def _tenant_keys(cls, value: list[str]) -> list[str]:
        try:
            TenantAllowList(value)
        except ConfigurationError as exc:  # pydantic reports a ValueError as the field's error
            raise ValueError(str(exc)) from None
        return [v.strip() for v in value]

    @property
    def tenant_allow_list(self) -> TenantAllowList:
        """``allowed_tenants`` as the adapters check it."""
        return TenantAllowList(self.allowed_tenants)

    @field_validator("log_format")
    @classmethod
    def _known_log_format(cls, value: str) -> str:
        chosen = value.strip().lower()
        if chosen not in ("text", "json"):
            raise ValueError(
                f"RANKZERO_LOG_FORMAT={value[:40]!r} is not a log format: give text (readable lines, the "
                "default) or json (one JSON object per line)"
            )
        return chosen

    @field_validator("health_host")
    @classmethod
    def _health_host_is_an_address(cls, value: str) -> str:
        try:
            return str(ipaddress.ip_address(value.strip()))
        except ValueError:
            raise ValueError(
                f"RANKZERO_HEALTH_HOST={value!r} is not an IP address: give 127.0.0.1 (this host only, the "
                "default) or 0.0.0.0 (every interface, as in a container)"
            ) from None

    @field_validator("discord_shards")
    @classmethod
    def _valid_shards(cls, value: str | None) -> str | None:
        if value is not None:
            parse_shards(value)  # ValueError: pydantic reports it with the field's name
        return value

    @field_validator("discord_shard_count")
    @classmethod
    def _shard_of_this_pod(cls, value: int | None, info: ValidationInfo) -> int | None:
        # Resolved here, so that a pod without an ordinal or past the count stops at start in one line.
        if value is None:
            return None
        if info.data.get("discord_shards"):
            raise ValueError(
                "RANKZERO_DISCORD_SHARDS and RANKZERO_DISCORD_SHARD_COUNT are both set: give the shards as "
                "IDS/COUNT, or the count alone (one shard per StatefulSet pod), not both"
            )
        shard_of_pod(socket.gethostname(), value, info.data.get("discord_shard_index"))
        return value

    @field_validator("database_url")
    @classmethod
    def _valid_database_url(cls, value: str) -> str:
        # Refused here, in one line that never repeats the URL (it may hold a password), rather than as a
        # traceback from the driver import or the port's int() when the first command connects.
        if not value:
            return value
        if (
            "://" not in value
            and value.endswith((".db", ".sqlite", ".sqlite3"))
            and not value.startswith(("postgres", "sqlite"))
        ):
            # A plain file path (``--db ./rankzero.db``): the SQLite file it names.
            return f"sqlite+aiosqlite:///{Path(value).expanduser().resolve()}"
        example = (
            "e.g. postgresql+asyncpg://USER:PASSWORD@HOST:5432/DB or sqlite+aiosqlite:////PATH/rankzero.db"
        )
        try:
            backend = make_url(value).get_backend_name()
        except (ArgumentError, ValueError):
            raise ValueError(
                f"not a database URL (check the scheme, '://' and the port): {example}"
            ) from None
        if backend not in ("sqlite", "postgresql"):
            raise ValueError(f"the {backend!r} database is not supported (SQLite or PostgreSQL): {example}")
        return value

    @property
    def discord_shard_set(self) -> ShardSet | None:
        """The parsed RANKZERO_DISCORD_SHARDS; else, with RANKZERO_DISCORD_SHARD_COUNT, this pod's one shard
        (RANKZERO_DISCORD_SHARD_INDEX, or the ordinal of its hostname); else None (one process, every guild).
        """
        if self.discord_shards:
            return parse_shards(self.discord_shards)
        if self.discord_shard_count is not None:
            return shard_of_pod(socket.gethostname(), self.discord_shard_count, self.discord_shard_index)
        return None

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Precedence: arguments, environment, .env, then the TOML file (then the defaults)."""
        return (
            init_settings,
            env_settings,
            dotenv_settings,
            TomlConfigSettingsSource(settings_cls, toml_file=toml_path()),
            file_secret_settings,
        )

    def __repr_args__(self) -> Any:
        """Fields for repr()/str(): tokens are SecretStr already; the database URL's password is masked."""
        for name, value in super().__repr_args__():
            yield name, mask_url(value) if name == "database_url" and isinstance(value, str) else value

    def model_post_init(self, __context: object) -> None:
        """Derive the SQLite URL from the data directory when no URL is given."""
        if not self.database_url:
            self.database_url = f"sqlite+aiosqlite:///{self.data_dir / 'rankzero.db'}"
