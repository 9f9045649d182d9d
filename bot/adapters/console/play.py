"""Terminal play: the embedded default adapter. Keys A–F answer, H shows the hint, Q quits."""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import sys
import termios
import tty
from collections.abc import Iterator
from typing import TextIO

from rich.console import Console
from rich.live import Live
from rich.markup import escape

from bot.adapters.console import dispute_render, render
from bot.adapters.console.safe import visible
from bot.core.cards import (
    ChallengeCard,
    DeliveryNotice,
    LeaderboardCard,
    PracticeNudgeCard,
    ProblemCard,
    ReminderCard,
    ResultsCard,
    TeamReportCard,
)
from bot.core.dispute_service import DisputeService
from bot.core.disputes import AdminNotice
from bot.core.errors import RankZeroError, TimeUpError
from bot.core.models import Actor, ChannelRef, PlayerRef
from bot.core.ports import Clock
from bot.core.service import QuizService
from bot.core.vocabulary import Period

#: How often the countdown is redrawn while waiting for a key.
TICK_S = 0.25


def _shown(err: Exception) -> str:
    """An error message for console markup: control characters visible, markup brackets escaped."""
    return escape(visible(str(err)))


class KeyReader:
    """Single keypresses from a terminal (cbreak mode), or whole lines when stdin is not a terminal."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.is_tty = stream.isatty()

    @contextlib.contextmanager
    def raw(self) -> Iterator[None]:
        """Put the terminal in cbreak mode for the duration (restored even on errors)."""
        if not self.is_tty:
            yield
            return
        fd = self._stream.fileno()
        saved = termios.tcgetattr(fd)
        try:
            tty.setcbreak(fd)
            yield
        finally:
            termios.tcsetattr(fd, termios.TCSADRAIN, saved)

    def read(self, timeout: float) -> str | None:
        """One key (lower-cased) within ``timeout`` seconds, or None; '' at end of input."""
        if self.is_tty:
            ready, _, _ = select.select([self._stream], [], [], timeout)
            if not ready:
                return None
            return os.read(self._stream.fileno(), 1).decode(errors="ignore").lower()
        line = self._stream.readline()
        return line.strip()[:1].lower() if line else ""


class ConsolePlatform:
    """The ChatPlatform port for a terminal: posts are printed."""

    def __init__(self, console: Console) -> None:
        self._console = console

    async def post_challenge(self, channel: ChannelRef, card: ChallengeCard) -> str | None:
        """Print the challenge."""
        self._console.print(render.challenge(card))
        return f"console:{card.challenge_id}"

    async def post_results(self, channel: ChannelRef, card: ResultsCard, message_ref: str | None) -> None:
        """Print the results."""
        self._console.print(render.results(card))

    async def post_admin_notice(self, notice: AdminNotice, channel: ChannelRef | None = None) -> None:
        """Print the notice (the terminal is its own admin channel)."""
        self._console.print(dispute_render.admin_notice(notice))

    async def post_delivery_notice(self, channel: ChannelRef, notice: DeliveryNotice) -> None:
        """Print that a post keeps failing (the terminal is its own admin channel)."""
        self._console.print(f"[bold red]⚠️ {escape(visible(notice.text()))}[/]")

    async def post_reminder(self, channel: ChannelRef, card: ReminderCard, message_ref: str | None) -> None:
        """Print the closing reminder."""
        closes = card.closes_at.astimezone().strftime("%H:%M")
        title = escape(visible(card.title))
        self._console.print(f"[bold yellow]⏳ {title} closes at {closes}: `rankzero play` to join[/]")

    async def post_team_report(self, channel: ChannelRef, card: TeamReportCard) -> None:
        """Print the weekly team report (its heatmap as a table: a terminal shows no image)."""
        self._console.print(render.team_report(card))

    async def post_weekly_summary(self, channel: ChannelRef, card: LeaderboardCard) -> None:
        """Print the week's leaderboard."""
        self._console.print(render.leaderboard(card))

    async def send_practice_nudge(self, player: PlayerRef, card: PracticeNudgeCard) -> None:
        """Print the daily reminder of due flashcards (the terminal is the player's inbox)."""
        cards = "flashcard is" if card.due == 1 else "flashcards are"
        self._console.print(
            f"[bold cyan]🔔 {escape(visible(card.display_name))}: {card.due} {cards} due. "
            "`rankzero review` to study them (`rankzero review --nudge off` stops these reminders)[/]"
        )


