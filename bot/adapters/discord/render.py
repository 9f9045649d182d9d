"""Cards -> Discord embeds and views. The only module that knows Discord markup.

Every text that came from people goes through :mod:`sanitize`; every embed through ``fit_embed``.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import discord

from bot.adapters.discord.components import RankZeroButton
from bot.adapters.discord.sanitize import (
    EMBED_DESCRIPTION,
    FIELD_VALUE,
    ZWSP,
    code_block,
    fit_embed,
    neutralise_mentions,
    plain,
    safe_text,
    split_embed,
    split_markdown,
    truncate,
)
from bot.adapters.markup import to_discord
from bot.core.cards import (
    ChallengeCard,
    Feedback,
    HintCard,
    LeaderboardCard,
    PlayerChallengeSummary,
    ProblemCard,
    ReminderCard,
    ResultsCard,
    StatsCard,
)
from bot.core.vocabulary import Difficulty

BLUE = discord.Colour.blurple()
GREEN = discord.Colour.green()
RED = discord.Colour.red()
GREY = discord.Colour.dark_grey()

#: The icon before a difficulty, keyed by the members (all of them: tests/bot/core/test_vocabulary.py
#: checks it).
DIFFICULTY_ICONS: dict[str, str] = {
    Difficulty.BEGINNER: "⚪",
    Difficulty.INTERMEDIATE: "🟢",
    Difficulty.ADVANCED: "🟠",
    Difficulty.EXPERT: "🔴",
}


def relative(at: dt.datetime) -> str:
    """A live countdown Discord renders in each reader's clock: ``<t:UNIX:R>``."""
    return f"<t:{int(at.timestamp())}:R>"


def absolute(at: dt.datetime) -> str:
    """A date and time in the reader's timezone: ``<t:UNIX:f>``."""
    return f"<t:{int(at.timestamp())}:f>"


def bank_text(md: str, limit: int = EMBED_DESCRIPTION) -> str:
    """Bank Markdown (a prompt, an explanation) as Discord shows it: fences kept as code blocks, mentions
    broken, at most ``limit`` characters (cut before converting, so a cut fence is still closed).
    """
    return truncate(neutralise_mentions(to_discord(truncate(md, limit - 8))), limit)


def add_long_field(embed: discord.Embed, name: str, text: str) -> None:
    """``text`` as one field, or several when it is over a field's 1024 characters: cut at line ends,
    code blocks closed and opened again, the later fields named "``name`` (continued)".
    """
    for i, piece in enumerate(split_markdown(text, FIELD_VALUE)):
        embed.add_field(name=name if i == 0 else f"{name} (continued)", value=piece or ZWSP, inline=False)


def code_text(code: str) -> str:
    """A whole snippet as a Python code block (inner fences made inert); :func:`add_long_field` splits it."""
    return code_block(code, limit=len(code) * 4 + 16)


def _view(*items: discord.ui.Item[Any]) -> discord.ui.View:
    view = discord.ui.View(timeout=None)
    for item in items:
        view.add_item(item)
    return view


# ---------------------------------------------------------------------- the daily post
def challenge_embed(card: ChallengeCard) -> discord.Embed:
    """The daily post: title, problems' topics and difficulty, the window's end as a countdown."""
    lines = [
        f"**{p.position}.** {plain(p.topic)} · {DIFFICULTY_ICONS.get(p.difficulty, '')} {p.difficulty}"
        for p in card.problems
    ]
    desc = "\n".join(lines)
    if card.closes_at is not None:
        when = "closed" if card.status != "open" else "closes"
        desc += f"\n\n⏳ {when} {relative(card.closes_at)} ({absolute(card.closes_at)})"
    embed = discord.Embed(title=safe_text(card.title), description=desc, colour=BLUE)
    embed.set_footer(
        text=f"Challenge #{card.challenge_id} · {card.day.isoformat()} · badge: {card.badge_name}"
    )
    return fit_embed(embed)


