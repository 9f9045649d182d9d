"""Rich renderables for the console adapter. Only this module knows how cards look in a terminal."""

from __future__ import annotations

import datetime as dt

from rich.console import Group, RenderableType
from rich.markdown import Markdown
from rich.markup import escape
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from bot.adapters.console.safe import safe
from bot.core.cards import (
    ChallengeCard,
    Feedback,
    HintCard,
    LeaderboardCard,
    PlayerChallengeSummary,
    ProblemCard,
    ResultsCard,
    StatsCard,
    TeamReportCard,
)
from bot.core.vocabulary import Difficulty, Kind

#: How a kind and a difficulty look in a terminal, keyed by the members (all of them:
#: tests/bot/core/test_vocabulary.py checks it) and read with the plain strings cards carry.
KIND_LABELS: dict[str, str] = {
    Kind.PREDICT_OUTPUT: "❓ Predict Output",
    Kind.CONCEPTUAL: "🧠 Conceptual",
    Kind.HYPERPARAMETER: "🎛 Hyperparameter",
    Kind.DEBUG: "🔧 Debug",
    Kind.METRICS: "📈 Metrics",
    Kind.MODEL_CHOICE: "🏗 Model Choice",
    Kind.FLASHCARD: "🗂 Recall",
    Kind.EXPLAIN: "✍ Explain",
}
DIFFICULTY_STYLE: dict[str, str] = {
    Difficulty.BEGINNER: "green",
    Difficulty.INTERMEDIATE: "cyan",
    Difficulty.ADVANCED: "yellow",
    Difficulty.EXPERT: "red",
}


def clock(seconds: float) -> str:
    """Seconds as m:ss (never negative)."""
    s = max(0, int(seconds + 0.999))
    return f"{s // 60}:{s % 60:02d}"


@safe
def challenge(card: ChallengeCard) -> RenderableType:
    """The daily challenge header."""
    table = Table.grid(padding=(0, 2))
    for p in card.problems:
        style = DIFFICULTY_STYLE.get(p.difficulty, "white")
        table.add_row(
            f"{p.position}.", KIND_LABELS.get(p.kind, p.kind), escape(p.topic), Text(p.difficulty, style)
        )
    body = Group(
        Text(f"{len(card.problems)} problems · get all right to earn the 🏅 {card.badge_name} badge", "bold"),
        table,
    )
    return Panel(body, title=escape(card.title), border_style="magenta")


@safe
def problem(card: ProblemCard) -> RenderableType:
    """A problem: prompt (Markdown), highlighted code, lettered choices."""
    parts: list[RenderableType] = [Markdown(card.prompt)]
    if card.code:
        parts.append(Syntax(card.code.rstrip("\n"), "python", line_numbers=True, theme="ansi_dark"))
    choices = Table.grid(padding=(0, 1))
    for letter, text in card.choices:
        style = "dim strike" if letter in card.wrong_letters else ""
        choices.add_row(Text(f"{letter})", "bold"), Text(text, style))
    parts.append(choices)
    style = DIFFICULTY_STYLE.get(card.difficulty, "white")
    title = Text.assemble(
        f"Problem {card.position}/{card.total} · ",
        KIND_LABELS.get(card.kind, card.kind),
        " · ",
        (card.difficulty, style),
        f" · {card.topic}",
    )
    return Panel(Group(*parts), title=title, border_style=style)


@safe
def status_line(card: ProblemCard, now: dt.datetime, hint_shown: bool) -> Text:
    """The live line under a problem: countdown, attempts, keys."""
    left = (card.deadline - now).total_seconds()
    letters = f"{card.choices[0][0]}–{card.choices[-1][0]}" if card.choices else ""
    timer_style = "bold red" if left <= 15 else "bold"
    keys = f"keys: {letters} answer" + ("" if hint_shown or not card.has_hint else " · H hint") + " · Q quit"
    return Text.assemble(
        ("⏱ ", ""),
        (f"{clock(left)} remaining", timer_style),
        "  ·  ",
        (f"Attempts: {card.attempts_left} left", "bold"),
        "  ·  ",
        (keys, "dim"),
    )


@safe
def feedback(fb: Feedback) -> RenderableType:
    """Immediate feedback on an answer, and the reveal when the problem is over."""
    if fb.correct:
        head = Text(f"✓ {fb.message}", "bold green")
    elif fb.outcome == "timeout":
        head = Text("⏰ Time's up!", "bold red")
    else:
        head = Text(f"✗ {fb.message}", "bold red")
    if fb.reveal is None:
        return head
    parts: list[RenderableType] = [head, Text(f"Correct answer: {fb.reveal.correct_letter}", "bold")]
    if fb.reveal.explanation:
        parts.append(Markdown(fb.reveal.explanation))
    for c in fb.reveal.choices:
        if c.feedback:
            mark = "✓" if c.correct else "·"
            parts.append(Text(f"  {mark} {c.letter}: {c.feedback}", "green" if c.correct else "dim"))
    if fb.outcome == "correct":
        parts.append(Text(f"+{fb.points} points", "bold green"))
    return Panel(Group(*parts), title="Explanation", border_style="blue")


@safe
def hint(card: HintCard) -> RenderableType:
    """A hint with its cost."""
    return Panel(
        Text(card.hint),
        title=f"💡 Hint (costs {card.cost} points if you get it right)",
        border_style="yellow",
    )