class ConsoleGame:
    """Plays one player's daily challenge in the terminal."""

    def __init__(
        self,
        service: QuizService,
        clock: Clock,
        actor: Actor,
        channel: ChannelRef,
        console: Console,
        keys: KeyReader,
        disputes: DisputeService | None = None,
    ) -> None:
        self._disputes = disputes
        self._service = service
        self._clock = clock
        self._actor = actor
        self._channel = channel
        self._console = console
        self._keys = keys

    async def _key(self, wait_s: float) -> str | None:
        return await asyncio.to_thread(self._keys.read, wait_s)

    async def run(self) -> int:
        """Play today's challenge to the end (or until Q); return the process exit code."""
        challenge, _ = await self._service.open_challenge(self._channel)
        self._console.print(render.challenge(QuizService.challenge_card(challenge)))
        questions = {p.id: p.question.id for p in challenge.problems}
        with self._keys.raw():
            while (problem := await self._service.next_problem(self._actor, challenge.id)) is not None:
                card = await self._service.start_problem(self._actor, problem.id)
                if not await self._play_problem(card):
                    self._console.print("Bye! Your timers keep running; come back with `rankzero play`.")
                    return 0
                # What `rankzero dispute` accepts, shown where the player sees the problem end.
                qid = escape(visible(questions.get(card.problem_id, "?")))
                self._console.print(
                    f"[dim]Problem {card.position} · question {qid} · problem #{card.problem_id} · "
                    f"dispute it later: rankzero dispute today:{card.position}[/dim]"
                )
                if not await self._between_problems(card, challenge.id):
                    return 0
        summary = await self._service.summary(self._actor, challenge.id)
        self._console.print(render.summary(summary))
        board = await self._service.leaderboard(self._channel, player=self._actor.player, period=Period.TODAY)
        self._console.print(render.leaderboard(board))
        return 0

    async def _between_problems(self, card: ProblemCard, challenge_id: int) -> bool:
        """After a problem: D disputes it on the runner, Q quits, any other key goes on (False: quit)."""
        more = await self._service.next_problem(self._actor, challenge_id) is not None
        disputable = self._disputes is not None and bool(card.code)
        while more or disputable:
            then = "the next problem" if more else "your summary"
            keys = ("D to dispute it on the runner, " if disputable else "") + "Q to quit"
            self._console.print(f"[dim]Press any key for {then} ({keys})…[/dim]")
            key = await self._wait_any_key()
            if key == "d" and disputable and self._disputes is not None:
                # A cold runner takes 10-15 s (it starts its sandbox): a spinner says what is going on.
                try:
                    with self._console.status(
                        "running the snippet in the runner's sandbox (a cold start takes ~15 s)…"
                    ):
                        found = await self._disputes.dispute(self._actor, card.problem_id)
                except RankZeroError as err:
                    self._console.print(f"[red]{_shown(err)}[/red]")
                else:
                    self._console.print(dispute_render.dispute(found))
                disputable = False  # once from the keyboard; `rankzero dispute ID` runs it again
                continue
            return not (key == "q" and more)
        return True

    async def _wait_any_key(self) -> str:
        while (key := await self._key(TICK_S)) is None:
            pass
        return key

    async def _play_problem(self, card: ProblemCard) -> bool:
        """Play one problem; False when the player quits."""
        self._console.print(render.problem(card))
        hint_shown = card.hint is not None
        if hint_shown and card.hint:
            self._console.print(render.hint_text(card.hint))
        letters = {letter.lower() for letter, _ in card.choices}
        with Live(
            render.status_line(card, self._clock.now(), hint_shown),
            console=self._console,
            auto_refresh=False,
            transient=True,
        ) as live:
            while True:
                now = self._clock.now()
                live.update(render.status_line(card, now, hint_shown), refresh=True)
                if now >= card.deadline:
                    fb = await self._service.time_up(self._actor, card.problem_id)
                    live.console.print(render.feedback(fb))
                    return True
                key = await self._key(min(TICK_S, max(0.01, (card.deadline - now).total_seconds())))
                if key is None:
                    continue
                if key in ("q", ""):
                    return False
                if key == "h" and card.has_hint and not hint_shown:
                    try:
                        h = await self._service.hint(self._actor, card.problem_id)
                    except RankZeroError as err:
                        live.console.print(f"[red]{_shown(err)}[/red]")
                        continue
                    hint_shown = True
                    live.console.print(render.hint(h))
                elif key in letters:
                    try:
                        fb = await self._service.answer(self._actor, card.problem_id, key.upper())
                    except TimeUpError as err:
                        live.console.print(f"[bold red]⏰ {_shown(err)}[/bold red]")
                        fb = await self._service.time_up(self._actor, card.problem_id)
                        live.console.print(render.feedback(fb))
                        return True
                    except RankZeroError as err:
                        live.console.print(f"[red]{_shown(err)}[/red]")
                        continue
                    live.console.print(render.feedback(fb))
                    if fb.over:
                        live.update(render.status_line(card, now, hint_shown), refresh=True)
                        return True
                    card = await self._service.view_problem(self._actor, card.problem_id)


def stdin_keys() -> KeyReader:
    """A KeyReader on the process's stdin."""
    return KeyReader(sys.stdin)
