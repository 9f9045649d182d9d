"""No silent failures: whatever goes wrong in a handler, the user gets a short private answer and the cause
is logged.

discord.py swallows a DynamicItem callback's exception (it only logs it), leaves a deferred slash command
on "thinking…" when its body raises, and a modal's ``on_error`` only logs. Every entry point of the
adapter therefore ends in :func:`tell_failure`: the command tree's ``on_error`` (:class:`RankZeroTree`),
the button wrappers (components.py, practice_components.py, disputes.py) and the router of form
submissions (submissions.py).
"""

from __future__ import annotations

import logging
from typing import Any

import discord
from discord import app_commands

from bot.adapters.discord.sanitize import no_mentions, safe_text
from bot.commands.deadline import HandlerDeadlineError
from bot.core.errors import RankZeroError
from bot.core.models import Tenant
from bot.core.ports import TransientConflictError
from bot.logs import log_context

log = logging.getLogger(__name__)


def failure_text(exc: BaseException, reference: int | str) -> str:
    """What the user reads: a domain error as is, otherwise what happened in one line, never a trace."""
    if isinstance(exc, RankZeroError):
        return f"⚠️ {safe_text(str(exc))}"
    if isinstance(exc, HandlerDeadlineError):
        return (
            f"⚠️ I could not finish this within {exc.seconds:g} s: the database did not answer in time. It "
            f"is logged as {reference}; please try again in a moment."
        )
    if isinstance(exc, TransientConflictError):
        return "⚠️ The database was busy with other players just now; nothing was recorded. Please try again."
    if isinstance(exc, app_commands.BotMissingPermissions):
        missing = ", ".join(p.replace("_", " ").title() for p in exc.missing_permissions)
        return f"⚠️ I lack the permission(s) {missing} in this channel: ask a server admin to grant them."
    if isinstance(exc, (app_commands.CommandNotFound, app_commands.CommandSignatureMismatch)):
        return (
            "⚠️ This command changed since your Discord app loaded it: reload Discord (Ctrl+R, or reopen the "
            "app) and try again."
        )
    if isinstance(exc, app_commands.NoPrivateMessage):
        return "⚠️ This command works in a server channel, not in direct messages."
    if isinstance(exc, app_commands.CheckFailure):
        return "⚠️ You cannot use this command here."
    if isinstance(exc, discord.Forbidden):
        return (
            "⚠️ Discord refused what I tried to do here (Missing Permissions or Missing Access): a server "
            "admin should check that I can View Channel, Send Messages and Embed Links in this channel."
        )
    if isinstance(exc, discord.HTTPException):
        return (
            f"⚠️ Discord rejected my reply (HTTP {exc.status}, code {exc.code}); it is logged as {reference}. "
            "Please try again."
        )
    return f"⚠️ Something went wrong on my side; it is logged as {reference}. Please try again in a moment."


async def tell_failure(interaction: discord.Interaction[Any], exc: BaseException, where: str) -> None:
    """Log ``exc`` with its cause and answer ``interaction`` privately (a first response or a follow-up)."""
    if isinstance(exc, app_commands.CommandInvokeError):
        exc = exc.original
    expected = isinstance(exc, (RankZeroError, app_commands.CheckFailure))
    log.log(
        logging.INFO if expected else logging.ERROR,
        "%s failed (interaction %s, user %s, channel %s)",
        where,
        interaction.id,
        interaction.user.id,
        interaction.channel_id,
        exc_info=None if expected else exc,
    )
    text = failure_text(exc, interaction.id)
    try:
        if interaction.response.is_done():
            await interaction.followup.send(text, ephemeral=True, allowed_mentions=no_mentions())
        else:
            await interaction.response.send_message(text, ephemeral=True, allowed_mentions=no_mentions())
    except discord.HTTPException as http:  # the token expired, or Discord is down: the log is all we have
        log.warning("could not tell the user that %s failed: %s", where, http)


#: What a member of a server the operator did not allow is told (RANKZERO_ALLOWED_TENANTS).
NOT_ALLOWED = "RankZero is not enabled in this server."


async def served_here(interaction: discord.Interaction[Any], what: str) -> bool:
    """Serve only the servers the operator allowed: an interaction (``what``: a command, a button, a form)
    from another one (the bot has not left it yet, or could not; a button on a post made before it was
    dropped) is answered with :data:`NOT_ALLOWED`, logged, and not run. DMs belong to no server.
    """
    allowed = getattr(interaction.client, "rankzero_allowed", None)
    guild_id = interaction.guild_id
    # Every command, button and form passes here first, in the task that handles it: its log lines
    # carry the server, the channel and the interaction from now on (bot/logs.py).
    log_context(
        tenant=Tenant("discord", str(guild_id)).key if guild_id is not None else None,
        channel=str(interaction.channel_id) if interaction.channel_id is not None else None,
        request_id=f"discord:{interaction.id}",
    )
    if allowed is None or guild_id is None or allowed.allows(Tenant("discord", str(guild_id))):
        return True
    log.warning("refused a %s from Discord server %s: it is not in RANKZERO_ALLOWED_TENANTS", what, guild_id)
    await interaction.response.send_message(NOT_ALLOWED, ephemeral=True)
    return False


class RankZeroTree(app_commands.CommandTree[Any]):
    """The command tree; a command that raises still answers (``on_error``)."""

    async def interaction_check(self, interaction: discord.Interaction[Any], /) -> bool:
        """Run commands of allowed servers only (:func:`served_here`)."""
        return await served_here(interaction, "command")

    async def on_error(
        self, interaction: discord.Interaction[Any], error: app_commands.AppCommandError
    ) -> None:
        """Tell the user briefly and log the cause."""
        name = interaction.command.qualified_name if interaction.command is not None else "a command"
        await tell_failure(interaction, error, f"/{name}")
