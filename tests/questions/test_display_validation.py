"""The bank refuses, at file:line with the limit, a question that cannot be shown whole on every chat
platform (questions/display.py), and what it accepts at the limit is shown whole on Discord and Slack.
"""

from __future__ import annotations

import datetime as dt
import textwrap

import pytest

from bot.adapters.discord import practice_render as discord_practice
from bot.adapters.discord import render as discord_render
from bot.adapters.slack import blocks as bk
from bot.adapters.slack import practice_blocks as slack_practice
from bot.core.cards import Feedback, HintCard, ProblemCard, Reveal
from bot.core.models import Choice, bounded_display_name, player_name_problem
from bot.core.practice_models import QuizFeedback
from questions.display import DISPLAY_BUDGET, MAX_CODE_LINE, display_problems
from questions.loader import BankValidationError, validate_text
from tests.discord_fake import embed_problems
from tests.slack_fake import view_problems

NOW = dt.datetime(2026, 11, 27, 9, 0, tzinfo=dt.UTC)


def _bank(code: str, explanation: str = "because", prompt: str = "What is printed?") -> str:
    def block(text: str) -> str:
        return textwrap.indent(text, " " * 6)

    return (
        "questions:\n"
        "  - id: ddp-display-1\n"
        "    kind: predict_output\n"
        "    topic: DDP\n"
        "    difficulty: advanced\n"
        f"    prompt: |\n{block(prompt)}\n"
        f"    code: |\n{block(code)}\n"
        "    runner: {mode: python, nproc: 1, gpus: 0, init_process_group: false}\n"
        f"    explanation: |\n{block(explanation)}\n"
        "    choices:\n"
        "      - text: '1'\n"
        "        correct: true\n"
        "      - text: '2'\n"
    )


def _errors(text: str) -> list[str]:
    with pytest.raises(BankValidationError) as info:
        validate_text(text, "bank.yaml")
    return [str(e) for e in info.value.errors]


def test_a_code_line_wider_than_a_discord_field_is_refused_at_the_code() -> None:
    code = "x = 1\ny = 2\nz = '" + "w" * 1200 + "'\nprint(x)"
    [error] = _errors(_bank(code))
    assert error.startswith("bank.yaml:8: questions[0] (ddp-display-1).code: 'code' line 3 of the snippet")
    assert f"is 1206 characters, over {MAX_CODE_LINE}" in error and "break it over several lines" in error
    validate_text(_bank(code.replace("w" * 1200, "w" * (MAX_CODE_LINE - 6))), "bank.yaml")  # at the limit


def test_a_question_over_one_discord_message_is_refused_naming_its_longest_field() -> None:
    code = "\n".join(f"print({i}, 'a line of the snippet')" for i in range(40))
    explanation = "\n".join(["A long explanation paragraph, " * 25] * 6)
    [error] = _errors(_bank(code, explanation))
    assert error.startswith("bank.yaml:")
    assert f"over {DISPLAY_BUDGET}: a Discord message holds 6000 characters" in error
    assert (
        f"starting with 'explanation' ({len(explanation) + 1} characters)" in error
    )  # YAML keeps the last newline
    # The loader points at the field it names: the explanation's line.
    assert ".explanation: the question shows" in error


def test_a_question_at_the_budget_is_shown_whole_on_both_platforms() -> None:
    """The budget is what the renderers really fit: a question of exactly DISPLAY_BUDGET shown characters
    (long prompt, code, choices with notes, hint and explanation) is accepted by the bank, Discord's and
    Slack's limit checks, and nothing of it is cut.
    """
    choices = [(f"choice {letter} " + "c" * 380, "note " + "n" * 200) for letter in "ABCD"]
    hint = "h " * 150
    code = "\n".join(f"out_{i} = compute({i})  # a comment about step {i:03d}" for i in range(30))
    prompt = "What does this print? " * 30
    used = sum(len(t) + len(f) for t, f in choices) + len(hint) + len(code) + len(prompt)
    explanation = ("Why, line by line. " * 20 + "\n") * ((DISPLAY_BUDGET - used) // 381)
    explanation += "e" * (DISPLAY_BUDGET - used - len(explanation))
    assert used + len(explanation) == DISPLAY_BUDGET
    assert not display_problems(prompt=prompt, code=code, hint=hint, explanation=explanation, choices=choices)
    letters = "ABCD"
    card = ProblemCard(
        1, 2, 5, 5, "predict_output", "Tensor & pipeline parallelism", "expert", prompt, code,
        tuple((letters[i], t) for i, (t, _) in enumerate(choices)), 0, 2, NOW, NOW, True, hint, over=True,
    )  # fmt: skip
    notes = tuple(Choice(letters[i], t, i == 0, f) for i, (t, f) in enumerate(choices))
    reveal = Reveal("A", explanation, notes)
    feedback = Feedback(2, "wrong", "B", False, 0, 0, True, reveal, message="wrong, no attempts left")
    embed = discord_render.problem_embed(card, feedback, HintCard(2, hint, 10)).to_dict()
    quiz = QuizFeedback(1, 5, 5, "B", False, "A", notes, explanation, 3, 5, True)
    quiz_embed = discord_practice.quiz_feedback_embed(quiz).to_dict()
    for d in (embed, quiz_embed):
        assert not embed_problems([dict(d)])
        shown = str(d)
        assert "truncated" not in shown and "e" * 20 in shown and "out_29 = compute(29)" in shown + str(embed)
    for view in (bk.problem_view(card, feedback), slack_practice.quiz_feedback_view(quiz)):
        assert not view_problems(view)
        assert "truncated" not in str(view)


# ---------------------------------------------------------------------- invisible characters
@pytest.mark.parametrize(
    ("where", "line", "char", "what"),
    [
        ("prompt", 6, "\u202e", "text-direction character U+202E"),  # RIGHT-TO-LEFT OVERRIDE
        ("prompt", 6, "\u2067", "text-direction character U+2067"),  # RIGHT-TO-LEFT ISOLATE
        ("code", 8, "\u200b", "zero-width character U+200B"),
        ("explanation", 11, "\ufeff", "zero-width character U+FEFF"),
    ],
)
def test_question_text_with_invisible_characters_is_refused_where_it_is(
    where: str, line: int, char: str, what: str
) -> None:
    texts = {"prompt": "What is printed?", "code": "print(1)", "explanation": "because"}
    texts[where] = texts[where][:4] + char + texts[where][4:]
    [error] = _errors(_bank(texts["code"], texts["explanation"], texts["prompt"]))
    assert error.startswith(f"bank.yaml:{line}: questions[0] (ddp-display-1).{where}: '{where}' contains")
    assert f"the invisible {what} (line 1, column 5 of the field)" in error and "remove it" in error


def test_an_invisible_character_in_a_choice_is_refused_at_the_choices() -> None:
    text = _bank("print(1)").replace("      - text: '2'", '      - text: "2\\u200d"')
    [error] = _errors(text)
    assert "'choices'[1].text contains the invisible zero-width character U+200D" in error


@pytest.mark.parametrize("name", ["\u200b", " \u200b\u200c ", "\ufeff\u2060"])
def test_a_name_of_only_zero_width_characters_is_refused_or_replaced(name: str) -> None:
    problem = player_name_problem(name)
    assert problem is not None and "needs a visible character" in problem
    assert bounded_display_name(name, "U123") == "U123"  # a platform's name: the user id is shown
    assert player_name_problem("Ada\u200bLovelace") is None  # with visible characters it is a name
