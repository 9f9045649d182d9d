"""CLI commands of the scheduler: ``rankzero serve`` and ``rankzero schedule set|show|pause``.

Registered on the main group by bot/cli/root.py. The schedule commands act on the console channel by
default (the local user is its admin); ``--channel platform:workspace:channel`` names another one.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging

import click

from bot.adapters.console.safe import visible
from bot.adapters.registry import nothing_configured_help
from bot.bootstrap import build_adapters, build_app, shipped_bank_specs
from bot.cli._common import CONSOLE_CHANNEL, console_player, run_app
from bot.cli.errors import database_message, is_database_error
from bot.config import Settings
from bot.core.calendar import zone
from bot.core.errors import RankZeroError
from bot.core.models import Actor, ChannelRef
from bot.core.schedule import DAY_NAMES, days_text
from bot.core.schedule_service import ScheduleService, ScheduleView
from bot.metrics import BotMetrics
from bot.serve import open_health
from bot.serve import serve as serve_forever
from bot.services import App

log = logging.getLogger(__name__)


@click.command()
@click.option(
    "--console",
    "use_console",
    is_flag=True,
    help="Also serve the console channel: its posts, reminders and results print in this terminal.",
)
@click.pass_obj
def serve(settings: Settings, use_console: bool) -> None:
    """Run the bot: the configured chat adapters, the scheduler and /healthz, until Ctrl-C."""
    logging.getLogger("bot").setLevel(min(logging.getLogger().level, logging.INFO))
    try:
        adapters = build_adapters(settings, console=use_console)
    except RankZeroError as exc:
        click.echo(f"error: {visible(str(exc))}", err=True)
        raise SystemExit(2) from None
    if not adapters:
        click.echo(f"error: {nothing_configured_help()}", err=True)
        raise SystemExit(2)

    async def main() -> None:
        # One registry for the process: the health server serves what the services count.
        metrics = BotMetrics()
        # The health port first: a second serve on this host stops here, before it migrates or posts.
        health = await open_health(settings, metrics)
        try:
            await _seed_bank(settings)  # migrates the database too
        except BaseException:
            if health is not None:
                await health.stop()
            raise
        await serve_forever(settings, adapters, migrate=False, health=health, metrics=metrics)

    try:
        asyncio.run(main())
    except RankZeroError as exc:
        click.echo(f"error: {visible(str(exc))}", err=True)
        raise SystemExit(1) from None
    except Exception as exc:
        if not is_database_error(exc):
            raise
        # The database (unreachable, misspelled, refused credentials): one line, the URL without its
        # password; the traceback at debug level only.
        log.debug("serve failed", exc_info=True)
        click.echo(f"error: {database_message(settings.database_url, exc)}", err=True)
        raise SystemExit(1) from None


async def _seed_bank(settings: Settings) -> None:
    """Sync the shipped bank (several processes may start at once: a lost race is retried once)."""
    app = await build_app(settings)
    try:
        # The shipped bank is the shared one: serve seeds it as the operator.
        admin = Actor(console_player("rankzero-serve"), is_admin=True, is_operator=True)
        for attempt in range(3):
            try:
                specs = await asyncio.to_thread(shipped_bank_specs)  # parsing YAML: off the event loop
                await app.service.admin_import(admin, specs)
                return
            except Exception:  # a concurrent import inserted the same question first
                if attempt == 2:
                    raise
                log.info("bank import raced with another process; retrying")
                await asyncio.sleep(0.5)
    finally:
        await app.close()


def _channel(spec: str | None) -> ChannelRef:
    if not spec:
        return CONSOLE_CHANNEL
    parts = spec.split(":")
    if len(parts) != 3 or not all(parts):
        raise click.BadParameter(
            "use platform:workspace:channel, e.g. file:local:daily", param_hint="--channel"
        )
    return ChannelRef(parts[0], parts[1], parts[2], parts[2])


def _with_schedules(settings: Settings, body_fn: object) -> None:
    """Run ``body_fn(ScheduleService)`` with the app wired (errors become a message and exit 1)."""

    async def body(app: App) -> None:
        await body_fn(app.schedules)  # type: ignore[operator]

    run_app(settings, body)


def _show(view: ScheduleView) -> None:
    s, cfg = view.schedule, view.schedule.config
    tz = zone(cfg.timezone)
    window = f"{cfg.window_minutes} min" if cfg.window_minutes else "until the next post"
    lines = [
        f"channel     {s.channel.platform}:{s.channel.workspace_id}:{s.channel.channel_id}"
        + ("  (PAUSED)" if cfg.paused else ""),
        f"posts at    {cfg.hour:02d}:{cfg.minute:02d} {cfg.timezone} on {days_text(cfg.days)}",
        f"challenge   {cfg.problems} problems, time limit "
        f"{f'{cfg.time_limit_s} s' if cfg.time_limit_s else 'per question'}, attempts "
        f"{cfg.attempts or 'per question'}",
        f"window      {window}",
        f"reminder    {f'{cfg.reminder_minutes} min before closing' if cfg.reminder_minutes else 'off'}",
        f"weekly      {DAY_NAMES[cfg.summary_day] if cfg.summary_day else 'off'}",
        f"team report {'on' if cfg.team_report else 'off'}",
    ]
    for taken in view.taken:
        lines.append(
            f"no post     {taken.day:%a %Y-%m-%d}: that day's challenge #{taken.challenge_id} exists already "
            f"({taken.status}), so its slot posts nothing"
        )
    for at in view.next_posts:
        lines.append(f"next post   {at.astimezone(tz):%a %Y-%m-%d %H:%M %Z} ({at:%H:%M} UTC)")
    click.echo("\n".join(lines))


@click.group()
def schedule() -> None:
    """Set, show and pause the console channel's daily schedule (admin)."""


