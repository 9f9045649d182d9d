"""Practice cards -> Discord embeds and views (quiz, flashcard review, explain, the practice stats panel).

The Discord twin of bot/adapters/console/practice_render.py. Text from the bank goes through
:func:`safe_text`, names and matched words through :func:`plain`; every message's embeds are fitted
together to Discord's limits (:func:`fit_message`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import discord

from bot.adapters.discord.practice_components import PracticeButton
from bot.adapters.discord.render import (
    BLUE,
    DIFFICULTY_ICONS,
    GREEN,
    GREY,
    RED,
    add_long_field,
    bank_text,
    code_text,
    relative,
)
from bot.adapters.discord.sanitize import (
    BUTTONS_PER_ROW,
    EMBED_TOTAL,
    FIELD_VALUE,
    MARKER,
    fit_embed,
    plain,
    safe_text,
    truncate,
)
from bot.core.cards import PracticeNudgeCard
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
)
from bot.core.srs import Grade

PURPLE = discord.Colour.purple()
GRADE_STYLE: dict[Grade, discord.ButtonStyle] = {
    "again": discord.ButtonStyle.danger,
    "hard": discord.ButtonStyle.secondary,
    "good": discord.ButtonStyle.success,
    "easy": discord.ButtonStyle.primary,
}
#: At most this many choice buttons (two rows of five), as for challenge problems.
MAX_CHOICES = 10
NOT_RANKED = "Practice · untimed · never changes the leaderboard"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _view(*items: discord.ui.Item[Any]) -> discord.ui.View:
    view = discord.ui.View(timeout=None)
    for item in items:
        view.add_item(item)
    return view


def fit_message(embeds: Sequence[discord.Embed]) -> list[discord.Embed]:
    """Fit each embed, then the message: Discord counts 6000 characters over all embeds of a message.

    The longest description is shortened first (with the truncation marker), then trailing fields go.
    """
    out = [fit_embed(e) for e in embeds]
    while (excess := sum(len(e) for e in out) - EMBED_TOTAL) > 0:
        longest = max(out, key=lambda e: len(e.description or ""))
        desc = longest.description or ""
        if len(desc) > len(MARKER) + 1:
            longest.description = truncate(desc, max(len(MARKER), len(desc) - excess))
            continue
        with_fields = [e for e in out if e.fields]
        if not with_fields:
            break
        biggest = max(with_fields, key=len)
        biggest.remove_field(len(biggest.fields) - 1)
    return out


# ---------------------------------------------------------------------- quiz
def quiz_question_embed(card: QuizQuestionCard) -> discord.Embed:
    """A quiz question: prompt, code, lettered choices."""
    icon = DIFFICULTY_ICONS.get(card.difficulty, "")
    embed = discord.Embed(
        title=f"Quiz {card.position}/{card.total} · {icon} {card.difficulty} · {plain(card.topic)}",
        description=bank_text(card.prompt),
        colour=BLUE,
    )
    if card.code:
        add_long_field(embed, "Code", code_text(card.code))
    add_long_field(
        embed, "Choices", "\n".join(f"**{letter}.** {safe_text(text)}" for letter, text in card.choices)
    )
    embed.set_footer(text=f"{NOT_RANKED} · quiz {card.quiz_id}")
    return fit_embed(embed)


def quiz_question_view(card: QuizQuestionCard) -> discord.ui.View:
    """One button per choice, five per row."""
    return _view(
        *(
            PracticeButton(
                "quiz", card.quiz_id, card.position, letter, label=letter, row=i // BUTTONS_PER_ROW
            )
            for i, (letter, _) in enumerate(card.choices[:MAX_CHOICES])
        )
    )


def quiz_feedback_embed(fb: QuizFeedback) -> discord.Embed:
    """Immediate feedback: right or wrong, the correct answer, the explanation, per-choice notes."""
    if fb.correct:
        title = f"✅ Correct! ({fb.score}/{fb.answered} so far)"
    else:
        title = f"❌ Wrong: the answer was {fb.correct_letter} ({fb.score}/{fb.answered} so far)"
    embed = discord.Embed(
        title=title,
        description=bank_text(fb.explanation) if fb.explanation else None,
        colour=GREEN if fb.correct else RED,
    )
    lines = []
    for c in fb.choices:
        mark = "✅" if c.correct else ("❌" if c.letter == fb.letter else "▫️")
        line = f"{mark} **{c.letter}.** {safe_text(c.text)}"
        if c.feedback:
            line += f"\n↳ {safe_text(c.feedback)}"
        lines.append(line)
    if lines:
        add_long_field(embed, "Choices", "\n".join(lines))
    embed.set_footer(text=f"Question {fb.position}/{fb.total} · quiz {fb.quiz_id}")
    return fit_embed(embed)


def quiz_next_view(fb: QuizFeedback) -> discord.ui.View | None:
    """Next, until the last question is answered."""
    if fb.finished:
        return None
    return _view(PracticeButton("next", fb.quiz_id, label="Next", style=discord.ButtonStyle.primary))


def quiz_result_embed(card: QuizResultCard) -> discord.Embed:
    """The end of a quiz: "You got N/5" and one line per question."""
    lines = [
        f"{'✅' if i.correct else '❌'} {i.position}. {plain(i.topic)} ({i.letter or '-'})"
        for i in card.items
    ]
    title = f"You got {card.correct}/{card.total}"
    if card.topic:
        title += f" · {plain(card.topic)}"
    embed = discord.Embed(title=title, description="\n".join(lines), colour=PURPLE)
    embed.set_footer(text="Practice never changes the leaderboard. /quiz for another round.")
    return fit_embed(embed)


# ---------------------------------------------------------------------- flashcards
def review_summary_text(summary: ReviewSummary) -> str:
    """The deck before a review session."""
    line = f"**{_plural(summary.due_now, 'card')} due** · {summary.cards} in your deck"
    if summary.added:
        line += f" · {summary.added} new (recall cards and challenge questions you missed)"
    return line


def _card_embed(card: FlashcardCard) -> discord.Embed:
    origin = "recall card" if card.source == "bank" else "a challenge question you missed"
    embed = discord.Embed(
        title=f"🃏 {card.phase} · {plain(card.topic)} · {origin}",
        description=safe_text(card.front),
        colour=BLUE,
    )
    if card.code:
        add_long_field(embed, "Code", code_text(card.code))
    lapses = f" · forgotten {_plural(card.lapses, 'time')}" if card.lapses else ""
    embed.set_footer(text=f"{card.remaining} due{lapses} · card {card.card_id}")
    return embed


def flashcard_front_embed(card: FlashcardCard) -> discord.Embed:
    """The front of a card."""
    return fit_embed(_card_embed(card))


def flashcard_front_view(card: FlashcardCard, reviewed: int) -> discord.ui.View:
    """Reveal (carries the card, its showing and the session's count)."""
    return _view(
        PracticeButton(
            "reveal",
            card.card_id,
            card.showing,
            reviewed,
            label="Reveal answer",
            style=discord.ButtonStyle.primary,
        )
    )


def flashcard_back_embed(card: FlashcardCard) -> discord.Embed:
    """Front and back of a card, with the explanation."""
    embed = _card_embed(card)
    embed.colour = GREEN
    add_long_field(embed, "Answer", safe_text(card.back) or "—")
    if card.explanation:
        add_long_field(embed, "Why", bank_text(card.explanation))
    embed.add_field(
        name="How well did you recall it?",
        value="Each button shows when the card would come back.",
        inline=False,
    )
    return fit_embed(embed)


def grade_view(card: FlashcardCard, reviewed: int) -> discord.ui.View:
    """Again / Hard / Good / Easy, each labelled with the delay FSRS would schedule: ``Good · 10m``."""
    return _view(
        *(
            PracticeButton(
                "grade",
                card.card_id,
                card.showing,
                grade,
                reviewed,
                label=f"{grade.title()} · {delay}",
                style=GRADE_STYLE[grade],
            )
            for grade, delay in card.next_intervals
        )
    )


def review_outcome_text(out: ReviewOutcome) -> str:
    """What a grade scheduled."""
    text = f"→ **{out.grade}**: next review in {out.next_in} ({relative(out.due)})"
    if out.duplicate:
        text += " (already graded)"
    if out.is_leech:
        text += "\n⚠️ Leech: you keep forgetting this one; rewrite it in your own words."
    return text


def nudge_text(card: PracticeNudgeCard) -> str:
    """The daily DM of a player who opted in."""
    return (
        f"🔔 **{_plural(card.due, 'flashcard')} due** in RankZero. `/review` to study them "
        "(`/review nudge:off` stops this daily message)."
    )


def nudge_setting_text(on: bool) -> str:
    """The answer to ``/review nudge:on|off``."""
    if on:
        return "Daily reminder **on**: one DM a day while flashcards are due (`/review nudge:off` to stop)."
    return "Daily reminder **off**."


def new_per_day_text(count: int) -> str:
    """The answer to ``/review new_per_day:N``."""
    if count == 0:
        return (
            "New cards **paused**: reviews of cards you started go on (`/review new_per_day:10` to resume)."
        )
    return f"**{count}** new card{'s' if count != 1 else ''} a day from now on."


def timezone_text(zone: str) -> str:
    """The answer to ``/review timezone:ZONE`` (a validated IANA name). Discord tells bots a user's
    language (``locale``) but never their timezone, so the player picks it; the reply says so.
    """
    return (
        f"Your timezone is **{zone}**: your day starts at 4 am there (due cards, streak, reminder).\n"
        "-# Discord does not share your timezone with bots: change it with `/review timezone:` "
        "(names are suggested as you type)."
    )


def review_done_embed(reviewed: int, summary: ReviewSummary) -> discord.Embed:
    """The end of a review session (or a session with nothing due)."""
    title = f"Reviewed {_plural(reviewed, 'card')}" if reviewed else "Nothing due right now"
    lines = [f"{summary.cards} in your deck · {summary.due_now} due"]
    if summary.next_due is not None:
        lines.append(f"Next card due {relative(summary.next_due)}.")
    elif not summary.cards:
        lines.append(
            "Your deck is empty: it fills with the bank's recall cards and the challenge questions you miss."
        )
    embed = discord.Embed(title=title, description="\n".join(lines), colour=GREEN if reviewed else GREY)
    embed.set_footer(text="Cards are scheduled with FSRS, the scheduler Anki uses.")
    return fit_embed(embed)


# ---------------------------------------------------------------------- explain
def explain_prompt_embed(card: ExplainPromptCard) -> discord.Embed:
    """An explain prompt."""
    icon = DIFFICULTY_ICONS.get(card.difficulty, "")
    embed = discord.Embed(
        title=f"✍ Explain · {icon} {card.difficulty} · {plain(card.topic)}",
        description=bank_text(card.prompt),
        colour=BLUE,
    )
    if card.retry_note:
        embed.add_field(name="🔁 Again", value=card.retry_note, inline=False)
    embed.add_field(
        name="How it is graded",
        value=(
            f"Press **Answer** and explain in your own words; graded on {_plural(card.concepts, 'concept')}."
        ),
        inline=False,
    )
    if card.hint:
        embed.add_field(name="Hint", value=truncate(plain(card.hint), FIELD_VALUE), inline=False)
    embed.set_footer(text=f"{NOT_RANKED} · {card.question_id}")
    return fit_embed(embed)


def explain_prompt_view(card: ExplainPromptCard) -> discord.ui.View:
    """The Answer button (opens the form; carries the prompt's version)."""
    return _view(
        PracticeButton("explain", card.version_id, label="Answer", style=discord.ButtonStyle.primary)
    )


def explain_result_embed(card: ExplainResultCard) -> discord.Embed:
    """The grade: covered concepts, missed ones, the model answer."""
    embed = discord.Embed(
        title=f"You got {card.covered}/{card.total} concepts",
        description=f"**Model answer**\n{safe_text(card.model_answer)}" if card.model_answer else None,
        colour=GREEN if card.covered == card.total else (RED if not card.covered else PURPLE),
    )
    covered = [
        f"✅ {plain(c.name)}" + (f" (“{plain(c.matched)}”)" if c.matched else "")
        for c in card.concepts
        if c.covered
    ]
    embed.add_field(name="Verdict", value=("✅ " if card.passed else "🔁 ") + card.verdict, inline=False)
    if covered:
        embed.add_field(name="Covered", value=truncate("\n".join(covered), FIELD_VALUE), inline=False)
    if card.misconceptions:
        wrong = "\n".join(
            f"⚠️ You wrote that {plain(c.misconception or '')}: {plain(c.correction or '')}"
            for c in card.misconceptions
        )
        embed.add_field(name="Misconception", value=truncate(wrong, FIELD_VALUE), inline=False)
    if card.note:
        embed.add_field(name="Note", value=truncate(plain(card.note), FIELD_VALUE), inline=False)
    if card.missed:
        missed = "\n".join(f"❌ {plain(name)}" for name in card.missed)
        embed.add_field(name="Missed", value=truncate(missed, FIELD_VALUE), inline=False)
    if card.explanation:
        add_long_field(embed, "Why", bank_text(card.explanation))
    embed.set_footer(text=f"{card.question_id} · /explain for another prompt")
    return fit_embed(embed)


def explain_result_view(card: ExplainResultCard) -> discord.ui.View | None:
    """A failed answer's Try again button (opens the form on the same prompt); none after a pass."""
    if card.passed:
        return None
    return _view(
        PracticeButton("explain", card.version_id, label="Try again", style=discord.ButtonStyle.primary)
    )


# ---------------------------------------------------------------------- stats
def practice_stats_embed(card: PracticeStatsCard) -> discord.Embed:
    """Practice figures, shown apart from the competitive stats."""
    pct = f" ({100 * card.quiz_correct // card.quiz_answers}%)" if card.quiz_answers else ""
    embed = discord.Embed(title=f"Practice · {plain(card.display_name)} (not ranked)", colour=PURPLE)
    embed.add_field(
        name="Quizzes",
        value=f"{card.quizzes} finished · {card.quiz_correct}/{card.quiz_answers} correct{pct}",
        inline=False,
    )
    embed.add_field(
        name="Flashcards",
        value=f"{card.cards} in deck · {card.cards_due} due · {card.reviews} reviews",
        inline=False,
    )
    embed.add_field(
        name="Explain",
        value=(
            f"{_plural(card.explain_attempts, 'answer')} · "
            f"{card.concepts_covered}/{card.concepts_total} concepts covered"
        ),
        inline=False,
    )
    return fit_embed(embed)
