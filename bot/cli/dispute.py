"""Console commands for disputes: ``rankzero dispute``, ``rankzero questions verify|preview|correct|flags``.

Registered on bot/cli/root.py's groups by name (imported when one of them runs); they use a configured
runner (RANKZERO_RUNNER_URL and RANKZERO_RUNNER_TOKEN) or, when none is configured, start a local
``rankzero-runner serve`` on loopback (bot/bootstrap.py wires either).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import click
from rich.console import Console

from bot.adapters.console import dispute_render
from bot.adapters.console.safe import visible
from bot.bootstrap import open_runner
from bot.cli._common import (
    CONSOLE_CHANNEL,
    PLAYER_NAME,
    console_actor,
    load_specs_or_exit,
    operator,
    run_app,
)
from bot.commands.handlers import problem_in
from bot.config import Settings
from bot.core.dispute_service import DisputeCard, question_from_spec, verify_questions
from bot.core.errors import NotFoundError, RankZeroError
from bot.core.models import Actor, Question
from bot.core.service import QuizService
from bot.core.vocabulary import Kind
from bot.services import App
from questions.loader import BankValidationError, default_bank_dir, load_paths


def _load_questions(paths: tuple[str, ...]) -> list[Question]:
    """Validated questions from bank files or folders (exit 1 with file:line errors otherwise)."""
    try:
        loaded = load_paths(paths or (str(default_bank_dir()),))
    except BankValidationError as exc:
        for err in exc.errors:
            click.echo(visible(str(err)), err=True)
        raise SystemExit(1) from None
    return [question_from_spec(q.import_spec()) for q in loaded]


async def resolve_problem(quiz: QuizService, reference: str) -> int:
    """The problem id ``reference`` names: ``today:N`` (problem N of today's console challenge), a question
    id in today's console challenge (``ddp-grad-sync``), or the problem number printed when it ended.
    """
    reference = reference.strip()
    if reference.isdigit():
        return int(reference)
    card = await quiz.find_challenge(CONSOLE_CHANNEL)
    if card is None:
        raise NotFoundError("there is no console challenge today: `rankzero play` opens it")
    return problem_in(await quiz.get_challenge(card.challenge_id), reference)


async def dispute_with_progress(
    app: App, actor: Actor, problem_id: int, code: str | None, progress: Callable[[str], None]
) -> DisputeCard:
    """Dispute ``problem_id``, calling ``progress`` with what is happening (a cold runner takes ~15 s).

    Whatever the dispute would refuse (nothing to run, not over yet, no runs left) is refused first,
    before a local runner is started or a remote one is asked for its health.
    """
    await app.disputes.check_dispute(actor, problem_id, code)
    shape = await _run_shape(app, problem_id)
    if app.runner is not None:
        if app.runner_is_local:
            progress("starting the sandbox (a local runner: the first run takes a few seconds)…")
        else:
            progress("checking the runner…")
        await app.runner.health()
    progress(f"running {shape} in the sandbox…")
    return await app.disputes.dispute(actor, problem_id, code)


async def _run_shape(app: App, problem_id: int) -> str:
    """'1 rank (python)', '2 ranks (ddp)': how the problem's code runs (its question's runner block)."""
    card = await app.service.find_challenge(CONSOLE_CHANNEL)
    if card is not None:
        for problem in (await app.service.get_challenge(card.challenge_id)).problems:
            if problem.id == problem_id and problem.question.runner is not None:
                mode = str(problem.question.runner.get("mode", "python"))
                ranks = int(problem.question.runner.get("nproc", 1)) if mode == "ddp" else 1
                return f"{ranks} rank{'s' if ranks != 1 else ''} ({mode})"
    return "the snippet"


@click.command("dispute")
@click.argument("problem", nargs=-1, required=True)
@click.option("--player", type=PLAYER_NAME, default=None, help="Your name (default: your login name).")
@click.option(
    "--variant",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="Run this file instead of the question's code (same launch settings and sandbox limits).",
)
@click.pass_obj
def dispute(settings: Settings, problem: tuple[str, ...], player: str | None, variant: str | None) -> None:
    """Dispute a problem that is over for you: the runner runs its code and matches the choices.

    PROBLEM is what `rankzero play` prints when a problem ends: today:3 (problem 3 of today's
    challenge), the question's id, or the problem number.
    """
    console = Console()
    code = Path(variant).read_text(encoding="utf-8") if variant else None

    async def body(app: App) -> None:
        problem_id = await resolve_problem(app.service, " ".join(problem))
        actor = console_actor(player)
        if console.is_terminal:
            with console.status("looking up the problem…") as status:
                card = await dispute_with_progress(app, actor, problem_id, code, status.update)
        else:  # a log or a pipe: one line per step
            card = await dispute_with_progress(app, actor, problem_id, code, lambda s: console.print(s))
        console.print(dispute_render.dispute(card))

    run_app(settings, body, console=console, local_runner=True)


async def _verify(
    settings: Settings, questions: list[Question], concurrency: int, timeout_s: float, console: Console
) -> list[DisputeCard]:
    def done(card: DisputeCard) -> None:
        console.print(dispute_render.verify_line(card), soft_wrap=True)  # one line per question, for logs

    def say(msg: str) -> None:
        console.print(f"[dim]{msg}[/dim]")

    async with open_runner(settings, max_concurrent=max(2, concurrency), say=say) as runner:
        return await verify_questions(
            runner, questions, concurrency=concurrency, timeout_s=timeout_s, on_done=done
        )


@click.command("verify")
@click.argument("paths", nargs=-1, type=click.Path(exists=True))
@click.option("--concurrency", default=2, show_default=True, help="Snippets run at once.")
@click.option("--timeout", "timeout_s", default=30.0, show_default=True, help="Seconds per snippet.")
@click.pass_obj
def questions_verify(settings: Settings, paths: tuple[str, ...], concurrency: int, timeout_s: float) -> None:
    """Run every predict_output question on the runner: confirmed / contradicted / cannot check.

    PATHS are bank files or folders (default: the shipped bank). Exit 1 when an official answer is
    contradicted, 2 when the runner cannot be reached or started.
    """
    console = Console()
    runnable = [q for q in _load_questions(paths) if q.kind == Kind.PREDICT_OUTPUT and q.code and q.runner]
    if not runnable:
        click.echo("no predict_output questions with code and a runner block in these files")
        return
    started = time.monotonic()
    try:
        cards = asyncio.run(_verify(settings, runnable, concurrency, timeout_s, console))
    except RankZeroError as exc:
        click.echo(f"error: {visible(str(exc))}", err=True)
        raise SystemExit(2) from None
    counts = {
        s: sum(1 for c in cards if c.verification == s) for s in ("confirmed", "contradicted", "cannot_check")
    }
    console.print(
        f"{len(cards)} questions in {time.monotonic() - started:.1f} s: {counts['confirmed']} confirmed, "
        f"{counts['contradicted']} contradicted, {counts['cannot_check']} cannot check"
    )
    if counts["contradicted"]:
        raise SystemExit(1)


@click.command("preview")
@click.argument("path", type=click.Path(exists=True))
@click.pass_obj
def questions_preview(settings: Settings, path: str) -> None:
    """Show what the runner really prints for each predict_output question of a file, before importing it.

    Exit 1 when the runner contradicts an official answer (as ``questions verify`` does), so a script or
    CI step that previews a file before importing it stops there.
    """
    console = Console()
    specs = load_specs_or_exit((path,), importing=False)  # a bad file: its errors with file:line, exit 1

    async def body(app: App) -> list[str]:
        shown = 0
        contradicted: list[str] = []
        for spec in specs:
            if spec.get("kind") == Kind.PREDICT_OUTPUT and spec.get("code"):
                card = await app.disputes.preview_question(operator(), spec)
                console.print(dispute_render.dispute(card))
                shown += 1
                if card.verification == "contradicted":
                    contradicted.append(str(spec.get("id")))
        if not shown:
            console.print("no predict_output question with code in this file")
        return contradicted

    contradicted = run_app(settings, body, console=console, local_runner=True)
    if contradicted:
        click.echo(
            f"the runner contradicts the official answer of {len(contradicted)} question(s): "
            f"{visible(', '.join(contradicted))}; fix the answer or the code before importing",
            err=True,
        )
        raise SystemExit(1)


@click.command("correct")
@click.argument("question_id")
@click.argument("letter")
@click.pass_obj
def questions_correct(settings: Settings, question_id: str, letter: str) -> None:
    """Make LETTER the official answer of a question (admin): a new version; past attempts re-scored."""
    console = Console()

    async def body(app: App) -> None:
        card = await app.disputes.correct_answer(operator(), question_id, letter)
        console.print(dispute_render.correction(card))

    run_app(settings, body, console=console)


@click.command("flags")
@click.option("--all", "show_all", is_flag=True, help="Include resolved flags.")
@click.pass_obj
def questions_flags(settings: Settings, show_all: bool) -> None:
    """Questions whose official answer a dispute contradicted (admin)."""

    async def body(app: App) -> None:
        flags = await app.disputes.flags(operator(), None if show_all else "open")
        for f in flags:
            click.echo(
                f"#{f.id} {f.status:8} {f.question_id} v{f.question_version}: official "
                f"{f.official_letter}, runner {f.matched_letter or '-'}: {f.explanation}"
            )
        if not flags:
            click.echo("no flags")

    run_app(settings, body)