@safe
def summary(card: PlayerChallengeSummary) -> RenderableType:
    """The player's score at the end of a challenge."""
    lines: list[RenderableType] = [
        Text(f"Score: {card.points} points · {card.correct}/{card.total} correct", "bold"),
        Text(f"🔥 Streak: {card.streak} day{'s' if card.streak != 1 else ''}"),
    ]
    for b in card.badges:
        lines.append(Text(f"{b.emoji} Badge earned: {b.name} — {b.description}", "bold yellow"))
    return Panel(Group(*lines), title=f"Challenge of {card.day.isoformat()}", border_style="magenta")


@safe
def leaderboard(card: LeaderboardCard) -> RenderableType:
    """Top players and the caller's own rank when outside the top."""
    table = Table(title=card.title, show_lines=False)
    table.add_column("#", justify="right")
    table.add_column("Player")
    table.add_column("Points", justify="right")
    table.add_column("Solved", justify="right")
    table.add_column("Time", justify="right")
    for r in card.rows:
        me = card.me is not None and r.player_pk == card.me.player_pk
        table.add_row(
            str(r.rank),
            escape(r.display_name),
            str(r.points),
            str(r.correct),
            clock(r.answer_ms / 1000),
            style="bold" if me else None,
        )
    if card.me is not None and all(r.player_pk != card.me.player_pk for r in card.rows):
        table.add_row("…", "", "", "", "")
        m = card.me
        table.add_row(
            str(m.rank),
            escape(m.display_name),
            str(m.points),
            str(m.correct),
            clock(m.answer_ms / 1000),
            style="bold",
        )
    if not card.rows:
        return Text(f"{card.title}: nobody has scored yet.")
    return table


@safe
def results(card: ResultsCard) -> RenderableType:
    """A closed challenge's results."""
    table = Table(title=f"Results · {card.title}")
    table.add_column("#")
    table.add_column("Topic")
    table.add_column("Answer")
    table.add_column("Choices")
    table.add_column("Solved", justify="right")
    for p in card.problems:
        dist = " ".join(f"{k}:{v}" for k, v in p.distribution.items())
        table.add_row(str(p.position), escape(p.topic), p.correct_letter, dist, f"{p.solved}/{p.players}")
    winners = ", ".join(escape(w.display_name) for w in card.winners) or "nobody scored"
    parts: list[RenderableType] = [table, Text(f"🏆 Winners: {winners}", "bold")]
    for name, badge in card.badges:
        parts.append(Text(f"{badge.emoji} {escape(name)} earned {badge.name}"))
    for line in card.streaks:
        mark = "🎉" if line.milestone else "🔥"
        done = " · milestone!" if line.milestone else ""
        parts.append(Text(f"{mark} {escape(line.display_name)} · {line.days}-day streak{done}"))
    for note in card.notes:
        parts.append(Text(f"📝 {note}", "yellow"))
    parts.append(Text("See the standings with: rankzero leaderboard", "dim"))
    return Group(*parts)


@safe
def stats(card: StatsCard) -> RenderableType:
    """A player's record."""
    acc = f"{card.correct}/{card.problems}" if card.problems else "no problems yet"
    head = Text.assemble(
        (escape(card.display_name), "bold"),
        f" · {card.points} points · solved {acc} · challenges completed {card.challenges_completed}"
        f" · streak {card.streak} (best {card.longest_streak})",
    )
    table = Table(title="Accuracy by topic")
    table.add_column("Topic")
    table.add_column("Solved", justify="right")
    table.add_column("Accuracy", justify="right")
    for t in card.by_topic:
        table.add_row(escape(t.name), f"{t.correct}/{t.answered}", f"{t.accuracy:.0%}")
    badges = Text("Badges: " + (", ".join(f"{b.emoji} {b.name} ×{n}" for b, n in card.badges) or "none yet"))
    return Group(head, badges, table)


@safe
def team_report(card: TeamReportCard) -> RenderableType:
    """The weekly team report in the terminal: the heatmap as a table (first-attempt accuracy by topic and
    difficulty; a terminal shows no image, so the table is its text equivalent), the movers, and the most
    missed problems with their explanations inline (the terminal is one player's: nothing to click).
    """
    table = Table(title=f"{escape(card.title)} · week of {card.week_start.isoformat()}")
    table.add_column("Topic")
    table.add_column("Difficulty")
    table.add_column("Right at the first try", justify="right")
    for cell in card.cells:
        share = f"{cell.first_correct / cell.first_attempts:.0%}" if cell.first_attempts else "n/a"
        table.add_row(
            escape(cell.topic),
            escape(cell.difficulty),
            f"{cell.first_correct}/{cell.first_attempts} ({share})",
        )
    parts: list[RenderableType] = [table]
    for m in card.movers:
        move = "new" if m.previous_rank is None else f"from #{m.previous_rank}"
        # Text is never parsed as markup: names go in as they are (Table cells are markup: escaped).
        parts.append(Text(f"📈 #{m.rank} {m.display_name} · {m.points} pts ({move})"))
    for i, miss in enumerate(card.missed, start=1):
        rate = f"{miss.first_correct}/{miss.first_attempts} right at the first try"
        parts.append(Text(f"❌ Most missed #{i}: {miss.question_id} ({miss.topic}) · {rate}", "bold"))
        parts.append(Markdown(miss.explanation))
    return Group(*parts)


@safe
def hint_text(text: str) -> RenderableType:
    """A hint already paid for (shown again when a problem is resumed)."""
    return Panel(Text(text), title="💡 Hint", border_style="yellow")
