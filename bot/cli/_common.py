"""What the CLI's command modules share: the console channel, the player, running a command on the app.

Private to bot/cli (imported by its modules, by nothing else). It stays light: SQLAlchemy, pydantic, rich
and the services are imported inside ``run_app``, when a command runs, never when ``--help`` lists them.
"""

from __future__ import annotations

import getpass
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from bot.adapters.console.safe import visible
from bot.cli.errors import database_message, is_database_error
from bot.core.errors import ConfigurationError, RankZeroError
from bot.core.models import (
    Actor,
    ChannelRef,
    PlayerRef,
    Tenant,
    bounded_display_name,
    player_name_problem,
)

if TYPE_CHECKING:
    from rich.console import Console

    from bot.config import Settings
    from bot.services import App
    from questions.loader import LoadedQuestion

T = TypeVar("T")
#: The console's local "channel": one per database (play, dispute and the schedule commands use it).
CONSOLE_CHANNEL = ChannelRef("console", "local", "local", "terminal")


class PlayerName(click.ParamType[str, Any]):
    """A ``--player`` value: stripped, bounded, no control characters (a usage error otherwise, exit 2)."""

    name = "NAME"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        """The stripped name, or a usage error that says what is wrong with it and how to fix it."""
        text = str(value)
        if (problem := player_name_problem(text)) is not None:
            self.fail(problem, param, ctx)
        return text.strip()


#: The type of every command's ``--player`` option.
PLAYER_NAME = PlayerName()


class TenantKey(click.ParamType[Tenant, Any]):
    """A ``--tenant`` value: ``discord:<guild id>``, ``slack:<team or enterprise id>``... (a usage error,
    exit 2, otherwise).
    """

    name = "PLATFORM:WORKSPACE"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Tenant:
        """The tenant, or a usage error saying how to write one."""
        if isinstance(value, Tenant):
            return value
        try:
            return Tenant.from_key(str(value).strip())
        except ValueError as exc:
            self.fail(f"{exc}; write e.g. discord:123456789012345678 or slack:T0123ABCD", param, ctx)


#: The type of the operator's ``--tenant`` option (act for one tenant, as its admin would).
TENANT_KEY = TenantKey()


def console_player(name: str | None) -> PlayerRef:
    """The console player called ``name`` (default: the login name).

    ``name`` comes through :data:`PLAYER_NAME` (checked); the login name is made safe instead, since a
    player cannot be refused for the name their account has.
    """
    if name is None or player_name_problem(name) is not None:
        name = bounded_display_name(name or getpass.getuser() or "player", "player")
    name = name.strip()
    return PlayerRef("console", name.lower(), name)


def console_actor(name: str | None) -> Actor:
    """A console player, acting in the console's local tenant (where its challenges are)."""
    return Actor(console_player(name), tenant=CONSOLE_CHANNEL.tenant)


def tenant_admin(tenant: Tenant) -> Actor:
    """The operator acting for one tenant, exactly as that tenant's admin would (its overlay only)."""
    return Actor(console_player(None), is_admin=True, tenant=tenant)


def operator() -> Actor:
    """Whoever runs the CLI on the bot's database: the operator, who manages the shared question bank
    every tenant plays (a chat admin manages their own tenant's overlay only).
    """
    return Actor(console_player(None), is_admin=True, is_operator=True)


def run_app(
    settings: Settings,
    body: Callable[[App], Awaitable[T]],
    *,
    console: Console | None = None,
    seed_bank: bool = False,
    local_runner: bool = False,
) -> T:
    """Build the app, run ``body``, always dispose; domain errors become a clean message and exit 1
    (2 for a setting or option that cannot work, a ConfigurationError).

    ``local_runner``: without RANKZERO_RUNNER_URL, disputes start a local runner on first use.
    """
    import asyncio

    from rich.console import Console

    from bot.adapters.console.play import ConsolePlatform
    from bot.bootstrap import build_app, shipped_bank_specs
    from questions.loader import BankValidationError

    async def main() -> T:
        app = await build_app(
            settings, platform=ConsolePlatform(console or Console()), local_runner=local_runner
        )
        try:
            if seed_bank:
                # The shipped bank is synced each time: new questions and edits (as new versions) arrive
                # with an upgrade of RankZero; retired questions stay retired.
                await app.service.admin_import(operator(), shipped_bank_specs())
            return await body(app)
        finally:
            await app.close()

    try:
        return asyncio.run(main())
    except BankValidationError as exc:
        for err in exc.errors:
            click.echo(visible(str(err)), err=True)
        raise SystemExit(1) from None
    except ConfigurationError as exc:
        # A setting or option that cannot work (RANKZERO_RUNNER_URL, --tz, ...): a usage error, exit 2 as
        # for a bad option value or a bad setting found at start, whichever command found it.
        click.echo(f"error: {visible(str(exc))}", err=True)
        raise SystemExit(2) from None
    except RankZeroError as exc:
        click.echo(f"error: {visible(str(exc))}", err=True)
        raise SystemExit(1) from None
    except Exception as exc:
        if not is_database_error(exc):
            raise
        logging.getLogger(__name__).debug("database failure", exc_info=True)
        click.echo(f"error: {database_message(settings.database_url, exc)}", err=True)
        raise SystemExit(1) from None


def load_questions_or_exit(paths: tuple[str, ...], *, importing: bool) -> list[LoadedQuestion]:
    """Validate ``paths`` and return the questions with where each was written; on errors print each one
    and a count, then exit 1.
    """
    from questions.loader import BankValidationError, load_paths

    try:
        return load_paths(paths)
    except BankValidationError as exc:
        for err in exc.errors:
            click.echo(visible(str(err)), err=True)
        outcome = "nothing imported" if importing else "fix them and validate again"
        click.echo(f"{len(exc.errors)} error(s); {outcome}", err=True)
        raise SystemExit(1) from None


def load_specs_or_exit(paths: tuple[str, ...], *, importing: bool) -> list[dict[str, Any]]:
    """Validate ``paths``; on errors print each one and a count, then exit 1."""
    loaded = load_questions_or_exit(paths, importing=importing)
    return [q.import_spec() for q in loaded]
