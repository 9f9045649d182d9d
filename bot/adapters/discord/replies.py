"""Private (ephemeral) follow-up replies to an acknowledged interaction, shared by every Discord handler."""

from __future__ import annotations

from typing import Any

import discord

from bot.adapters.discord.sanitize import no_mentions, split_text


async def send_private(
    interaction: discord.Interaction[Any],
    text: str | None = None,
    embed: discord.Embed | None = None,
    view: discord.ui.View | None = None,
) -> None:
    """Send ``text`` (split at Discord's 2000 characters) then ``embed`` and ``view`` to the user alone,
    mentions disabled. The interaction must have been deferred.
    """
    chunks = split_text(text) if text else [None]
    for i, chunk in enumerate(chunks):
        kwargs: dict[str, Any] = {"ephemeral": True, "allowed_mentions": no_mentions()}
        if i == len(chunks) - 1:
            if embed is not None:
                kwargs["embed"] = embed
            if view is not None:
                kwargs["view"] = view
        if chunk:
            await interaction.followup.send(chunk, **kwargs)
        else:
            await interaction.followup.send(**kwargs)
