"""Practice in the terminal: ``rankzero quiz``, ``rankzero review`` and ``rankzero explain``.

Keys on a terminal (cbreak mode, as ``play``), whole lines when stdin is piped, so the same sessions run
interactively and from scripts (``printf 'a' | rankzero quiz`` answers A, one line per key).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TextIO

from rich.console import Console
from rich.text import Text

from bot.adapters.console import practice_render as render
from bot.adapters.console.play import TICK_S, KeyReader
from bot.core.errors import RankZeroError
from bot.core.models import PlayerRef
from bot.core.ports import Clock
from bot.core.practice import GRADE_KEYS, PracticeService
from bot.core.practice_models import QuizQuestionCard, ReviewSummary

#: What ``PracticeInput.key`` returns at the end of piped input.
EOF = ""


class PracticeInput:
    """Single keys and lines of text from a terminal or a pipe."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._keys = KeyReader(stream)
        self.is_tty = self._keys.is_tty

    def _read_key(self) -> str:
        if not self.is_tty:
            line = self._stream.readline()
            if not line:
                return EOF
            return line.strip()[:1].lower() or "\n"
        while (key := self._keys.read(TICK_S)) is None:
            pass
        return key or EOF

    def keys_mode(self) -> contextlib.AbstractContextManager[None]:
        """Single-key (cbreak) mode for a whole session. Entering it flushes pending input, so it is
        entered once per session, never per key (a key typed in between would be lost).
        """
        return self._keys.raw()

    async def key(self) -> str:
        """One key, lower-cased (a newline for Enter or an empty line); ``EOF`` ('') at the end of input."""
        return await asyncio.to_thread(self._read_key)

    async def line(self) -> str | None:
        """A line of text (cooked mode on a terminal), or None at the end of input."""
        text = await asyncio.to_thread(self._stream.readline)
        return text.rstrip("\r\n") if text else None


class ConsolePractice:
    """Runs the three practice modes for one player."""

    def __init__(
        self,
        practice: PracticeService,
        clock: Clock,
        player: PlayerRef,
        console: Console,
        keys: PracticeInput,
    ) -> None:
        self._practice = practice
        self._clock = clock
        self._player = player
        self._console = console
        self._in = keys

    # ------------------------------------------------------------------ quiz
    async def quiz(self, topic: str | None) -> int:
        """Five untimed questions with feedback after each, then "You got N/5"."""
        card = await self._practice.start_quiz(self._player, topic)
        with self._in.keys_mode():
            return await self._quiz(card)

    async def _quiz(self, first: QuizQuestionCard) -> int:
        card: QuizQuestionCard | None = first
        quiz_id = first.quiz_id
        while card is not None:
            self._console.print(render.quiz_question(card))
            self._console.print(render.quiz_keys(card))
            letters = {letter.lower() for letter, _ in card.choices}
            while (key := await self._in.key()) not in letters:
                if key in ("q", EOF):
                    self._console.print("Bye! Practice quizzes are not ranked; start a new one any time.")
                    return 0
                self._console.print(
                    Text(f"Press one of {', '.join(sorted(letters)).upper()} (Q quits).", "dim")
                )
            fb = await self._practice.answer_quiz(self._player, quiz_id, card.position, key.upper())
            self._console.print(render.quiz_feedback(fb))
            card = await self._practice.quiz_question(self._player, quiz_id)
        self._console.print(render.quiz_result(await self._practice.quiz_result(self._player, quiz_id)))
        return 0

    # ------------------------------------------------------------------ review
    async def review(self) -> int:
        """Show due cards: front, reveal on any key, self-grade 1-4 / a h g e; FSRS schedules the next one."""
        summary = await self._practice.start_review(self._player)
        self._console.print(render.review_summary(summary, self._clock.now()))
        with self._in.keys_mode():
            return await self._review()

    async def _review(self) -> int:
        reviewed = 0
        while (card := await self._practice.next_card(self._player)) is not None:
            self._console.print(render.flashcard_front(card))
            self._console.print(Text("Press Space or Enter to reveal the answer · Q quit", "dim"))
            if await self._in.key() in ("q", EOF):
                break
            self._console.print(render.flashcard_back(card))
            self._console.print(render.grade_keys(card))
            while (key := await self._in.key()) not in GRADE_KEYS:
                if key in ("q", EOF):
                    return self._review_end(reviewed)
                self._console.print(Text("Grade with 1-4 or a/h/g/e (Q quits).", "dim"))
            out = await self._practice.grade_card(self._player, card.card_id, GRADE_KEYS[key], card.showing)
            self._console.print(render.review_outcome(out))
            reviewed += 1
        return self._review_end(reviewed, await self._practice.start_review(self._player))

    def _review_end(self, reviewed: int, summary: ReviewSummary | None = None) -> int:
        if summary is not None:
            self._console.print(render.review_done(reviewed, summary, self._clock.now()))
        else:
            self._console.print(f"Bye! Reviewed {reviewed} card{'s' if reviewed != 1 else ''}.")
        return 0

    # ------------------------------------------------------------------ explain
    async def explain(self, topic: str | None) -> int:
        """An explain prompt; one line of free text; the verdict, the concepts it covered and the model
        answer; a failed answer may be tried again on the same prompt.
        """
        card = await self._practice.explain_prompt(self._player, topic)
        self._console.print(render.explain_prompt(card))
        graded = False
        while True:
            self._console.print(Text("Your answer: ", "bold"), end="")
            text = await self._in.line()
            if text is None or (graded and not text.strip()):
                if not graded:
                    self._console.print("\nNo answer given.")
                return 0
            try:
                result = await self._practice.submit_explanation(self._player, card.version_id, text)
            except RankZeroError as err:
                self._console.print(Text(str(err), "red"))
                continue
            self._console.print(render.explain_result(result))
            graded = True
            if result.passed:
                return 0
            # A failed answer may be tried again, on the same prompt; an empty line stops.
            self._console.print(Text("Try again (an empty line stops).", "dim"))
