"""Block Kit for the practice modes (quiz, flashcard review, explain) and the practice stats panel.

Practice runs in a modal, like the challenge (see the README's Slack section): private, and updatable by
view id for as long as it is open. Every echoed text goes through :func:`blocks.esc` and Slack's limits are
kept with the helpers of :mod:`blocks` (``clip``, ``actions``, ``fit_view``).

Component ids are the shared ``rz:practice:<verb>:<arg>...`` of :mod:`bot.core.ids` (verbs: quiz,
quiznext, reveal, grade); everything a button needs is in its id.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from bot.adapters.slack.blocks import (
    Block,
    actions,
    button,
    clip,
    code_sections,
    context,
    esc,
    fit_view,
    markdown_sections,
    packed_sections,
    section,
)
from bot.core import ids
from bot.core.cards import PracticeNudgeCard
from bot.core.practice import format_delay
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

#: callback_id of the practice modals without a submit button (quiz, review, results).
PRACTICE_CALLBACK = "rz_practice"
#: callback_id of the explain modal, whose submission is graded.
EXPLAIN_CALLBACK = "rz_explain"
#: block_id of the explain answer input (errors on it are keyed by this).
ANSWER_BLOCK = "answer"
#: Slack's maximum max_length of a plain_text_input.
MAX_INPUT = 3000
#: The verbs of this adapter's practice buttons.
VERBS = frozenset({"quiz", "quiznext", "reveal", "grade", "tz"})
#: What every practice button id starts with (the listener's pattern).
ID_PREFIX = f"{ids.PREFIX}:practice:"
GRADE_STYLE = {"again": "danger", "good": "primary"}

QUIZ_TITLE = "Practice quiz"
REVIEW_TITLE = "Flashcards"
EXPLAIN_TITLE = "Explain"


def action_id(verb: str, *args: object) -> str:
    """``rz:practice:<verb>:<args>``."""
    if verb not in VERBS:
        raise ValueError(f"unknown practice verb {verb!r}")
    return ids.encode("practice", verb, *args)


def parse_action(raw: str) -> tuple[str, tuple[str, ...]]:
    """(verb, args) of an id made by :func:`action_id`; ValueError for anything else."""
    decoded = ids.decode(raw)
    if decoded is None or decoded.action != "practice" or not decoded.args or decoded.args[0] not in VERBS:
        raise ValueError(f"not a Slack practice component id: {raw!r}")
    return decoded.args[0], decoded.args[1:]


def _modal(title: str, blocks: Sequence[Block], metadata: str = "") -> Block:
    return {
        "type": "modal",
        "callback_id": PRACTICE_CALLBACK,
        "title": {"type": "plain_text", "text": clip(title, 24)},
        "close": {"type": "plain_text", "text": "Close"},
        "blocks": fit_view(blocks),
        "private_metadata": metadata,
    }


def loading_view(title: str) -> Block:
    """What the modal shows while the service call runs (opened at once: trigger ids expire in 3 s)."""
    return _modal(title, [section(":hourglass_flowing_sand: Loading…")])


def nudge_text(card: PracticeNudgeCard) -> str:
    """The daily DM of a player who opted in (mrkdwn)."""
    cards = "1 flashcard is" if card.due == 1 else f"{card.due} flashcards are"
    return (
        f":bell: *{cards} due* in RankZero. `/rankzero review` to study them "
        "(`/rankzero review nudge off` stops this daily message)."
    )


def new_per_day_text(count: int) -> str:
    """The answer to ``/rankzero review new N``."""
    if count == 0:
        return "New cards *paused*: reviews of cards you started go on (`/rankzero review new 10` to resume)."
    return f"*{count}* new card{'s' if count != 1 else ''} a day from now on."


def timezone_text(zone: str) -> str:
    """The answer to ``/rankzero review timezone ZONE`` (a validated IANA name)."""
    return f"Your timezone is *{zone}*: your day starts at 4 am there (due cards, streak, reminder)."


def nudge_setting_text(on: bool) -> str:
    """The answer to ``/rankzero review nudge on|off``."""
    if on:
        return (
            "Daily reminder *on*: one message a day while flashcards are due "
            "(`/rankzero review nudge off` to stop)."
        )
    return "Daily reminder *off*."


def timezone_offer_view(current: str | None, slack_zone: str | None) -> Block:
    """``/rankzero review timezone`` without a zone: the player's setting, and Slack's zone for them
    (users.info ``tz``) offered with a button, or how to set one when Slack does not say.
    """
    unset = "You have not set a timezone: your day is UTC's."
    now = f"Your timezone is *{esc(current)}*." if current else unset
    blocks: list[Block] = [section(f"{now} Your day starts at 4 am there (due cards, streak, reminder).")]
    if slack_zone is not None and slack_zone != current:
        blocks.append(section(f"Slack says your timezone is *{esc(slack_zone)}*."))
        blocks.extend(actions([button(f"Use {slack_zone}", action_id("tz", slack_zone), style="primary")]))
    elif slack_zone is None:
        blocks.append(context("Slack did not share your timezone."))
    blocks.append(context("Or set any zone: `/rankzero review timezone Europe/Paris` (an IANA name)."))
    return _modal(REVIEW_TITLE, blocks)


def message_view(title: str, text: str) -> Block:
    """A practice modal that only says something (an unknown topic, an empty bank...)."""
    return _modal(title, [section(f":warning: {esc(text)}")])


def _choices(choices: Sequence[tuple[str, str]]) -> list[Block]:
    return packed_sections([f"*{esc(letter)}.* {esc(text)}" for letter, text in choices])


# ---------------------------------------------------------------------- quiz
def quiz_question_view(card: QuizQuestionCard) -> Block:
    """One quiz question: prompt, code, choices and a button per choice."""
    blocks: list[Block] = [
        section(
            f"*Quiz {card.position} of {card.total}* · {esc(card.topic)} · {esc(card.difficulty)}"
            " · untimed, not ranked"
        ),
        *markdown_sections(card.prompt),
    ]
    if card.code:
        blocks += code_sections(card.code)
    blocks += _choices(card.choices)
    blocks += actions(
        [
            button(letter, action_id("quiz", card.quiz_id, card.position, letter), value=letter)
            for letter, _ in card.choices
        ]
    )
    return _modal(QUIZ_TITLE, blocks, metadata=f"quiz:{card.quiz_id}")


def quiz_feedback_view(fb: QuizFeedback) -> Block:
    """Immediate feedback: right or wrong, every choice marked (with its note), the explanation, Next."""
    so_far = f"({fb.score}/{fb.answered} so far)"
    if fb.correct:
        head = f":white_check_mark: *Correct!* {so_far}"
    else:
        head = f":x: *Wrong:* the answer was *{esc(fb.correct_letter)}* {so_far}"
    lines = []
    for c in fb.choices:
        mark = ":white_check_mark:" if c.correct else (":x:" if c.letter == fb.letter else "·")
        mine = " _(your answer)_" if c.letter == fb.letter else ""
        line = f"{mark} *{esc(c.letter)}.* {esc(c.text)}{mine}"
        if c.feedback:
            line += f"\n      {esc(c.feedback)}"
        lines.append(line)
    blocks = [section(f"*Quiz {fb.position} of {fb.total}*\n{head}"), *packed_sections(lines)]
    if fb.explanation:
        blocks += markdown_sections(fb.explanation, "*Why:*")
    label = "See my score" if fb.finished else "Next question"
    blocks += actions([button(label, action_id("quiznext", fb.quiz_id), style="primary")])
    return _modal(QUIZ_TITLE, blocks, metadata=f"quiz:{fb.quiz_id}")


def quiz_result_view(card: QuizResultCard) -> Block:
    """The end of a quiz: "You got N/5" and a line per question."""
    lines = [
        f"{i.position}. {':white_check_mark:' if i.correct else ':x:'} {esc(i.topic)}"
        f" (`{esc(i.question_id)}`) · your answer: {esc(i.letter or '-')}"
        for i in card.items
    ]
    topic = f" · {esc(card.topic)}" if card.topic else ""
    blocks = [
        section(f"*You got {card.correct}/{card.total}*{topic}"),
        section("\n".join(lines)),
        context("Practice never changes the leaderboard. Another one: `/rankzero quiz [topic]`."),
    ]
    return _modal(QUIZ_TITLE, blocks, metadata=f"quiz:{card.quiz_id}")


# ---------------------------------------------------------------------- flashcards
def review_summary_line(summary: ReviewSummary) -> str:
    """``3 cards due · 12 in your deck`` (and how many were just added)."""
    plural = "s" if summary.due_now != 1 else ""
    line = f"*{summary.due_now} card{plural} due* · {summary.cards} in your deck"
    if summary.added:
        line += f" · {summary.added} new (recall cards and challenge questions you missed)"
    return line


def outcome_line(out: ReviewOutcome) -> str:
    """What a grade scheduled: ``good: next review in 10m``."""
    line = f":arrow_right: *{out.grade}*: next review in {out.next_in}"
    if out.is_leech:
        line += " · _leech: you keep forgetting this one; rewrite it in your own words_"
    return line


def _card_head(card: FlashcardCard, lead: str | None) -> list[Block]:
    origin = "recall card" if card.source == "bank" else "a challenge question you missed"
    blocks = [section(lead)] if lead else []
    blocks.append(context(f"{card.phase} · {esc(card.topic)} · {origin} · {card.remaining} due"))
    blocks.append(section(esc(card.front)))
    if card.code:
        blocks += code_sections(card.code)
    return blocks


def flashcard_front_view(card: FlashcardCard, lead: str | None = None) -> Block:
    """The front of a card and Reveal; ``lead`` (already mrkdwn) goes first (the previous grade...)."""
    blocks = _card_head(card, lead)
    blocks += actions([button("Reveal", action_id("reveal", card.card_id, card.showing), style="primary")])
    return _modal(REVIEW_TITLE, blocks, metadata=f"card:{card.card_id}")


def flashcard_back_view(card: FlashcardCard) -> Block:
    """Front and back, then again/hard/good/easy, each labelled with the delay it would schedule."""
    blocks = _card_head(card, None)
    blocks.append(section(f"*Answer*\n{esc(card.back) or '_(no answer text)_'}"))
    if card.explanation:
        blocks += markdown_sections(card.explanation)
    blocks += actions(
        [
            button(
                f"{grade.title()} · {delay}",
                action_id("grade", card.card_id, card.showing, grade),
                value=grade,
                style=GRADE_STYLE.get(grade),
            )
            for grade, delay in card.next_intervals
        ]
    )
    blocks.append(context("How well did you remember it? Each button shows when you would see it again."))
    return _modal(REVIEW_TITLE, blocks, metadata=f"card:{card.card_id}")


def review_done_view(summary: ReviewSummary, now: dt.datetime, lead: str | None = None) -> Block:
    """No card due: when the next one is, or how to get some."""
    blocks = [section(lead)] if lead else []
    text = "*No cards due right now.*"
    if summary.next_due is not None:
        text += f" Next card due in {format_delay(max(dt.timedelta(0), summary.next_due - now))}."
    elif summary.cards == 0:
        text += " Your deck is empty: the bank has no recall cards yet, and challenge mistakes become cards."
    blocks.append(section(text))
    blocks.append(context(f"{summary.cards} cards in your deck · `/rankzero review` any time"))
    return _modal(REVIEW_TITLE, blocks)


# ---------------------------------------------------------------------- explain
def explain_modal(card: ExplainPromptCard) -> Block:
    """The explain prompt with a multiline answer field; submitting grades it."""
    blocks: list[Block] = [
        section(
            f"*Explain* · {esc(card.topic)} · {esc(card.difficulty)} · graded on {card.concepts} concepts"
        ),
        *markdown_sections(card.prompt),
    ]
    if card.retry_note:
        blocks.insert(1, context(f":repeat: {esc(card.retry_note)}"))
    if card.hint:
        blocks.append(context(f":bulb: {esc(card.hint)}"))
    return _answer_modal(blocks, card.version_id, "Grade my answer", "Cancel")


def _answer_modal(blocks: list[Block], version_id: int, submit: str, close: str) -> Block:
    """An explain modal: ``blocks``, then the answer field; submitting grades the answer to ``version_id``."""
    blocks = [
        *blocks,
        {
            "type": "input",
            "block_id": ANSWER_BLOCK,
            "label": {"type": "plain_text", "text": "Your answer, in your own words"},
            "element": {
                "type": "plain_text_input",
                "action_id": "value",
                "multiline": True,
                "max_length": MAX_INPUT,
            },
        },
    ]
    return {
        "type": "modal",
        "callback_id": EXPLAIN_CALLBACK,
        "title": {"type": "plain_text", "text": EXPLAIN_TITLE},
        "submit": {"type": "plain_text", "text": submit},
        "close": {"type": "plain_text", "text": close},
        "blocks": fit_view(blocks),
        "private_metadata": str(version_id),
    }


def explain_result_view(card: ExplainResultCard) -> Block:
    """The grade: "You got 3/5 concepts", covered ones (with what matched), missed ones, the model answer."""
    icon = ":white_check_mark:" if card.passed else ":repeat:"
    blocks = [section(f"*You got {card.covered}/{card.total} concepts*\n{icon} {esc(card.verdict)}")]
    if not card.passed and card.hint:
        blocks.append(context(f":bulb: {esc(card.hint)}"))
    covered = [
        f":white_check_mark: {esc(c.name)}" + (f" (“{esc(c.matched)}”)" if c.matched else "")
        for c in card.concepts
        if c.covered
    ]
    if covered:
        blocks.append(section("*Covered*\n" + "\n".join(covered)))
    if card.misconceptions:
        wrong = (
            f":warning: You wrote that {esc(c.misconception or '')}: {esc(c.correction or '')}"
            for c in card.misconceptions
        )
        blocks.append(section("*Misconception*\n" + "\n".join(wrong)))
    if card.note:
        blocks.append(section(f"*Note*\n{esc(card.note)}"))
    if card.missed:
        blocks.append(section("*Missed*\n" + "\n".join(f":x: {esc(name)}" for name in card.missed)))
    if card.model_answer:
        blocks.append(section(f"*Model answer*\n{esc(card.model_answer)}"))
    if card.explanation:
        blocks += markdown_sections(card.explanation)
    blocks.append(context("Not ranked. Another prompt: `/rankzero explain [topic]`."))
    if not card.passed and card.version_id:
        # A failed answer may be tried again on the same prompt: the grade keeps its answer field.
        return _answer_modal(blocks, card.version_id, "Try again", "Close")
    return _modal(EXPLAIN_TITLE, blocks, metadata=f"explain:{card.attempt_id}")


# ---------------------------------------------------------------------- stats
def practice_stats_blocks(card: PracticeStatsCard) -> list[Block]:
    """The practice panel of ``stats`` and the Home tab (kept apart from the ranked figures)."""
    pct = f" ({100 * card.quiz_correct // card.quiz_answers}%)" if card.quiz_answers else ""
    return [
        section(
            "*Practice* (not ranked)\n"
            f"Quizzes: {card.quizzes} finished · {card.quiz_correct}/{card.quiz_answers} correct{pct}\n"
            f"Flashcards: {card.cards} in deck · {card.cards_due} due · {card.reviews} reviews\n"
            f"Explain: {card.explain_attempts} answers · "
            f"{card.concepts_covered}/{card.concepts_total} concepts covered"
        ),
        context("`/rankzero quiz [topic]` · `/rankzero review` · `/rankzero explain [topic]`"),
    ]
