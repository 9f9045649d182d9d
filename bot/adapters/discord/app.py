"""The Discord adapter for ``rankzero serve``: a discord.py client with minimal intents, persistent
buttons, slash commands, and the DiscordPlatform the scheduler posts through.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import discord
import yarl
from discord import app_commands
from discord.gateway import DiscordWebSocket

from bot.adapters.discord.commands import register_commands
from bot.adapters.discord.components import RankZeroButton
from bot.adapters.discord.disputes import DisputeHandler, DraftButton
from bot.adapters.discord.failures import RankZeroTree
from bot.adapters.discord.observe import InteractionClock
from bot.adapters.discord.platform import DiscordPlatform
from bot.adapters.discord.play import PLATFORM, PlayHandler, admin_policy
from bot.adapters.discord.practice import PracticeHandler, register_practice_commands
from bot.adapters.discord.practice_components import PracticeButton
from bot.adapters.discord.question_form import EditFormButton, QuestionForms
from bot.adapters.discord.reposting import Reposter
from bot.adapters.discord.sanitize import no_mentions
from bot.adapters.discord.slash import Slash
from bot.adapters.discord.submissions import route_submission
from bot.adapters.discord.team_report import MissButton
from bot.config import Settings
from bot.core.models import Actor, PlayerRef, Tenant
from bot.core.ports import Clock, SystemClock
from bot.core.schedule_service import ScheduleService
from bot.core.sharding import ShardSet
from bot.core.tenancy import TenantAllowList

if TYPE_CHECKING:
    from bot.services import Services

log = logging.getLogger(__name__)


def intents() -> discord.Intents:
    """Guilds only: slash commands and buttons arrive as interactions, no message content is read."""
    return discord.Intents(guilds=True)


def _equip(client: discord.Client) -> app_commands.CommandTree[Any]:
    # DynamicItems are routed by custom_id: a click on a message from any earlier process works.
    client.add_dynamic_items(RankZeroButton, PracticeButton, DraftButton, EditFormButton, MissButton)
    return RankZeroTree(client)


class _PermissionEvents:
    """Gateway events that may fix a refused daily post (reposting.py): a channel's permission
    overwrites or a role changed. Mixed into both clients.
    """

    rankzero_reposter: Reposter | None

    async def on_guild_channel_update(self, before: Any, after: discord.abc.GuildChannel) -> None:
        """Retry the channel's refused post once the bot can post there."""
        if self.rankzero_reposter is None:
            return
        me = after.guild.me
        if me is not None and not _can_post(after.permissions_for(me)):
            return  # not fixed yet: do not report the refusal again for every edit
        await self.rankzero_reposter.on_permissions_changed(after.guild.id, {after.id})

    async def on_guild_role_update(self, before: discord.Role, after: discord.Role) -> None:
        """A role changed (perhaps the bot's): retry the guild's refused posts."""
        if self.rankzero_reposter is not None:
            await self.rankzero_reposter.on_permissions_changed(after.guild.id)


class _ObservedEvents:
    """Note each interaction's arrival for the acknowledgement metric (observe.py). Mixed into both
    clients; ``dispatch`` runs synchronously as the gateway event is parsed, before any handler runs.
    """

    rankzero_acks: InteractionClock

    def dispatch(self, event: str, /, *args: Any, **kwargs: Any) -> None:
        """Record an interaction's arrival, then dispatch as discord.py does."""
        if event == "interaction" and args:
            self.rankzero_acks.received(args[0].id)
        super().dispatch(event, *args, **kwargs)  # type: ignore[misc]


class _FormEvents:
    """Every form (the question form, the dispute variant, the explanation) is answered by its custom id,
    never by a View held in memory (submissions.py): a submission that arrives after discord.py's modal
    timed out, after a restart, or at another process is still handled. discord.py dispatches
    ``interaction`` for every interaction, after its View routing (which holds nothing for these forms).
    Mixed into both clients.
    """

    async def on_interaction(self, interaction: discord.Interaction[Any]) -> None:
        """Route a form's submission (anything else is routed by the tree or a DynamicItem)."""
        await route_submission(interaction)


#: Who pauses a server's schedules when the bot is removed from it (the service wants an admin actor).
REMOVAL_ACTOR = Actor(PlayerRef(PLATFORM, "guild_remove", "Discord (bot removed)"), is_admin=True)


