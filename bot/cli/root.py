"""The ``rankzero`` group: play in the terminal, see leaderboards and stats, manage the database and the bank.

The commands of serve.py, dispute.py and family.py are registered here by name and imported when they run.
"""

from __future__ import annotations

import importlib
import json
import logging
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from bot.adapters.console.safe import visible
from bot.cli._common import (
    CONSOLE_CHANNEL,
    PLAYER_NAME,
    TENANT_KEY,
    console_actor,
    console_player,
    load_questions_or_exit,
    load_specs_or_exit,
    operator,
    run_app,
    tenant_admin,
)
from bot.cli.errors import database_message, is_database_error
from bot.core.models import Tenant
from bot.core.vocabulary import Period

# Everything heavy (SQLAlchemy, pydantic, rich, the adapters) is imported by the command that needs it:
# `rankzero --help` and a typo'd command answer at once (benchmarks/cli_startup.py).
if TYPE_CHECKING:
    from bot.adapters.console.practice import ConsolePractice
    from bot.config import Settings
    from bot.services import App


# Commands defined in other modules, imported when they run: (module, attribute, short help for --help).
# The text is the first sentence of the command's help (tests/bot/cli/test_cli_lazy.py checks that they
# agree).
_LAZY_MAIN: dict[str, tuple[str, str, str]] = {
    "serve": (
        "bot.cli.serve",
        "serve",
        "Run the bot: the configured chat adapters, the scheduler and /healthz, until Ctrl-C.",
    ),
    "schedule": (
        "bot.cli.serve",
        "schedule",
        "Set, show and pause the console channel's daily schedule (admin).",
    ),
    "dispute": (
        "bot.cli.dispute",
        "dispute",
        "Dispute a problem that is over for you: the runner runs its code and matches the choices.",
    ),
    "insights": (
        "bot.cli.family",
        "insights",
        "A tenant's weakest topics of the last 30 days and where its answers disagree with the labels.",
    ),
    "secrets": (
        "bot.cli.secrets_cmd",
        "secrets",
        "Encrypted Slack tokens: make a key, rotate to a new one (RANKZERO_SECRET_KEY).",
    ),
}
_LAZY_QUESTIONS: dict[str, tuple[str, str, str]] = {
    "verify": (
        "bot.cli.dispute",
        "questions_verify",
        "Run every predict_output question on the runner: confirmed / contradicted / cannot check.",
    ),
    "preview": (
        "bot.cli.dispute",
        "questions_preview",
        "Show what the runner really prints for each predict_output question of a file, before importing it.",
    ),
    "correct": (
        "bot.cli.dispute",
        "questions_correct",
        "Make LETTER the official answer of a question (admin): a new version; past attempts re-scored.",
    ),
    "flags": (
        "bot.cli.dispute",
        "questions_flags",
        "Questions whose official answer a dispute contradicted (admin).",
    ),
    "build": (
        "bot.cli.family",
        "questions_build",
        "Instantiate every family; run each predict_output instance whose code, params or torch changed.",
    ),
    "stats": (
        "bot.cli.family",
        "questions_stats",
        "Figures of the bank: multiple-choice questions, families, verified answers, days before a repeat.",
    ),
}


