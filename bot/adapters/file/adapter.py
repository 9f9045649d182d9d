"""The file adapter for ``rankzero serve``: outbound only, posts go to RANKZERO_RECORD_FILE."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bot.adapters.file.platform import PLATFORM, FilePlatform
from bot.config import Settings

if TYPE_CHECKING:
    from bot.services import Services


class FileAdapter:
    """Serves channels of platform ``file``; has no inbound side."""

    name = PLATFORM

    def __init__(self, platform: FilePlatform) -> None:
        self.platform = platform

    async def start(self, services: Services) -> None:
        """Nothing to connect."""

    async def stop(self) -> None:
        """Nothing to disconnect."""


def build_adapter(settings: Settings) -> FileAdapter:
    """The adapter for ``settings.record_file``."""
    assert settings.record_file is not None
    return FileAdapter(FilePlatform(settings.record_file))