class _TenantEvents:
    """Leave every server the operator did not allow (``RANKZERO_ALLOWED_TENANTS``): the ones the bot is
    in when it connects, and any it is added to later. A server that removes the bot (kick, ban, server
    deleted) gets its running schedules paused, marked as paused by the removal, so no post is tried
    there every day; adding the bot again resumes those (not the ones an admin paused), as a Slack
    uninstall and reinstall do. Mixed into both clients.
    """

    rankzero_allowed: TenantAllowList | None
    rankzero_schedules: ScheduleService | None
    guilds: Sequence[discord.Guild]

    async def on_ready(self) -> None:
        """Connected (every shard of this process): leave the servers that are not allowed."""
        for guild in list(self.guilds):
            await self._rankzero_admit(guild)

    async def on_guild_join(self, guild: discord.Guild) -> None:
        """Added to a server (possible while the app is public): leave it unless it is allowed; an allowed
        one gets back the schedules its removal paused.
        """
        if await self._rankzero_admit(guild) and self.rankzero_schedules is not None:
            try:
                await self.rankzero_schedules.resume_workspace(REMOVAL_ACTOR, PLATFORM, str(guild.id))
            except Exception:  # a database error must not break the gateway's event loop
                log.exception(
                    "Discord server %s added the bot again, but its schedules were not resumed", guild.id
                )

    async def on_guild_remove(self, guild: discord.Guild) -> None:
        """Removed from a server (kicked, banned, the server deleted): pause its running schedules."""
        if self.rankzero_schedules is None:
            return
        log.warning("Discord server %s removed the bot: pausing its schedules", guild.id)
        try:
            await self.rankzero_schedules.suspend_workspace(REMOVAL_ACTOR, PLATFORM, str(guild.id))
        except Exception:  # a database error must not break the gateway's event loop
            log.exception("could not pause the schedules of Discord server %s", guild.id)

    async def _rankzero_admit(self, guild: discord.Guild) -> bool:
        """True when the server is allowed; else leave it (False)."""
        allowed = self.rankzero_allowed
        if allowed is None or allowed.allows(Tenant(PLATFORM, str(guild.id))):
            return True
        log.warning(
            "leaving Discord server %s (%r): it is not in RANKZERO_ALLOWED_TENANTS", guild.id, guild.name
        )
        try:
            await guild.leave()
        except discord.HTTPException as exc:  # its commands are refused anyway (failures.served_here)
            log.error("could not leave Discord server %s: %s %s", guild.id, exc.status, exc.text)
        return False


def _can_post(permissions: discord.Permissions) -> bool:
    return permissions.view_channel and permissions.send_messages and permissions.embed_links


class RankZeroClient(_ObservedEvents, _TenantEvents, _PermissionEvents, _FormEvents, discord.Client):
    """A client with a command tree and a ``rankzero`` button handler (set when the adapter starts)."""

    def __init__(self, **kwargs: Any) -> None:
        acks = InteractionClock()
        super().__init__(
            intents=intents(), allowed_mentions=no_mentions(), http_trace=acks.trace_config(), **kwargs
        )
        self.rankzero_acks = acks
        self.rankzero_allowed: TenantAllowList | None = None
        self.rankzero: PlayHandler | None = None
        self.rankzero_practice: PracticeHandler | None = None
        self.rankzero_drafts: DisputeHandler | None = None
        self.rankzero_forms: QuestionForms | None = None
        self.rankzero_commands: Slash | None = None
        self.rankzero_reposter: Reposter | None = None
        self.rankzero_schedules: ScheduleService | None = None
        #: How long one interaction's work may take (RANKZERO_HANDLER_DEADLINE_S; None: no bound).
        self.rankzero_deadline_s: float | None = None
        self.tree = _equip(self)


