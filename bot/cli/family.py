"""``rankzero questions build`` and ``rankzero questions stats``: question families and bank figures;
``rankzero insights``: what a tenant's answers teach (weakest topics, labels they disagree with).
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import click
from rich.console import Console

from bot.adapters.console.safe import visible
from bot.bootstrap import open_runner
from bot.cli._common import TENANT_KEY, operator, run_app
from bot.config import Settings
from bot.core.cards import DifficultyCard, InsightsCard
from bot.core.errors import RankZeroError
from bot.core.models import Tenant
from bot.services import App
from questions.build import BuildReport, build
from questions.families import default_families_dir, default_generated_dir, load_families
from questions.loader import BankValidationError, default_bank_dir, load_paths
from questions.stats import bank_stats, verified_ids


async def _build(
    settings: Settings, families: tuple[str, ...], out: Path, concurrency: int, check: bool, force: bool
) -> BuildReport:
    console = Console(stderr=True)

    def say(msg: str) -> None:
        console.print(f"[dim]{msg}[/dim]", soft_wrap=True)

    paths = families or (str(default_families_dir()),)
    prune = not families  # the whole shipped set: a generated file without its family file is stale
    if not any(f.spec.runs for f in load_families(paths)):
        return await build(paths, out, None, check=check, force=force, prune=prune, on_progress=say)
    # A local runner gets a warm pool for 2-, 3- and 4-rank jobs (the shapes families use), refilled in
    # the background.
    pool = "1:1,2:2,3:1,4:1"
    async with open_runner(settings, pool=pool, max_concurrent=max(2, concurrency), say=say) as client:
        return await build(
            paths,
            out,
            client,
            concurrency=concurrency,
            check=check,
            force=force,
            prune=prune,
            on_progress=say,
        )


@click.command("build")
@click.argument("families", nargs=-1, type=click.Path(exists=True))
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    default=None,
    help="Generated files (default: questions/bank/generated).",
)
@click.option("--concurrency", default=2, show_default=True, help="Snippets run at once.")
@click.option(
    "--check", is_flag=True, help="Write nothing; exit 1 when a generated file is out of date (CI)."
)
@click.option("--force", is_flag=True, help="Run every instance again, even unchanged ones.")
@click.pass_obj
def questions_build(
    settings: Settings, families: tuple[str, ...], out: str | None, concurrency: int, check: bool, force: bool
) -> None:
    """Instantiate every family; run each predict_output instance whose code, params or torch changed.

    FAMILIES are family files or folders (default: questions/families). Exit 1 on an instance error, a
    stale generated file (--check) or an answer that changed with the torch version; 2 when the runner
    cannot be reached.
    """
    started = time.monotonic()
    out_dir = Path(out) if out else default_generated_dir()
    try:
        report = asyncio.run(_build(settings, families, out_dir, concurrency, check, force))
    except BankValidationError as exc:
        for err in exc.errors:
            click.echo(str(err), err=True)
        raise SystemExit(1) from None
    except RankZeroError as exc:
        click.echo(f"error: {exc}", err=True)
        raise SystemExit(2) from None
    for line in report.errors:
        click.echo(f"error: {line}", err=True)
    for line in report.torch_changes:
        click.echo(f"torch changed the answer: {line}", err=True)
    for path in report.out_of_date:
        click.echo(f"out of date: {path} (run `rankzero questions build` and commit it)", err=True)
    click.echo(
        f"{report.instances} instances (torch {report.torch}) in {time.monotonic() - started:.1f} s: "
        f"{report.ran} run, {report.reused} unchanged (not re-run), {report.computed} computed "
        f"({report.cross_checked} cross-checked), "
        f"{report.written} written; {len(report.errors)} errors, {len(report.torch_changes)} changed by torch"
        + (f"; wrote {', '.join(report.files)}" if report.files else "")
    )
    if report.errors or report.out_of_date or report.torch_changes:
        raise SystemExit(1)


@click.command("stats")
@click.argument("paths", nargs=-1, type=click.Path(exists=True))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option(
    "--tenant",
    type=TENANT_KEY,
    default=None,
    help="Also list, from the database, the questions whose difficulty learned from this tenant's first "
    "attempts disagrees with the label (e.g. discord:<guild id>).",
)
@click.option(
    "--limit",
    type=click.IntRange(1, 500),
    default=50,
    show_default=True,
    help="With --tenant: at most this many disagreements, the widest gap first.",
)
@click.pass_context
def questions_stats(
    ctx: click.Context, paths: tuple[str, ...], as_json: bool, tenant: Tenant | None, limit: int
) -> None:
    """Figures of the bank: multiple-choice questions, families, verified answers, days before a repeat."""
    bank = paths or (str(default_bank_dir()),)
    try:
        loaded = load_paths(bank)
    except BankValidationError as exc:
        for err in exc.errors:
            click.echo(str(err), err=True)
        raise SystemExit(1) from None
    stats = bank_stats(loaded, verified_ids(bank))
    learned = _learned(ctx.obj, tenant, limit) if tenant is not None else None
    if as_json:
        if learned is not None:
            stats["learned_difficulty"] = _difficulty_json(tenant, learned)
        click.echo(json.dumps(stats, indent=2))
        return
    for key, value in stats.items():
        if isinstance(value, dict):
            click.echo(f"{key}:")
            for k, v in value.items():
                click.echo(f"  {k:44} {v}")
        else:
            click.echo(f"{key:24} {value}")
    if learned is not None and tenant is not None:
        _echo_difficulty(tenant, learned)


def _learned(settings: Settings, tenant: Tenant, limit: int) -> DifficultyCard:
    """The tenant's label disagreements, read from the bot's database as the operator."""

    async def body(app: App) -> DifficultyCard:
        return await app.service.difficulty_report(operator(), tenant=tenant, limit=limit)

    return run_app(settings, body)


def _difficulty_json(tenant: Tenant | None, card: DifficultyCard) -> dict[str, object]:
    return {
        "tenant": tenant.key if tenant is not None else None,
        "min_attempts": card.min_attempts,
        "learned": card.learned,
        "disagreeing": card.disagreeing,
        "questions": [
            {
                "id": line.question_id,
                "label": line.label,
                "learned": line.learned,
                "rating": round(line.rating, 3),
                "first_attempts": line.first_attempts,
                "first_correct": line.first_correct,
            }
            for line in card.lines
        ],
    }


def _echo_difficulty(tenant: Tenant, card: DifficultyCard) -> None:
    # Ids and labels come from the database (a tenant's own questions): shown through visible().
    click.echo(
        visible(
            f"learned difficulty ({tenant.key}): {card.learned} questions with {card.min_attempts}+ first "
            f"attempts, {card.disagreeing} disagree with their label"
        )
    )
    for line in card.lines:
        click.echo(
            visible(
                f"  {line.question_id:40} {line.label:12} -> {line.learned:12} "
                f"{line.first_correct}/{line.first_attempts} right first ({line.rating:+.2f})"
            )
        )


@click.command("insights")
@click.option("--tenant", type=TENANT_KEY, required=True, help="Whose answers, e.g. discord:<guild id>.")
@click.pass_obj
def insights(settings: Settings, tenant: Tenant) -> None:
    """A tenant's weakest topics of the last 30 days and where its answers disagree with the labels."""

    async def body(app: App) -> InsightsCard:
        return await app.service.insights(operator(), tenant=tenant)

    card = run_app(settings, body)
    click.echo(
        f"weakest topics of {tenant.key}, last {card.days} days ({card.min_attempts}+ first attempts):"
    )
    for t in card.weakest:
        click.echo(
            visible(f"  {t.topic:40} {t.accuracy:4.0%} right first ({t.first_correct}/{t.first_attempts})")
        )
    if not card.weakest:
        click.echo("  none yet")
    if card.quiz_topic is not None:
        click.echo(visible(f"practice: /quiz topic:weakest, or the weakest alone: {card.quiz_topic}"))
    _echo_difficulty(tenant, card.difficulty)
