"""Persistent buttons: every RankZero button is one DynamicItem whose custom_id is ``rz:<action>:<args>``.

Everything a click needs is in its id (bot/core/ids.py), so a click on a message posted before a restart
is routed as soon as the new client registers :class:`RankZeroButton` (``client.add_dynamic_items``).
The click itself is handled by the client's ``rankzero`` handler object (bot/adapters/discord/play.py).
"""

from __future__ import annotations

import re
from typing import Any, Protocol

import discord

from bot.adapters.discord.failures import served_here, tell_failure
from bot.adapters.discord.sanitize import BUTTON_LABEL, truncate
from bot.commands.deadline import within
from bot.core import ids

#: The actions a button can carry (a subset of bot.core.ids.ACTIONS).
BUTTON_ACTIONS = ("start", "answer", "hint", "next")


class ButtonHandler(Protocol):
    """What a click is handed to."""

    async def on_button(
        self, interaction: discord.Interaction[Any], action: str, args: tuple[str, ...]
    ) -> None:
        """Handle a click on a RankZero button."""
        ...


class RankZeroButton(
    discord.ui.DynamicItem[discord.ui.Button[Any]],
    template=r"rz:(?P<action>start|answer|hint|next)(?P<args>(?::[A-Za-z0-9_.-]+)*)",
):
    """A button whose custom_id is a :mod:`bot.core.ids` component id."""

    def __init__(
        self,
        action: str,
        *args: object,
        label: str,
        style: discord.ButtonStyle = discord.ButtonStyle.secondary,
        disabled: bool = False,
        row: int | None = None,
    ) -> None:
        self.action = action
        self.args = tuple(str(a) for a in args)
        super().__init__(
            discord.ui.Button(
                label=truncate(label, BUTTON_LABEL),
                style=style,
                disabled=disabled,
                custom_id=ids.encode(action, *self.args),
            ),
            row=row,
        )

    @classmethod
    async def from_custom_id(
        cls, interaction: discord.Interaction[Any], item: discord.ui.Item[Any], match: re.Match[str], /
    ) -> RankZeroButton:
        """Rebuild the button from a clicked custom_id (any message, any process)."""
        decoded = ids.decode(match.group(0))
        assert decoded is not None  # the template only matches encoded ids
        label = getattr(item, "label", None) or decoded.action
        return cls(decoded.action, *decoded.args, label=label)

    async def interaction_check(self, interaction: discord.Interaction[Any], /) -> bool:
        """Take clicks from allowed servers only (a post made before its server was dropped keeps its
        buttons): discord.py runs dynamic items' checks, never the command tree's.
        """
        return await served_here(interaction, "button")

    async def callback(self, interaction: discord.Interaction[Any]) -> None:
        """Hand the click to the client's RankZero handler."""
        handler: ButtonHandler | None = getattr(interaction.client, "rankzero", None)
        if handler is None:  # started without handlers (should not happen): still acknowledge
            await interaction.response.send_message(
                "RankZero is starting, try again in a moment", ephemeral=True
            )
            return
        try:
            deadline = getattr(interaction.client, "rankzero_deadline_s", None)
            await within(deadline, handler.on_button(interaction, self.action, self.args))
        except Exception as exc:  # discord.py would only log it: the player must get an answer
            await tell_failure(interaction, exc, f"button {self.action}")