class RankZeroShardedClient(
    _ObservedEvents, _TenantEvents, _PermissionEvents, _FormEvents, discord.AutoShardedClient
):
    """The same, sharded (RANKZERO_DISCORD_SHARDED=true), for bots in many servers."""

    def __init__(self, **kwargs: Any) -> None:
        acks = InteractionClock()
        super().__init__(
            intents=intents(), allowed_mentions=no_mentions(), http_trace=acks.trace_config(), **kwargs
        )
        self.rankzero_acks = acks
        self.rankzero_allowed: TenantAllowList | None = None
        self.rankzero: PlayHandler | None = None
        self.rankzero_practice: PracticeHandler | None = None
        self.rankzero_drafts: DisputeHandler | None = None
        self.rankzero_forms: QuestionForms | None = None
        self.rankzero_commands: Slash | None = None
        self.rankzero_reposter: Reposter | None = None
        self.rankzero_schedules: ScheduleService | None = None
        #: How long one interaction's work may take (RANKZERO_HANDLER_DEADLINE_S; None: no bound).
        self.rankzero_deadline_s: float | None = None
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
        shards: ShardSet | None = None,
        timezone: str = "UTC",
        clock: Clock | None = None,
        sync_state: Path | None = None,
        handler_deadline_s: float | None = 60.0,
        allowed: TenantAllowList | None = None,
    ) -> None:
        self._token = token
        #: Where the hash of the last published command tree is kept (None: sync at every start).
        self.sync_state = sync_state
        self.admin_roles = tuple(admin_roles)
        self.guild_id = guild_id
        self.timezone = timezone
        self.clock = clock or SystemClock()
        #: The shards this process connects (None: every guild, one shard or discord.py's automatic count).
        self.shards = shards
        self.client: RankZeroClient | RankZeroShardedClient
        if shards is not None:
            # discord.py's public sharding API: only these shards' gateway connections are opened, so
            # Discord sends this process only their guilds' events and interactions.
            self.client = RankZeroShardedClient(shard_ids=list(shards.ids), shard_count=shards.count)
        else:
            self.client = RankZeroShardedClient() if sharded else RankZeroClient()
        self.client.rankzero_deadline_s = handler_deadline_s
        #: The servers this bot serves (None or an open list: every server it is added to).
        self.client.rankzero_allowed = allowed
        self.platform = DiscordPlatform(self.client, admin_channel_id=admin_channel_id)
        self.play: PlayHandler | None = None
        self.commands: Slash | None = None
        self.practice: PracticeHandler | None = None
        self._runner: asyncio.Task[None] | None = None

    def attach(self, services: Services) -> None:
        """Register the handlers on the client (no network): buttons, slash commands, modals."""
        admins = admin_policy(self.admin_roles)
        # Acknowledgements and rate limits are reported from now on.
        self.client.rankzero_acks.metrics = services.metrics
        self.play = PlayHandler(services.quiz, self.clock, admins=admins, timezone=self.timezone)
        self.client.rankzero = self.play
        self.commands = Slash(
            services.quiz,
            services.schedules,
            services.app.disputes,
            admin_roles=self.admin_roles,
            timezone=self.timezone,
            practice=services.app.practice,
            clock=self.clock,
            drafts=services.drafts,
            form_drafts=services.form_drafts,
            web_links=services.web_links,
        )
        register_commands(self.client.tree, self.commands)
        self.client.rankzero_reposter = Reposter(services.quiz, services.schedules)
        self.client.rankzero_schedules = services.schedules
        self.client.rankzero_drafts = self.commands.disputes_ui
        self.client.rankzero_forms = self.commands.forms
        self.client.rankzero_commands = self.commands
        if self.commands.practice is not None:
            self.practice = PracticeHandler(self.commands.practice, admins=admins)
            self.client.rankzero_practice = self.practice
            register_practice_commands(self.client.tree, self.practice)

    def commands_fingerprint(self) -> str:
        """A hash of what a sync would publish (application, guild, every command's payload)."""
        tree = self.client.tree
        guild = discord.Object(id=self.guild_id) if self.guild_id is not None else None
        published = {
            "application": self.client.application_id,
            "guild": self.guild_id,
            "global": [c.to_dict(tree) for c in tree.get_commands()],
            "guild_commands": [c.to_dict(tree) for c in tree.get_commands(guild=guild)] if guild else [],
        }
        return hashlib.sha256(json.dumps(published, sort_keys=True, default=str).encode()).hexdigest()

    async def sync_commands(self) -> bool:
        """Publish the slash commands if they changed since the last sync; True when it synced.

        With a guild configured the commands go to that guild (instant) and the global set is emptied,
        so commands once synced globally do not show twice. The hash of what was published is kept in
        ``sync_state`` (a file in the data directory): a restart with the same commands syncs nothing,
        which keeps Discord's tight limit on command updates for real changes.
        """
        tree = self.client.tree
        if self.guild_id is not None:
            guild = discord.Object(id=self.guild_id)
            tree.copy_global_to(guild=guild)
            tree.clear_commands(guild=None)
        fingerprint = self.commands_fingerprint()
        if self._synced_fingerprint() == fingerprint:
            log.info("slash commands unchanged since the last sync: nothing to publish")
            return False
        if self.guild_id is not None:
            await tree.sync()  # an empty global set: removes stale global commands
            await tree.sync(guild=discord.Object(id=self.guild_id))
        else:
            await tree.sync()
        self._remember_fingerprint(fingerprint)
        log.info("slash commands synced (%s)", f"guild {self.guild_id}" if self.guild_id else "global")
        return True

    def _synced_fingerprint(self) -> str | None:
        if self.sync_state is None:
            return None
        try:
            return self.sync_state.read_text(encoding="utf-8").strip() or None
        except OSError:  # first start, or unreadable: sync
            return None

    def _remember_fingerprint(self, fingerprint: str) -> None:
        if self.sync_state is None:
            return
        try:
            self.sync_state.parent.mkdir(parents=True, exist_ok=True)
            self.sync_state.write_text(fingerprint + "\n", encoding="utf-8")
        except OSError as exc:  # the next start syncs again: harmless
            log.warning("could not remember the command sync in %s: %s", self.sync_state, exc)

    def health(self) -> dict[str, Any]:
        """The gateway's state for /healthz: ``ok`` only while connected and ready."""
        client = self.client
        if self._runner is not None and self._runner.done() and not self._runner.cancelled():
            failure = self._runner.exception()
            gateway = f"stopped: {type(failure).__name__}: {failure}" if failure else "stopped"
        elif client.is_closed():
            gateway = "closed"
        elif client.is_ready():
            gateway = "connected"
        elif self._runner is None:
            gateway = "not started"
        else:
            gateway = "connecting"
        latency = client.latency  # nan/inf until the first heartbeat is acknowledged
        return {
            "ok": gateway == "connected",
            "gateway": gateway,
            "latency_ms": round(latency * 1000, 1) if math.isfinite(latency) else None,
            "guilds": len(client.guilds),
            "shards": str(self.shards) if self.shards is not None else None,
        }

    async def start(self, services: Services) -> None:
        """Log in, sync commands and connect to the gateway in the background."""
        self.attach(services)
        assert self.commands is not None
        loaded = await self.commands.disputes_ui.drafts.load()  # admins' previews from before a restart
        log.info("Discord: %d question drafts loaded", loaded)
        await self.client.login(self._token)
        await self.sync_commands()
        self._runner = asyncio.create_task(self.client.connect(reconnect=True))

    async def stop(self) -> None:
        """Cancel countdowns, finish the drafts' writes and disconnect."""
        if self.play is not None:
            await self.play.countdowns.close()
        if self.commands is not None:  # the previews' last writes reach the database before we go
            await self.commands.disputes_ui.drafts.flush()
        await self.client.close()
        if self._runner is not None:
            self._runner.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._runner


def build_adapter(settings: Settings) -> DiscordAdapter:
    """The adapter for ``settings.discord_token``."""
    assert settings.discord_token is not None
    # discord.py reads both from class attributes: one adapter per process, so setting them here is safe.
    if settings.discord_api_url:
        discord.http.Route.BASE = settings.discord_api_url.rstrip("/")
    if settings.discord_gateway_url:
        DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(settings.discord_gateway_url)
    return DiscordAdapter(
        settings.discord_token.get_secret_value(),
        admin_roles=settings.discord_admin_roles,
        guild_id=settings.discord_guild_id,
        admin_channel_id=settings.discord_admin_channel_id,
        sharded=settings.discord_sharded,
        shards=settings.discord_shard_set,
        timezone=settings.default_timezone,
        sync_state=settings.data_dir / "discord-commands.sha256",
        handler_deadline_s=settings.handler_deadline_s,
        allowed=settings.tenant_allow_list,
    )
