"""Private (ephemeral) follow-up replies to an acknowledged interaction, shared by every Discord handler."""

from __future__ import annotations

from typing import Any

import discord

from bot.adapters.discord.sanitize import MESSAGE_CONTENT, escape_fences, no_mentions, split_text


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


async def give_back(interaction: discord.Interaction[Any], typed: str, lang: str = "") -> None:
    """Send the user what they typed into a form, in code blocks cut at line ends (each message within
    Discord's 2000 characters), so a submission that could not be handled is never lost: they copy it
    back into the form. The interaction must have been acknowledged.
    """
    fence = f"```{lang}\n"
    room = MESSAGE_CONTENT - len(fence) - len("\n```")
    # Fences inside are made inert, so the text cannot close the block early.
    for chunk in split_text(escape_fences(typed.rstrip("\n")), room):
        await interaction.followup.send(
            f"{fence}{chunk}\n```", ephemeral=True, allowed_mentions=no_mentions()
        )
