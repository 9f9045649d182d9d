"""The Discord adapter for ``rankzero serve``: a discord.py client with minimal intents, persistent
buttons, slash commands, and the DiscordPlatform the scheduler posts through.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import discord
from discord import app_commands

from bot.adapters.discord.commands import CommandHandler, register_commands
from bot.adapters.discord.components import RankZeroButton
from bot.adapters.discord.disputes import DisputeHandler, DraftButton
from bot.adapters.discord.platform import DiscordPlatform
from bot.adapters.discord.play import PLATFORM, PlayHandler
from bot.adapters.discord.practice import PracticeHandler, register_practice_commands
from bot.adapters.discord.practice_components import PracticeButton
from bot.adapters.discord.sanitize import no_mentions
from bot.config import Settings
from bot.core.ports import Clock, SystemClock

if TYPE_CHECKING:
    from bot.serve import Services

log = logging.getLogger(__name__)


def intents() -> discord.Intents:
    """Guilds only: slash commands and buttons arrive as interactions, no message content is read."""
    return discord.Intents(guilds=True)


def _equip(client: discord.Client) -> app_commands.CommandTree[Any]:
    # DynamicItems are routed by custom_id: a click on a message from any earlier process works.
    client.add_dynamic_items(RankZeroButton, PracticeButton, DraftButton)
    return app_commands.CommandTree(client)


class RankZeroClient(discord.Client):
    """A client with a command tree and a ``rankzero`` button handler (set when the adapter starts)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(intents=intents(), allowed_mentions=no_mentions(), **kwargs)
        self.rankzero: PlayHandler | None = None
        self.rankzero_practice: PracticeHandler | None = None
        self.rankzero_drafts: DisputeHandler | None = None
        self.tree = _equip(self)


class RankZeroShardedClient(discord.AutoShardedClient):
    """The same, sharded (RANKZERO_DISCORD_SHARDED=true), for bots in many servers."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(intents=intents(), allowed_mentions=no_mentions(), **kwargs)
        self.rankzero: PlayHandler | None = None
        self.rankzero_practice: PracticeHandler | None = None
        self.rankzero_drafts: DisputeHandler | None = None
        self.tree = _equip(self)


class DiscordAdapter:
    """Serves channels of platform ``discord``."""

    name = PLATFORM

    def __init__(
        self,
        token: str,
        *,
        admin_roles: Sequence[int] = (),
        guild_id: int | None = None,
        admin_channel_id: int | None = None,
        sharded: bool = False,
        timezone: str = "UTC",
        clock: Clock | None = None,
        tick_s: float = 5.0,
    ) -> None:
        self._token = token
        self.admin_roles = tuple(admin_roles)
        self.guild_id = guild_id
        self.timezone = timezone
        self.clock = clock or SystemClock()
        self.tick_s = tick_s
        self.client: RankZeroClient | RankZeroShardedClient = (
            RankZeroShardedClient() if sharded else RankZeroClient()
        )
        self.platform = DiscordPlatform(self.client, admin_channel_id=admin_channel_id)
        self.play: PlayHandler | None = None
        self.commands: CommandHandler | None = None
        self.practice: PracticeHandler | None = None
        self._runner: asyncio.Task[None] | None = None

    def attach(self, services: Services) -> None:
        """Register the handlers on the client (no network): buttons, slash commands, modals."""
        self.play = PlayHandler(
            services.quiz,
            self.clock,
            admin_roles=self.admin_roles,
            timezone=self.timezone,
            tick_s=self.tick_s,
        )
        self.client.rankzero = self.play
        self.commands = CommandHandler(
            services.quiz,
            services.schedules,
            getattr(services.app, "disputes", None),
            admin_roles=self.admin_roles,
            timezone=self.timezone,
            practice=getattr(services.app, "practice", None),
        )
        register_commands(self.client.tree, self.commands)
        self.client.rankzero_drafts = self.commands.disputes_ui
        if self.commands.practice is not None:
            self.practice = PracticeHandler(self.commands.practice, admin_roles=self.admin_roles)
            self.client.rankzero_practice = self.practice
            register_practice_commands(self.client.tree, self.practice)

    async def sync_commands(self) -> None:
        """Publish the slash commands (to one guild when configured: instant)."""
        if self.guild_id is not None:
            guild = discord.Object(id=self.guild_id)
            self.client.tree.copy_global_to(guild=guild)
            await self.client.tree.sync(guild=guild)
        else:
            await self.client.tree.sync()

    async def start(self, services: Services) -> None:
        """Log in, sync commands and connect to the gateway in the background."""
        self.attach(services)
        await self.client.login(self._token)
        await self.sync_commands()
        self._runner = asyncio.create_task(self.client.connect(reconnect=True))

    async def stop(self) -> None:
        """Cancel countdowns and disconnect."""
        if self.play is not None:
            await self.play.countdowns.close()
        await self.client.close()
        if self._runner is not None:
            self._runner.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._runner


def build_adapter(settings: Settings) -> DiscordAdapter:
    """The adapter for ``settings.discord_token``."""
    assert settings.discord_token is not None
    return DiscordAdapter(
        settings.discord_token.get_secret_value(),
        admin_roles=settings.discord_admin_roles,
        guild_id=settings.discord_guild_id,
        admin_channel_id=settings.discord_admin_channel_id,
        sharded=settings.discord_sharded,
        timezone=settings.default_timezone,
    )
