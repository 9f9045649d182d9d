"""What a player sees is complete: every question of the shipped bank, rendered for Discord and for
Slack, is accepted by the strict fakes' limit checks and shows every line of its code, prompt, choices,
hint and explanation (issue 25, section 4). Long text goes on in further fields or sections; nothing is
cut with a "… (truncated)" marker.
"""

from __future__ import annotations

import datetime as dt
import random
import re
from collections.abc import Iterator

import pytest

from bot.adapters.discord import practice_render as discord_practice
from bot.adapters.discord import render as discord_render
from bot.adapters.discord.sanitize import escape_fences
from bot.adapters.markup import split_markdown, to_discord, to_slack_mrkdwn
from bot.adapters.slack import blocks as bk
from bot.adapters.slack import practice_blocks as slack_practice
from bot.core.cards import Feedback, HintCard, ProblemCard, ResultsCard, Reveal
from bot.core.models import Choice, StandingRow
from bot.core.practice_models import QuizFeedback, QuizQuestionCard
from questions.loader import LoadedQuestion
from questions.schema import LETTERS
from tests.discord_fake import embed_problems
from tests.shipped import shipped_questions
from tests.slack_fake import MAX_MESSAGE_BLOCKS, block_problems, view_problems

NOW = dt.datetime(2026, 11, 27, 9, 0, tzinfo=dt.UTC)


@pytest.fixture(scope="module")
def bank() -> list[LoadedQuestion]:
    """Every multiple-choice question shipped (questions/bank and questions/bank/generated)."""
    return [q for q in shipped_questions() if q.spec.choices]


def _cards(q: LoadedQuestion) -> tuple[ProblemCard, Feedback, HintCard | None]:
    spec = q.spec
    assert spec.choices is not None and spec.prompt is not None
    choices = tuple((LETTERS[i], c.text) for i, c in enumerate(spec.choices))
    card = ProblemCard(
        1, 2, 5, 5, spec.kind, spec.topic, spec.difficulty, spec.prompt, spec.code, choices,
        0, spec.attempts, NOW, NOW, spec.hint is not None, spec.hint, over=True,
    )  # fmt: skip
    reveal = Reveal(
        spec.correct_letter or "A",
        spec.explanation,
        tuple(Choice(LETTERS[i], c.text, c.correct, c.feedback) for i, c in enumerate(spec.choices)),
    )
    feedback = Feedback(2, "wrong", "B", False, 0, 0, True, reveal, message="wrong, no attempts left")
    hint = HintCard(2, spec.hint, 10) if spec.hint else None
    return card, feedback, hint


def _missing(source: str, shown: str) -> list[str]:
    """The lines of ``source`` not in ``shown``; a line longer than a field or section may be cut at
    spaces over two, so such a line counts as shown when its words are, in order.
    """
    missing = []
    for line in source.split("\n"):
        if not line.strip() or line in shown:
            continue
        pos = 0
        for word in line.split(" "):
            pos = shown.find(word, pos)
            if pos < 0:
                missing.append(line)
                break
    return missing


def _discord_text(embed_dict: dict[str, object]) -> str:
    fields = embed_dict.get("fields") or []
    assert isinstance(fields, list)
    return "\n".join([str(embed_dict.get("description") or ""), *(str(f["value"]) for f in fields)])


def _slack_text(blocks: list[dict[str, object]]) -> str:
    def texts(value: object) -> Iterator[str]:
        if isinstance(value, dict):
            if isinstance(value.get("text"), str):
                yield value["text"]
            for v in value.values():
                yield from texts(v)
        elif isinstance(value, list):
            for v in value:
                yield from texts(v)

    return "\n".join(texts(blocks))


def test_every_bank_question_is_shown_whole_on_both_platforms(bank: list[LoadedQuestion]) -> None:
    """Slack showed the bank whole already; Discord cut 20 questions (a 1024-character field)."""
    assert len(bank) > 1000  # the bank itself, not a sample
    _whole_on_slack(bank)
    _whole_on_discord(bank)


