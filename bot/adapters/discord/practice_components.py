"""Persistent practice buttons: one DynamicItem for every ``rz:practice:<verb>:<args>`` custom id.

The id carries everything a click needs (bot/core/ids.py), so buttons on a practice message keep working
after a restart once the new client registers :class:`PracticeButton`:

- ``rz:practice:quiz:<quiz>:<position>:<letter>``   answer a quiz question
- ``rz:practice:next:<quiz>``                       the quiz's next question (or its result)
- ``rz:practice:reveal:<card>:<showing>:<reviewed>`` show a flashcard's back and the grade buttons
- ``rz:practice:grade:<card>:<showing>:<grade>:<reviewed>`` self-grade it (FSRS schedules it)
- ``rz:practice:explain:<version>``                 open the answer form of an explain prompt

``showing`` (the card's review count) makes a repeated grade of the same showing a no-op in the service;
``reviewed`` counts the cards graded in this session, for the closing line.
"""

from __future__ import annotations

import re
from typing import Any, Protocol

import discord

from bot.adapters.discord.components import RankZeroButton
from bot.adapters.discord.failures import tell_failure
from bot.commands.deadline import within
from bot.core import ids

ACTION = "practice"
VERBS = ("quiz", "next", "reveal", "grade", "explain")


class PracticeClickHandler(Protocol):
    """What a practice click is handed to (bot/adapters/discord/practice.py)."""

    async def on_practice(
        self, interaction: discord.Interaction[Any], verb: str, args: tuple[str, ...]
    ) -> None:
        """Handle a click on a practice button."""
        ...


class PracticeButton(
    RankZeroButton,
    template=r"rz:practice:(?P<verb>quiz|next|reveal|grade|explain)(?P<args>(?::[A-Za-z0-9_.-]+)*)",
):
    """A practice button whose custom_id is ``rz:practice:<verb>:<args>`` (a RankZeroButton of action
    ``practice`` whose first argument is the verb).
    """

    def __init__(
        self,
        verb: str,
        *args: object,
        label: str,
        style: discord.ButtonStyle = discord.ButtonStyle.secondary,
        disabled: bool = False,
        row: int | None = None,
    ) -> None:
        if verb not in VERBS:
            raise ValueError(f"unknown practice button {verb!r}")
        super().__init__(ACTION, verb, *args, label=label, style=style, disabled=disabled, row=row)
        self.verb = verb
        self.args = tuple(str(a) for a in args)

    @classmethod
    async def from_custom_id(
        cls, interaction: discord.Interaction[Any], item: discord.ui.Item[Any], match: re.Match[str], /
    ) -> PracticeButton:
        """Rebuild the button from a clicked custom_id (any message, any process)."""
        decoded = ids.decode(match.group(0))
        assert decoded is not None and decoded.args  # the template only matches encoded practice ids
        verb, *args = decoded.args
        return cls(verb, *args, label=getattr(item, "label", None) or verb)

    async def callback(self, interaction: discord.Interaction[Any]) -> None:
        """Hand the click to the client's practice handler."""
        handler: PracticeClickHandler | None = getattr(interaction.client, "rankzero_practice", None)
        if handler is None:  # started without handlers (should not happen): still acknowledge
            await interaction.response.send_message(
                "RankZero is starting, try again in a moment", ephemeral=True
            )
            return
        try:
            deadline = getattr(interaction.client, "rankzero_deadline_s", None)
            await within(deadline, handler.on_practice(interaction, self.verb, self.args))
        except Exception as exc:  # discord.py would only log it: the player must get an answer
            await tell_failure(interaction, exc, f"practice button {self.verb}")