_channel_option = click.option(
    "--channel", "channel_spec", default=None, help="platform:workspace:channel (default: the console)."
)


@schedule.command("set")
@_channel_option
@click.option("--time", "post_time", default=None, help="Local post time HH:MM (24 h), e.g. 09:00.")
@click.option("--tz", "timezone", default=None, help="IANA timezone, e.g. Europe/Berlin.")
@click.option("--days", default=None, help="mon-fri, mon,wed,fri, daily, weekdays, weekends.")
@click.option("--problems", type=int, default=None, help="Problems per challenge (1-10).")
@click.option(
    "--time-limit", "time_limit_s", type=int, default=None, help="Seconds per problem (0: per question)."
)
@click.option("--attempts", type=int, default=None, help="Attempts per problem (0: per question).")
@click.option(
    "--window", default=None, help="How long it stays open: 90m, 8h, or 'next' (until the next post)."
)
@click.option("--reminder", default=None, help="Remind this long before closing (30m), or 'off'.")
@click.option("--weekly-summary", default=None, help="Day of the weekly leaderboard post (mon), or 'off'.")
@click.option(
    "--team-report",
    type=click.Choice(["on", "off"]),
    default=None,
    help="Post the weekly team report with the weekly summary: on or off.",
)
@click.pass_obj
def schedule_set(settings: Settings, /, channel_spec: str | None, **changes: object) -> None:
    """Create or change the schedule; options left out keep their current value."""
    channel = _channel(channel_spec)

    async def body(svc: ScheduleService) -> None:
        await svc.set_schedule(Actor(console_player(None), is_admin=True), channel, **changes)  # type: ignore[arg-type]
        view = await svc.show_schedule(channel)
        assert view is not None
        _show(view)

    _with_schedules(settings, body)


@schedule.command("show")
@_channel_option
@click.pass_obj
def schedule_show(settings: Settings, channel_spec: str | None) -> None:
    """Show the schedule and its next posts."""
    channel = _channel(channel_spec)

    async def body(svc: ScheduleService) -> None:
        view = await svc.show_schedule(channel)
        if view is None:
            click.echo("no schedule: set one with `rankzero schedule set --time 09:00 --tz Europe/Berlin`")
            return
        _show(view)

    _with_schedules(settings, body)


@schedule.command("pause")
@_channel_option
@click.option("--resume", is_flag=True, help="Resume a paused schedule.")
@click.pass_obj
def schedule_pause(settings: Settings, channel_spec: str | None, resume: bool) -> None:
    """Pause the schedule (no posts; open challenges still close), or --resume it."""
    channel = _channel(channel_spec)

    async def body(svc: ScheduleService) -> None:
        await svc.pause_schedule(Actor(console_player(None), is_admin=True), channel, paused=not resume)
        click.echo(f"schedule {'resumed' if resume else 'paused'} at {dt.datetime.now(dt.UTC):%H:%M} UTC")

    _with_schedules(settings, body)