def _whole_on_discord(bank: list[LoadedQuestion]) -> None:
    refused, cut = [], []
    for q in bank:
        card, feedback, hint = _cards(q)
        question = [escape_fences(card.code or ""), to_discord(card.prompt)]
        reveal = [*question, to_discord(q.spec.explanation or ""), hint.hint if hint else ""]
        for embed, parts in (
            (discord_render.problem_embed(card), question),
            (discord_render.problem_embed(card, feedback, hint), reveal),
        ):
            d = dict(embed.to_dict())
            problems = embed_problems([d])
            if problems:
                refused.append((q.spec.id, problems))
            shown = _discord_text(d)
            lost = [line for part in parts for line in _missing(part, shown)]
            if "(truncated)" in shown or lost:
                cut.append((q.spec.id, lost[:2]))
    assert not refused, refused[:3]
    assert not cut, f"{len(cut)} questions cut on Discord, e.g. {cut[:3]}"


def _whole_on_slack(bank: list[LoadedQuestion]) -> None:
    refused, cut = [], []
    for q in bank:
        card, feedback, _ = _cards(q)
        view = bk.problem_view(card, feedback)
        problems = view_problems(view)
        if problems:
            refused.append((q.spec.id, problems))
        shown = _slack_text(view["blocks"])
        parts = [to_slack_mrkdwn(card.prompt), to_slack_mrkdwn(q.spec.explanation or "")]
        code = [bk.esc(line) for line in (card.code or "").split("\n")]
        lost = [line for part in parts for line in _missing(part, shown)]
        lost += [line for line in code if line.strip() and line not in shown]
        if "(truncated)" in shown or lost:
            cut.append((q.spec.id, lost[:2]))
    assert not refused, refused[:3]
    assert not cut, f"{len(cut)} questions cut on Slack, e.g. {cut[:3]}"


def test_the_print_line_of_tp_mlp_output_matches_is_shown(bank: list[LoadedQuestion]) -> None:
    """The issue's example: its code's last lines print the output the question asks about."""
    [q] = [q for q in bank if q.spec.id == "tp-mlp-output-matches"]
    assert q.spec.code is not None and len(q.spec.code) > 1024
    *_, before, last = q.spec.code.rstrip("\n").split("\n")
    assert "show(" in before  # the call that prints spans the last two lines
    card, _, _ = _cards(q)
    discord_shown = _discord_text(dict(discord_render.problem_embed(card).to_dict()))
    slack_shown = _slack_text(bk.problem_view(card)["blocks"])
    for line in (before, last):
        assert line in discord_shown
        assert bk.esc(line) in slack_shown


def test_quiz_shows_long_explanations_and_code_whole(bank: list[LoadedQuestion]) -> None:
    """The practice quiz shows the same questions: its question and feedback are whole too."""
    longest = sorted(bank, key=lambda q: len(q.spec.explanation or "") + len(q.spec.code or ""))[-20:]
    for q in longest:
        spec = q.spec
        assert spec.choices is not None and spec.prompt is not None
        choices = tuple((LETTERS[i], c.text) for i, c in enumerate(spec.choices))
        question = QuizQuestionCard(
            1, 1, 5, spec.id, spec.topic, spec.difficulty, spec.prompt, spec.code, choices
        )
        notes = tuple(Choice(LETTERS[i], c.text, c.correct, c.feedback) for i, c in enumerate(spec.choices))
        fb = QuizFeedback(
            1, 1, 5, "A", False, spec.correct_letter or "A", notes, spec.explanation, 0, 1, False
        )
        d_question = discord_practice.quiz_question_embed(question).to_dict()
        d_feedback = discord_practice.quiz_feedback_embed(fb).to_dict()
        assert not embed_problems([dict(d_question)]) and not embed_problems([dict(d_feedback)])
        assert not _missing(escape_fences(spec.code or ""), _discord_text(dict(d_question)))
        assert not _missing(to_discord(spec.explanation or ""), _discord_text(dict(d_feedback)))
        s_question = slack_practice.quiz_question_view(question)
        s_feedback = slack_practice.quiz_feedback_view(fb)
        assert not view_problems(s_question) and not view_problems(s_feedback)
        shown = _slack_text(s_feedback["blocks"])
        assert not _missing(to_slack_mrkdwn(spec.explanation or ""), shown), spec.id
        assert "(truncated)" not in shown + _slack_text(s_question["blocks"])


# ---------------------------------------------------------------------- large ties in the results post
def _tie(n: int) -> ResultsCard:
    winners = tuple(StandingRow(1, i, f"Player number {i:04d} of the tie", 500, 5, 100) for i in range(n))
    return ResultsCard(1, "Daily multi-GPU challenge", NOW.date(), (), winners, (), n)