def challenge_view(card: ChallengeCard) -> discord.ui.View:
    """The Start button (persistent: it carries the challenge id)."""
    return _view(
        RankZeroButton(
            "start",
            card.challenge_id,
            label="Start" if card.status == "open" else "Closed",
            style=discord.ButtonStyle.success,
            disabled=card.status != "open",
        )
    )


# ---------------------------------------------------------------------- the private problem flow
def problem_embed(
    card: ProblemCard, feedback: Feedback | None = None, hint: HintCard | None = None
) -> discord.Embed:
    """Problem N of M: prompt, code, choices, attempts, deadline, and feedback/explanation when given."""
    over = card.over or (feedback is not None and feedback.over)
    colour = BLUE
    if feedback is not None:
        colour = GREEN if feedback.correct else (RED if feedback.over or feedback.letter else GREY)
    embed = discord.Embed(
        title=f"Problem {card.position} of {card.total} · {plain(card.topic)} · {card.difficulty}",
        description=bank_text(card.prompt),
        colour=colour,
    )
    # Code, choices, hint and explanation are shown whole: over a field's 1024 characters they go on in
    # further fields (the bank's validation keeps a question within the embed's 6000 in all).
    if card.code:
        add_long_field(embed, "Code", code_text(card.code))
    choices = "\n".join(f"**{letter}.** {safe_text(text)}" for letter, text in card.choices)
    add_long_field(embed, "Choices", choices)
    hint_text = hint.hint if hint is not None else card.hint
    if hint_text:
        cost = f" (−{hint.cost} points)" if hint is not None and hint.cost else ""
        add_long_field(embed, f"💡 Hint{cost}", safe_text(hint_text))
    if feedback is not None:
        embed.add_field(name="Result", value=safe_text(_feedback_line(feedback)), inline=False)
    if over:
        reveal = feedback.reveal if feedback is not None else None
        if reveal is not None:
            text = f"Correct answer: **{reveal.correct_letter}**"
            if reveal.explanation:
                text += "\n" + bank_text(reveal.explanation)
            add_long_field(embed, "Explanation", text)
        embed.add_field(name="Status", value="This problem is over.", inline=False)
    else:
        embed.add_field(
            name="Attempts",
            value=f"Attempts: {card.attempts_left} left",
            inline=True,
        )
        embed.add_field(name="Time", value=f"⏳ ends {relative(card.deadline)}", inline=True)
    embed.set_footer(text=f"problem {card.problem_id}")
    return fit_embed(embed)


def _feedback_line(feedback: Feedback) -> str:
    if feedback.correct:
        icon = "✅"
    elif feedback.outcome == "timeout":
        icon = "⌛"
    else:
        icon = "❌"
    if feedback.outcome == "timeout" and not feedback.letter:
        text = "Time is up."
    elif feedback.message:
        text = feedback.message
    elif feedback.correct:
        text = f"right: +{feedback.points} points"
    else:
        text = "wrong" + (f", {feedback.attempts_left} attempt(s) left" if not feedback.over else "")
    return f"{icon} {feedback.letter}: {text}" if feedback.letter else f"{icon} {text}"


def problem_view(card: ProblemCard, feedback: Feedback | None = None) -> discord.ui.View:
    """Choice buttons A–F (5 per row), Hint; Next once the problem is over."""
    over = card.over or (feedback is not None and feedback.over)
    if over:
        return _view(
            RankZeroButton("next", card.challenge_id, label="Next", style=discord.ButtonStyle.primary, row=0)
        )
    items: list[discord.ui.Item[Any]] = []
    for i, (letter, _) in enumerate(card.choices[:10]):
        items.append(
            RankZeroButton(
                "answer",
                card.problem_id,
                letter,
                label=letter,
                style=discord.ButtonStyle.secondary,
                disabled=letter in card.wrong_letters,
                row=i // 5,
            )
        )
    if card.has_hint:
        items.append(
            RankZeroButton(
                "hint",
                card.problem_id,
                label="Hint",
                style=discord.ButtonStyle.primary,
                disabled=card.hint is not None,
                row=2,
            )
        )
    return _view(*items)


