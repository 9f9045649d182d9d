"""Which chat adapters ``rankzero serve`` runs: a small registry that platform adapters plug into.

An adapter is enabled by its settings (Discord by its token, Slack by its tokens). Its factory is named by
an import path, so ``serve`` imports only what is configured and an adapter that is not in this build
yet gives a clear error instead of an ImportError. To add a platform, append an AdapterSpec to
``ADAPTERS`` whose factory returns an object with ``name``, ``platform`` and async ``start``/``stop``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from bot.config import Settings
from bot.core.errors import ConfigurationError
from bot.core.ports import ChatPlatform

if TYPE_CHECKING:
    from bot.services import Services


class Adapter(Protocol):
    """A running chat platform: outbound via ``platform``; inbound handlers started by ``start``."""

    #: The ChannelRef.platform of the channels it serves ("discord", "slack", "console", "file").
    name: str

    @property
    def platform(self) -> ChatPlatform:
        """Outbound posts (read-only here, so an adapter may declare its own platform's subtype)."""
        ...

    async def start(self, services: Services) -> None:
        """Connect and register inbound handlers (admin commands call ``services.schedules``)."""
        ...

    async def stop(self) -> None:
        """Disconnect."""
        ...


@dataclass(frozen=True)
class AdapterSpec:
    """How to recognise that a platform is configured and how to build its adapter."""

    name: str
    #: The environment variables that enable it, for the "nothing configured" message.
    variables: tuple[str, ...]
    enabled: Callable[[Settings], bool]
    #: ``module:function`` taking the Settings and returning an Adapter.
    factory: str


ADAPTERS: list[AdapterSpec] = [
    AdapterSpec(
        "discord",
        ("RANKZERO_DISCORD_TOKEN",),
        lambda s: s.discord_token is not None,
        "bot.adapters.discord.app:build_adapter",
    ),
    AdapterSpec(
        "slack",
        # HTTP mode needs the signing secret, Socket Mode the app-level token (either one); OAuth mode
        # (many workspaces) the client id and secret with the signing secret instead of a bot token.
        (
            "RANKZERO_SLACK_BOT_TOKEN|RANKZERO_SLACK_CLIENT_ID+RANKZERO_SLACK_CLIENT_SECRET",
            "RANKZERO_SLACK_SIGNING_SECRET|RANKZERO_SLACK_APP_TOKEN",
        ),
        lambda s: (
            s.slack_oauth
            # Half an OAuth configuration goes to build_adapter, which names what is missing, rather
            # than being ignored as if Slack were not configured at all.
            or s.slack_client_id is not None
            or s.slack_client_secret is not None
            or (
                s.slack_bot_token is not None
                and (s.slack_app_token is not None or s.slack_signing_secret is not None)
            )
        ),
        "bot.adapters.slack.app:build_adapter",
    ),
    AdapterSpec(
        "file",
        ("RANKZERO_RECORD_FILE",),
        lambda s: s.record_file is not None,
        "bot.adapters.file.adapter:build_adapter",
    ),
]


def slack_incomplete(s: Settings) -> str | None:
    """What a half Slack configuration lacks (a bot token without a way to receive requests, or the
    reverse), in words; None when Slack is fully configured or not at all. OAuth mode's own halves are
    named by the adapter (bot/adapters/slack/app.py).
    """
    if s.slack_client_id is not None or s.slack_client_secret is not None:
        return None
    receive = [
        name
        for name, value in (
            ("RANKZERO_SLACK_SIGNING_SECRET", s.slack_signing_secret),
            ("RANKZERO_SLACK_APP_TOKEN", s.slack_app_token),
        )
        if value is not None
    ]
    if s.slack_bot_token is not None and not receive:
        return (
            "Slack is half configured: RANKZERO_SLACK_BOT_TOKEN is set, but Slack also needs "
            "RANKZERO_SLACK_SIGNING_SECRET (HTTP mode) or RANKZERO_SLACK_APP_TOKEN (Socket Mode) to receive "
            "commands; set one of them, or unset RANKZERO_SLACK_BOT_TOKEN"
        )
    if s.slack_bot_token is None and receive:
        return (
            f"Slack is half configured: {' and '.join(receive)} set, but Slack also needs "
            "RANKZERO_SLACK_BOT_TOKEN (the Bot User OAuth Token, xoxb-...), or RANKZERO_SLACK_CLIENT_ID and "
            "RANKZERO_SLACK_CLIENT_SECRET for OAuth mode; set them, or unset "
            f"{' and '.join(receive)}"
        )
    return None


def build_adapters(settings: Settings, *, console: bool = False) -> list[Adapter]:
    """The adapters configured in ``settings`` (plus the terminal when ``console``).

    ConfigurationError for a half configured platform: it is named with what it lacks, rather than
    ignored (which said "no chat platform is configured", or served the others without it).
    """
    if problem := slack_incomplete(settings):
        raise ConfigurationError(problem)
    adapters: list[Adapter] = []
    if console:
        from bot.adapters.console.serve import ConsoleAdapter

        adapters.append(ConsoleAdapter())
    for spec in ADAPTERS:
        if not spec.enabled(settings):
            continue
        module_name, func = spec.factory.split(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            raise ConfigurationError(
                f"{spec.name} is configured ({', '.join(spec.variables)}) but its adapter is not part of "
                f"this build ({exc.name} is missing): unset those variables or install a build with it"
            ) from None
        adapters.append(getattr(module, func)(settings))
    return adapters


def nothing_configured_help() -> str:
    """What to set when no platform is configured."""
    lines = ["no chat platform is configured, so there is nowhere to post. Set one of:"]
    for spec in ADAPTERS:
        lines.append(f"  {spec.name:8} {' and '.join(spec.variables)}")
    lines.append("(environment, .env or rankzero.toml), or try it in this terminal: rankzero serve --console")
    return "\n".join(lines)