def test_a_large_tie_is_listed_whole_on_slack() -> None:
    """(Discord's side posts through the fake: tests/bot/adapters/discord/test_discord_limits.py.)"""
    card = _tie(300)
    blocks = bk.results_blocks(card)
    for message in bk.split_message(blocks):
        assert not block_problems(message, MAX_MESSAGE_BLOCKS)
    slack = _slack_text(blocks)
    assert "truncated" not in slack
    assert all(f"Player number {i:04d} of the tie" in slack for i in range(300))


# ---------------------------------------------------------------------- Slack markup
FENCED = re.compile(r"```(.*?)```", re.S)
FENCE_LINE = re.compile(r"^[ \t]*```")


@pytest.mark.parametrize("ticks", [4, 5, 7])
def test_backtick_runs_in_code_cannot_end_a_slack_code_block(ticks: int) -> None:
    code = f"s = '{'`' * ticks}'\nprint(s)\nx = 1"
    card = ProblemCard(
        1, 2, 1, 5, "predict_output", "DDP", "advanced", "What is printed?", code, (("A", "1"), ("B", "2")),
        2, 2, NOW, NOW, False, None,
    )  # fmt: skip
    shown = [b["text"]["text"] for b in bk.problem_view(card)["blocks"] if b["type"] == "section"]
    for text in (bk.code_block(code), *[t for t in shown if t.startswith("```")]):
        assert text.startswith("```") and text.endswith("```")
        inner = text[3:-3]
        assert "```" not in inner, text  # one block, from the first fence to the last
        assert "print(s)" in inner
    md = f"Why:\n\n```python\n{code}\n```\nafter"
    for text in (to_slack_mrkdwn(md), to_discord(md)):
        body = text.split("```", 1)[1]
        assert "print(s)" in body.split("```", 1)[0], text  # the block did not end before print(s)


def test_code_ending_in_a_backtick_keeps_its_slack_fence() -> None:
    text = bk.code_block("x = `a`")
    assert not text.startswith("````") and not text.endswith("````")


#: What may follow ``<`` in mrkdwn: a user, channel, special mention, date or link (anything else is a
#: link Slack cannot resolve, and the text between the brackets disappears).
SLACK_CONTROL = re.compile(r"<(?:@[UW]|#C|!|https?://|mailto:)")


@pytest.mark.parametrize("admin", [False, True])
def test_slack_help_shows_its_placeholders(admin: bool) -> None:
    text = bk.help_text(admin)
    for m in re.finditer("<", text):
        assert SLACK_CONTROL.match(text, m.start()), text[m.start() : m.start() + 30]
    assert "&lt;command&gt;" in text
    assert "```" not in text  # a fence in the help would turn the rest of it into code


# ---------------------------------------------------------------------- the splitter itself
def test_split_markdown_keeps_every_word_in_pieces_within_the_limit_each_block_closed() -> None:
    """Random Markdown (prose, code blocks, stray backticks, long lines), split at several limits: every
    piece within the limit, every word there in order, and every piece's code fences balanced (a block
    cut between pieces is closed and opened again).
    """
    rng = random.Random(25)
    # Fence lines are the short ones of the generator; a prose word may hold backticks, not start a fence.
    words = ["a", "bb", "ccc<&>", "`", "``", "x" * 30, "s='```'", "print(s)"]
    for _ in range(800):
        lines = [
            rng.choice(["```", "```python", "  ```"])
            if rng.random() < 0.15
            else " ".join(rng.choice(words) for _ in range(rng.randint(0, 30)))
            for _ in range(rng.randint(0, 50))
        ]
        text = "\n".join(lines)
        limit = rng.choice([100, 300, 1024])
        pieces = split_markdown(text, limit)
        assert all(len(p) <= limit for p in pieces)
        joined, pos = "\n".join(pieces), 0
        for word in text.split():
            pos = joined.find(word, pos)
            assert pos >= 0, (word, text)
        for piece in pieces:
            fences = [line for line in piece.split("\n") if FENCE_LINE.match(line)]
            assert len(fences) % 2 == 0 or piece == pieces[-1], piece  # only the source's last may be open