def summary_embed(summary: PlayerChallengeSummary) -> discord.Embed:
    """The end of a player's challenge."""
    embed = discord.Embed(
        title=f"Done: {summary.correct}/{summary.total} correct, {summary.points} points",
        description=f"Streak: {summary.streak} day(s)",
        colour=GREEN,
    )
    if summary.badges:
        embed.add_field(
            name="Badges",
            value="\n".join(f"{b.emoji} **{plain(b.name)}**: {plain(b.description)}" for b in summary.badges),
            inline=False,
        )
    return fit_embed(embed)


# ---------------------------------------------------------------------- channel posts
def results_embeds(card: ResultsCard) -> list[discord.Embed]:
    """Results when a challenge closes: one embed, or several (one message each) when a large tie, many
    badges or streaks are over one embed's limits; nobody's name is cut.
    """
    embed = discord.Embed(title=f"Results · {safe_text(card.title)}", colour=GREEN)
    embed.description = f"{card.players} player(s)"
    for p in card.problems:
        dist = " ".join(f"{k}:{v}" for k, v in sorted(p.distribution.items()))
        embed.add_field(
            name=f"{p.position}. {plain(p.topic)}",
            value=f"answer **{p.correct_letter}** · {p.solved}/{p.players} solved · {dist}",
            inline=False,
        )
    if card.winners:
        add_long_field(
            embed, "Top", "\n".join(f"{w.rank}. {plain(w.display_name)} · {w.points}" for w in card.winners)
        )
    if card.badges:
        add_long_field(
            embed, "Badges", "\n".join(f"{b.emoji} {plain(name)}: {plain(b.name)}" for name, b in card.badges)
        )
    if card.streaks:
        add_long_field(
            embed,
            "Streaks",
            "\n".join(
                f"{'🎉' if s.milestone else '🔥'} {plain(s.display_name)} · {s.days} days"
                + (" · **milestone!**" if s.milestone else "")
                for s in card.streaks
            ),
        )
    for note in card.notes:
        add_long_field(embed, "Correction", safe_text(note))
    embed.set_footer(text="See the standings with /leaderboard")
    return split_embed(embed)


def reminder_text(card: ReminderCard) -> str:
    """The closing reminder."""
    return f"⏰ **{safe_text(card.title)}** closes {relative(card.closes_at)}: press Start on today's post."


def leaderboard_embed(card: LeaderboardCard) -> discord.Embed:
    """A leaderboard with the caller's own line when outside the top."""
    lines = [f"**{r.rank}.** {plain(r.display_name)} · {r.points} pts" for r in card.rows]
    if card.me is not None and all(r.rank != card.me.rank for r in card.rows):
        lines.append(f"…\n**{card.me.rank}.** {plain(card.me.display_name)} · {card.me.points} pts (you)")
    desc = "\n".join(lines) or "Nobody has scored yet."
    embed = discord.Embed(title=card.title, description=desc, colour=BLUE)
    embed.set_footer(text=f"{card.total_players} ranked player(s)")
    return fit_embed(embed)


def stats_embed(card: StatsCard) -> discord.Embed:
    """A player's record."""
    embed = discord.Embed(title=f"Stats · {plain(card.display_name)}", colour=BLUE)
    embed.description = (
        f"{card.points} points · {card.correct}/{card.problems} solved · "
        f"{card.challenges_completed} challenge(s) · streak {card.streak} (best {card.longest_streak})"
    )
    for t in card.by_topic[:20]:
        embed.add_field(name=plain(t.name), value=f"{t.correct}/{t.answered} ({t.accuracy:.0%})", inline=True)
    if card.badges:
        embed.add_field(name="Badges", value=" ".join(f"{b.emoji}×{n}" for b, n in card.badges), inline=False)
    return fit_embed(embed)


def error_text(message: str) -> str:
    """A refusal or domain error, as shown to the one who caused it."""
    return f"⚠️ {safe_text(message)}"
