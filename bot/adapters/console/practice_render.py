"""Rich renderables for practice modes (quiz, flashcard review, explain) in the terminal."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from rich.console import Group, RenderableType
from rich.markdown import Markdown
from rich.markup import escape
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from bot.adapters.console.render import DIFFICULTY_STYLE
from bot.adapters.console.safe import safe
from bot.core.practice_models import (
    ExplainPromptCard,
    ExplainResultCard,
    FlashcardCard,
    PracticeStatsCard,
    QuizFeedback,
    QuizQuestionCard,
    QuizResultCard,
    ReviewOutcome,
    ReviewSummary,
    TopicCount,
)

GRADE_STYLE = {"again": "red", "hard": "yellow", "good": "green", "easy": "cyan"}


def _code(code: str | None) -> list[RenderableType]:
    if not code:
        return []
    return [Syntax(code.rstrip("\n"), "python", line_numbers=True, theme="ansi_dark")]


@safe
def quiz_question(card: QuizQuestionCard) -> RenderableType:
    """A quiz question: prompt, code, lettered choices."""
    choices = Table.grid(padding=(0, 1))
    for letter, text in card.choices:
        choices.add_row(Text(f"{letter})", "bold"), Text(text))
    style = DIFFICULTY_STYLE.get(card.difficulty, "white")
    title = Text.assemble(
        f"Quiz {card.position}/{card.total} · ", (card.difficulty, style), f" · {card.topic}"
    )
    return Panel(Group(Markdown(card.prompt), *_code(card.code), choices), title=title, border_style="cyan")


@safe
def quiz_keys(card: QuizQuestionCard) -> Text:
    """The key line under a quiz question."""
    letters = f"{card.choices[0][0]}–{card.choices[-1][0]}" if card.choices else ""
    return Text(f"keys: {letters} answer · Q quit (untimed)", "dim")


@safe
def quiz_feedback(fb: QuizFeedback) -> RenderableType:
    """Immediate feedback: right or wrong, the correct answer, the explanation and per-choice notes."""
    if fb.correct:
        head = Text(f"✓ Correct! ({fb.score}/{fb.answered} so far)", "bold green")
    else:
        head = Text(
            f"✗ Wrong: the answer was {fb.correct_letter} ({fb.score}/{fb.answered} so far)", "bold red"
        )
    parts: list[RenderableType] = [head]
    if fb.explanation:
        parts.append(Markdown(fb.explanation))
    for c in fb.choices:
        if c.feedback:
            mark = "✓" if c.correct else "·"
            parts.append(Text(f"  {mark} {c.letter}: {c.feedback}", "green" if c.correct else "dim"))
    return Panel(Group(*parts), title="Feedback", border_style="green" if fb.correct else "red")


@safe
def quiz_result(card: QuizResultCard) -> RenderableType:
    """The end of a quiz."""
    table = Table.grid(padding=(0, 2))
    for item in card.items:
        mark = Text("✓", "green") if item.correct else Text("✗", "red")
        table.add_row(f"{item.position}.", mark, escape(item.topic), Text(item.letter or "-", "dim"))
    title = "Practice quiz" + (f" · {card.topic}" if card.topic else "")
    head = Text(f"You got {card.correct}/{card.total}", "bold")
    note = Text("Practice never changes the leaderboard.", "dim")
    return Panel(Group(head, table, note), title=escape(title), border_style="magenta")


@safe
def review_summary(summary: ReviewSummary, now: dt.datetime) -> RenderableType:
    """The deck before a review session."""
    line = f"{summary.due_now} card{'s' if summary.due_now != 1 else ''} due · {summary.cards} in your deck"
    if summary.new_today:
        line += f" · {summary.new_today} new today"
    if summary.added:
        line += f" · {summary.added} added (bank cards and questions you missed)"
    if summary.suspended:
        line += f" · {summary.suspended} suspended (retired questions)"
    if not summary.topics:
        return Text(line, "bold")
    return Group(Text(line, "bold"), _topics(summary.topics))


def _topics(topics: Sequence[TopicCount]) -> Table:
    """The deck per topic: cards, due today, not started yet."""
    table = Table("Topic", "Cards", "Due", "New", box=None, padding=(0, 2), header_style="dim")
    for t in topics:
        table.add_row(escape(t.topic), str(t.cards), str(t.due), str(t.new))
    return table


@safe
def flashcard_front(card: FlashcardCard) -> RenderableType:
    """The front of a card."""
    origin = "recall card" if card.source == "bank" else "a challenge question you missed"
    title = f"{card.phase} · {card.topic} · {origin}"
    return Panel(Group(Markdown(card.front), *_code(card.code)), title=escape(title), border_style="cyan")


@safe
def flashcard_back(card: FlashcardCard) -> RenderableType:
    """The back of a card, then the grade keys with the delay each would schedule."""
    parts: list[RenderableType] = [Markdown(card.back)]
    if card.explanation:
        parts.append(Text(card.explanation, "dim"))
    return Panel(Group(*parts), title="Answer", border_style="green")


@safe
def grade_keys(card: FlashcardCard) -> Text:
    """``1 again (1m) · 2 hard (6m) · 3 good (10m) · 4 easy (4d)``."""
    text = Text()
    for i, (grade, delay) in enumerate(card.next_intervals, start=1):
        if i > 1:
            text.append(" · ")
        text.append(f"{i}/{grade[0]} {grade}", GRADE_STYLE[grade])
        text.append(f" ({delay})", "dim")
    text.append(" · Q quit", "dim")
    return text


@safe
def review_outcome(out: ReviewOutcome) -> RenderableType:
    """What a grade scheduled."""
    text = Text.assemble(
        ("→ ", "dim"), (out.grade, GRADE_STYLE[out.grade]), f": next review in {out.next_in}"
    )
    if out.is_leech:
        text.append("  (leech: you keep forgetting this one; rewrite it in your own words)", "yellow")
    return text


@safe
def review_done(reviewed: int, summary: ReviewSummary, now: dt.datetime) -> RenderableType:
    """The end of a review session."""
    line = f"Reviewed {reviewed} card{'s' if reviewed != 1 else ''}."
    if summary.next_due is not None:
        wait = summary.next_due - now
        hours = wait.total_seconds() / 3600
        when = f"in {round(wait.total_seconds() / 60)} min" if hours < 1 else f"in {hours:.0f} h"
        if hours >= 48:
            when = f"in {hours / 24:.0f} days"
        line += f" Next card due {when}."
    return Text(line, "bold green")


@safe
def explain_prompt(card: ExplainPromptCard) -> RenderableType:
    """An explain prompt."""
    style = DIFFICULTY_STYLE.get(card.difficulty, "white")
    title = Text.assemble("✍ Explain · ", (card.difficulty, style), f" · {card.topic}")
    note = Text(f"Answer in your own words (one line); graded on {card.concepts} concepts.", "dim")
    parts: list[RenderableType] = [Markdown(card.prompt)]
    if card.retry_note:
        parts.insert(0, Text(card.retry_note, "bold yellow"))
    if card.hint:
        parts.append(Text.assemble(("Hint: ", "bold"), card.hint))  # Text: bank text is not markup
    return Panel(Group(*parts, note), title=title, border_style="cyan")


@safe
def explain_result(card: ExplainResultCard) -> RenderableType:
    """The grade: covered concepts, missed ones, the model answer."""
    parts: list[RenderableType] = [
        Text(f"You got {card.covered}/{card.total} concepts", "bold"),
        Text(card.verdict, "bold green" if card.passed else "bold yellow"),
    ]
    for c in card.concepts:
        if c.covered:
            parts.append(Text.assemble(("  ✓ ", "green"), c.name, (f"  (\u201c{c.matched}\u201d)", "dim")))
    for c in card.misconceptions:
        # Text, not markup: the claim and correction are bank text and must not be parsed as rich markup.
        parts.append(Text.assemble(("  ! ", "yellow"), f"You wrote that {c.misconception}: {c.correction}"))
    if card.note:
        parts.append(Text(f"  {card.note}", "yellow"))
    if card.missed:
        parts.append(Text("Missed:", "bold red"))
        parts.extend(Text.assemble(("  ✗ ", "red"), name) for name in card.missed)
    parts.append(Panel(Markdown(card.model_answer), title="Model answer", border_style="blue"))
    return Panel(Group(*parts), title="Explain · graded", border_style="magenta")


@safe
def practice_stats(card: PracticeStatsCard) -> RenderableType:
    """Practice figures, shown apart from the competitive stats."""
    table = Table.grid(padding=(0, 2))
    pct = f" ({100 * card.quiz_correct // card.quiz_answers}%)" if card.quiz_answers else ""
    table.add_row(
        "Quizzes", f"{card.quizzes} finished · {card.quiz_correct}/{card.quiz_answers} correct{pct}"
    )
    table.add_row("Flashcards", f"{card.cards} in deck · {card.cards_due} due · {card.reviews} reviews")
    zone = card.timezone or "UTC"
    table.add_row(
        "Your day",
        f"{card.review_streak}-day review streak · {card.new_per_day} new cards a day · "
        f"{escape(zone)}, from 4 am",
    )
    table.add_row(
        "Explain",
        f"{card.explain_attempts} answers · {card.concepts_covered}/{card.concepts_total} concepts covered",
    )
    parts: list[RenderableType] = [table]
    if card.topics:
        parts.append(_topics(card.topics))
    return Panel(
        Group(*parts), title=f"Practice · {escape(card.display_name)} (not ranked)", border_style="cyan"
    )
