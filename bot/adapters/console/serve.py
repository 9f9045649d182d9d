"""The console adapter for ``rankzero serve --console``: scheduled posts printed in this terminal."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console

from bot.adapters.console.play import ConsolePlatform
from bot.core.ports import ChatPlatform

if TYPE_CHECKING:
    from bot.services import Services


class ConsoleAdapter:
    """Serves the console channel (platform ``console``); play it from another terminal with ``play``."""

    name = "console"

    def __init__(self, console: Console | None = None) -> None:
        # Annotated as the port: the Adapter protocol's attribute is invariant.
        self.platform: ChatPlatform = ConsolePlatform(console or Console())

    async def start(self, services: Services) -> None:
        """Nothing to connect."""

    async def stop(self) -> None:
        """Nothing to disconnect."""
