"""``rankzero secrets``: the key that encrypts stored Slack tokens (RANKZERO_SECRET_KEY, bot/secret_box.py).

``new-key`` prints a fresh key; ``rotate`` re-encrypts every stored token with the first key of
RANKZERO_SECRET_KEY (tokens stored before encryption existed are encrypted by it too).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from bot.cli._common import run_app

if TYPE_CHECKING:
    from bot.config import Settings
    from bot.services import App


@click.group()
def secrets() -> None:
    """Encrypted Slack tokens: make a key, rotate to a new one (RANKZERO_SECRET_KEY)."""


@secrets.command("new-key")
def new_key_command() -> None:
    """Print a fresh random key for RANKZERO_SECRET_KEY."""
    from bot.secret_box import new_key

    click.echo(new_key())


@secrets.command("rotate")
@click.pass_obj
def rotate(settings: Settings) -> None:
    """Re-encrypt every stored Slack token with the first key of RANKZERO_SECRET_KEY.

    To rotate: set RANKZERO_SECRET_KEY=NEW,OLD (the new key first), run this, then set it to NEW alone.
    All or nothing: a token no listed key decrypts stops it before anything is written.
    """
    from bot.bootstrap import slack_installation_store

    async def body(app: App) -> tuple[int, int]:
        return await slack_installation_store(settings, app.engine).reseal_all()

    total, plaintext = run_app(settings, body)
    note = f" ({plaintext} of them stored in plaintext before)" if plaintext else ""
    click.echo(f"{total} Slack token(s) encrypted with the first key of RANKZERO_SECRET_KEY{note}")