class LazyGroup(click.Group):
    """A group whose commands from other modules are imported only when one of them is run or asked for.

    Click's documented pattern for lazily loaded subcommands, plus a stored short help so that listing
    the commands in ``--help`` imports nothing.
    """

    def __init__(self, *args: Any, lazy: dict[str, tuple[str, str, str]], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = lazy

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Defined and lazy commands, sorted."""
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """The command, importing its module first if it is a lazy one."""
        if cmd_name in self.lazy and cmd_name not in self.commands:
            module, attribute, _ = self.lazy[cmd_name]
            command = getattr(importlib.import_module(module), attribute)
            self.add_command(command, cmd_name)
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list of ``--help``: lazy commands show their stored short help (no import)."""
        rows: list[tuple[str, str]] = []
        for name in self.list_commands(ctx):
            command = self.commands.get(name)
            if command is not None:
                if not command.hidden:
                    rows.append((name, command.get_short_help_str(limit=formatter.width - 6 - len(name))))
            else:
                limit = formatter.width - 6 - len(name)
                # Shortened as Click shortens a command's own help, without importing the command.
                stand_in = click.Command(name, help=self.lazy[name][2])
                rows.append((name, stand_in.get_short_help_str(limit)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def _settings_errors(exc: Any) -> str:
    """A pydantic ValidationError of Settings as one line: each bad field, its variable and why."""
    parts = []
    for error in exc.errors():
        field = ".".join(str(p) for p in error["loc"]) or "settings"
        why = str(error["msg"]).removeprefix("Value error, ")
        # Not the input: it may be a token or a URL with a password (the message names what is wrong).
        parts.append(f"{field} (RANKZERO_{field.upper()}): {why}")
    return "; ".join(parts)


@click.group(cls=LazyGroup, lazy=_LAZY_MAIN)
@click.option(
    "--db",
    "database_url",
    envvar="RANKZERO_DATABASE_URL",
    default=None,
    help="Database URL (default: SQLite under ~/.local/share/rankzero).",
)
@click.option("-v", "--verbose", is_flag=True, help="Log more.")
@click.pass_context
def main(ctx: click.Context, database_url: str | None, verbose: bool) -> None:
    """RankZero: daily multi-GPU PyTorch training challenges."""
    import tomllib

    from pydantic import ValidationError

    from bot.config import Settings, toml_path

    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    try:
        ctx.obj = Settings(database_url=database_url) if database_url else Settings()
    except (ValidationError, FileNotFoundError, tomllib.TOMLDecodeError) as exc:
        # A bad value in the environment, .env or rankzero.toml (or a file that is not TOML at all): name it
        # instead of a traceback.
        where = f"{toml_path()} is not valid TOML: " if isinstance(exc, tomllib.TOMLDecodeError) else ""
        what = _settings_errors(exc) if isinstance(exc, ValidationError) else str(exc)
        click.echo(f"error: bad RankZero settings: {where}{what}", err=True)
        raise SystemExit(2) from None
    if ctx.obj.log_format != "text":
        from bot.logs import configure

        configure(ctx.obj.log_format)  # RANKZERO_LOG_FORMAT=json: one JSON object per line on stderr


@main.command()
@click.option("--player", type=PLAYER_NAME, default=None, help="Your name (default: your login name).")
@click.pass_obj
def play(settings: Settings, player: str | None) -> None:
    """Play today's challenge in the terminal (keys A–F answer, H hint, D dispute, Q quit)."""
    from rich.console import Console

    from bot.adapters.console.play import ConsoleGame, stdin_keys

    console = Console()
    actor = console_actor(player)

    async def body(app: App) -> int:
        game = ConsoleGame(
            app.service, app.clock, actor, CONSOLE_CHANNEL, console, stdin_keys(), app.disputes
        )
        return await game.run()

    raise SystemExit(run_app(settings, body, console=console, seed_bank=True, local_runner=True))


@main.command()
@click.option("--period", type=click.Choice([p.value for p in Period]), default=Period.ALL.value)
@click.option("--player", type=PLAYER_NAME, default=None, help="Whose rank to show (default: you).")
@click.pass_obj
def leaderboard(settings: Settings, period: str, player: str | None) -> None:
    """Show the leaderboard (top 10 and your own rank)."""
    from rich.console import Console

    from bot.adapters.console import render

    console = Console()

    async def body(app: App) -> None:
        card = await app.service.leaderboard(CONSOLE_CHANNEL, period=period, player=console_player(player))
        console.print(render.leaderboard(card))

    run_app(settings, body, console=console)


@main.command()
@click.option("--player", type=PLAYER_NAME, default=None, help="Whose stats (default: you).")
@click.option(
    "--png",
    "png",
    type=click.Path(dir_okay=False, writable=False, path_type=Path),
    default=None,
    help="Also write the stats chart (points, accuracy by topic, streak calendar) to this PNG file.",
)
@click.pass_obj
def stats(settings: Settings, player: str | None, png: Path | None) -> None:
    """Show a player's points, accuracy by topic, streak and badges."""
    from rich.console import Console

    from bot.adapters.console import render
    from bot.adapters.console.practice_render import practice_stats

    console = Console()

    async def body(app: App) -> None:
        card = await app.service.stats(console_player(player), CONSOLE_CHANNEL)
        console.print(render.stats(card))
        console.print(practice_stats(await app.practice.stats(console_player(player))))
        if png is not None:
            from bot.adapters import charts

            chart = await charts.render(charts.player_chart, card)
            _write_chart(png, chart.png)
            # Plain echo, not rich: the alt text carries player-chosen names ("[red]" is not markup).
            click.echo(f"Chart written to {visible(str(png))}")
            click.echo(f"Alt text: {visible(chart.alt_text)}")

    run_app(settings, body, console=console)


def _write_chart(path: Path, data: bytes) -> None:
    """Write the chart's PNG; a path that cannot be written is a clean error (exit 1), not a traceback."""
    try:
        path.write_bytes(data)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        click.echo(f"error: cannot write the chart to {visible(str(path))}: {reason}", err=True)
        raise SystemExit(1) from None


def _practice(
    settings: Settings, player: str | None, mode: Callable[[ConsolePractice], Awaitable[int]]
) -> None:
    """Run a practice mode on the synced bank (keys on a terminal, lines when stdin is piped)."""
    from rich.console import Console

    from bot.adapters.console.practice import ConsolePractice, PracticeInput

    console = Console()

    async def body(app: App) -> int:
        session = ConsolePractice(
            app.practice, app.clock, console_player(player), console, PracticeInput(sys.stdin)
        )
        return await mode(session)

    raise SystemExit(run_app(settings, body, console=console, seed_bank=True))


@main.command()
@click.argument("topic", required=False)
@click.option("--player", type=PLAYER_NAME, default=None, help="Your name (default: your login name).")
@click.pass_obj
def quiz(settings: Settings, topic: str | None, player: str | None) -> None:
    """Practice: 5 untimed multiple-choice questions (optionally on TOPIC); not ranked."""
    _practice(settings, player, lambda s: s.quiz(topic))


@main.command()
@click.option("--player", type=PLAYER_NAME, default=None, help="Your name (default: your login name).")
@click.option(
    "--nudge",
    type=click.Choice(["on", "off"]),
    default=None,
    help="Turn the daily reminder of due cards on or off (then exit).",
)
@click.option(
    "--new-per-day",
    type=click.IntRange(0, 200),
    default=None,
    help="How many new cards to start a day (default 10; 0 pauses new cards), then exit.",
)
@click.option(
    "--timezone",
    "timezone",
    default=None,
    help="Your IANA timezone (e.g. Europe/Paris): your day starts at 4 am there. Then exit.",
)
@click.option(
    "--optimize",
    is_flag=True,
    help="Fit FSRS's parameters to your own reviews (needs 512 usable ones and the optimizer extra).",
)
@click.pass_obj
def review(
    settings: Settings,
    player: str | None,
    nudge: str | None,
    new_per_day: int | None,
    timezone: str | None,
    optimize: bool,
) -> None:
    """Practice: review your due flashcards (spaced repetition, FSRS); grade 1-4 or a/h/g/e."""
    if nudge is None and new_per_day is None and timezone is None and not optimize:
        _practice(settings, player, lambda s: s.review())
        return
    from rich.console import Console

    console = Console()

    async def body(app: App) -> None:
        who = console_player(player)
        if nudge is not None:
            on = await app.practice.set_nudge(who, nudge == "on")
            console.print(
                "Daily reminder on: you get one message a day while cards are due."
                if on
                else "Daily reminder off."
            )
        if new_per_day is not None:
            count = await app.practice.set_new_per_day(who, new_per_day)
            console.print(f"New cards a day: {count}" + (" (paused)." if count == 0 else "."))
        if timezone is not None:
            zone = await app.practice.set_timezone(who, timezone)
            console.print(f"Timezone: {zone}; your day starts at 4 am there.")
        if optimize:
            from bot.practice_optimizer import FsrsOptimizer

            outcome = await app.practice.optimize_parameters(who, FsrsOptimizer(in_process=True))
            console.print(f"FSRS parameters: {outcome.reason}.")

    run_app(settings, body, console=console)


@main.command()
@click.argument("topic", required=False)
@click.option("--player", type=PLAYER_NAME, default=None, help="Your name (default: your login name).")
@click.pass_obj
def explain(settings: Settings, topic: str | None, player: str | None) -> None:
    """Practice: explain a concept in your own words; graded by the concepts your answer covers."""
    _practice(settings, player, lambda s: s.explain(topic))


@main.command()
@click.pass_obj
def close(settings: Settings) -> None:
    """Close today's console challenge and print its results (admin)."""
    from rich.console import Console

    console = Console()

    async def body(app: App) -> None:
        challenge, _ = await app.service.open_challenge(CONSOLE_CHANNEL)
        card = await app.service.close_challenge(challenge.id)
        if card is not None:
            return  # closed now: the outbox printed its results (or said why not)
        # Closed before: results it queued and never printed (a failed print, a close stopped after its
        # commit) go out now through the same outbox delivery, once; printed ones are not printed again.
        delivery = await app.service.outbox.deliver_pending(challenge.id, "results")
        if delivery is None or delivery.status != "sent":
            console.print("Already closed.")

    run_app(settings, body, console=console)


@main.group()
def db() -> None:
    """Database maintenance."""


@db.command("upgrade")
@click.option("--revision", default="head")
@click.pass_obj
def db_upgrade(settings: Settings, revision: str) -> None:
    """Apply migrations (``alembic upgrade head``)."""
    from bot.storage.db import upgrade

    try:
        upgrade(settings.database_url, revision)
    except Exception as exc:
        if not is_database_error(exc):
            raise
        logging.getLogger(__name__).debug("database failure", exc_info=True)
        click.echo(f"error: {database_message(settings.database_url, exc)}", err=True)
        raise SystemExit(1) from None
    click.echo(f"database upgraded to {revision}")


@main.group(cls=LazyGroup, lazy=_LAZY_QUESTIONS)
def questions() -> None:
    """Validate, import, export, list and retire bank questions."""


@questions.command("validate")
@click.argument("paths", nargs=-1, type=click.Path(exists=True))
def questions_validate(paths: tuple[str, ...]) -> None:
    """Check bank files (default: the shipped bank); errors say file:line: field: what is wrong and how
    to fix it (exit 1). A path that does not exist is a usage error (exit 2).
    """
    from questions.loader import default_bank_dir
    from questions.stats import (
        correct_position_warnings,
        file_position_warnings,
        longest_correct_warnings,
    )

    loaded = load_questions_or_exit(paths or (str(default_bank_dir()),), importing=False)
    click.echo(f"ok: {len(loaded)} questions valid")
    # Warnings, not errors: one file may lean one way while the bank as a whole is balanced.
    specs = [q.spec for q in loaded]
    # Retired questions are never shown, so their letters cannot be learned (as bank_stats counts them).
    shown = [s for s in specs if not s.retired]
    for line in [
        *longest_correct_warnings(specs),
        *correct_position_warnings(shown),
        *file_position_warnings(loaded),
    ]:
        click.echo(f"warning: {visible(line)}", err=True)


@questions.command("import")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True))
@click.pass_obj
def questions_import(settings: Settings, paths: tuple[str, ...]) -> None:
    """Import bank files, all or nothing (one transaction); edits become new versions."""
    specs = load_specs_or_exit(paths, importing=True)

    async def body(app: App) -> None:
        report = await app.service.admin_import(operator(), specs)
        click.echo(
            f"imported: {len(report.added)} new, {len(report.updated)} updated (new version), "
            f"{len(report.unchanged)} unchanged"
        )
        for tenant, old, new in report.moved_aside:
            click.echo(f"renamed {tenant}'s own question {old} to {new}: the shared bank now uses its id")

    run_app(settings, body)


@questions.command("export")
@click.option(
    "--out", type=click.Path(dir_okay=False, writable=True), default=None, help="File (default: stdout)."
)
@click.option("--all", "include_retired", is_flag=True, help="Include retired questions.")
@click.pass_obj
def questions_export(settings: Settings, out: str | None, include_retired: bool) -> None:
    """Write the stored bank (latest versions) as one YAML bank file."""
    import asyncio

    import yaml

    async def body(app: App) -> None:
        specs = await app.service.export_questions(include_retired)
        text = yaml.safe_dump({"questions": specs}, sort_keys=False, allow_unicode=True, width=100)
        if out:
            await asyncio.to_thread(Path(out).write_text, text, encoding="utf-8")
            click.echo(f"wrote {len(specs)} questions to {out}")
        else:
            sys.stdout.write(text)

    run_app(settings, body)


@questions.command("list")
@click.option("--all", "include_retired", is_flag=True, help="Include retired questions.")
@click.option(
    "--tenant",
    type=TENANT_KEY,
    default=None,
    help="List what this tenant sees (the shared bank with its own questions, retirements and "
    "corrections), e.g. discord:<guild id>. Default: the shared bank.",
)
@click.pass_obj
def questions_list(settings: Settings, include_retired: bool, tenant: Tenant | None) -> None:
    """List stored questions with their latest version."""

    async def body(app: App) -> None:
        for q in await app.service.list_questions(include_retired, view=tenant):
            flag = " (retired)" if q.retired else ""
            line = f"{q.id:40} v{q.version:<3} {q.kind:15} {q.difficulty:12} {q.topic}{flag}"
            click.echo(visible(line))

    run_app(settings, body)


@questions.command("retire")
@click.argument("question_id")
@click.option(
    "--tenant",
    type=TENANT_KEY,
    default=None,
    help="Retire it for this tenant only (as its admin would), e.g. discord:<guild id>. Default: retire "
    "a shared question for every tenant.",
)
@click.pass_obj
def questions_retire(settings: Settings, question_id: str, tenant: Tenant | None) -> None:
    """Retire a question: it is no longer picked; past attempts keep it."""

    async def body(app: App) -> None:
        actor = tenant_admin(tenant) if tenant is not None else operator()
        await app.service.admin_retire(actor, question_id)
        click.echo(f"retired {question_id}" + (f" for {tenant}" if tenant is not None else ""))

    run_app(settings, body)


@questions.command("schema")
@click.option(
    "--out",
    type=click.Path(dir_okay=False),
    default=str(Path(__file__).resolve().parents[2] / "questions" / "schema.json"),
    show_default=True,
)
def questions_schema(out: str) -> None:
    """Regenerate the JSON Schema of bank files."""
    from questions.schema import json_schema

    Path(out).write_text(json.dumps(json_schema(), indent=2) + "\n", encoding="utf-8")
    click.echo(f"wrote {out}")
