"""The explain verdict on every surface (issue 28): pass or not with what was missing, the hint, a retry."""

from __future__ import annotations

import io
import json

from rich.console import Console

from bot.adapters.console import practice_render as console
from bot.adapters.discord import practice_render as discord_render
from bot.adapters.slack import practice_blocks as slack
from bot.core.grading import ConceptResult
from bot.core.practice_models import ExplainPromptCard, ExplainResultCard

HINT = "What has to be on the GPU?"
PROMPT = ExplainPromptCard("q-1", 7, "Multi-GPU basics", "beginner", "Describe the steps.", HINT, 4)


def _result(covered: int, *, wrong: bool = False) -> ExplainResultCard:
    concepts = tuple(
        ConceptResult(f"concept {i}", i < covered, "words" if i < covered else None) for i in range(4)
    )
    if wrong:
        concepts = (
            ConceptResult("concept 3", False, None, "data can stay on the CPU", "move it"),
            *concepts[:3],
        )
    return ExplainResultCard(
        attempt_id=1,
        question_id="q-1",
        covered=covered,
        total=4,
        concepts=concepts,
        model_answer="Move the model.",
        explanation=None,
        passed=covered >= 3 and not wrong,
        required=3,
        version_id=7,
        hint=HINT,
    )


def _console_text(renderable: object) -> str:
    out = io.StringIO()
    Console(file=out, width=200, color_system=None).print(renderable)
    return out.getvalue()


def test_the_verdict_says_pass_or_what_is_missing() -> None:
    assert _result(3).verdict == "Passed (3 of 4 concepts needed)."
    assert _result(2).verdict == "Not passed yet: 3 of 4 concepts are needed. Try again in your own words."
    assert "a false claim fails the answer" in _result(3, wrong=True).verdict


def test_the_console_shows_the_hint_and_the_verdict() -> None:
    assert f"Hint: {HINT}" in _console_text(console.explain_prompt(PROMPT))
    shown = _console_text(console.explain_result(_result(2)))
    assert "You got 2/4 concepts" in shown and "Not passed yet: 3 of 4 concepts are needed" in shown
    assert "Passed (3 of 4" in _console_text(console.explain_result(_result(4)))


def test_discord_shows_the_hint_the_verdict_and_a_retry_button() -> None:
    prompt = discord_render.explain_prompt_embed(PROMPT).to_dict()
    assert any(f["name"] == "Hint" and f["value"] == HINT for f in prompt.get("fields", []))
    failed = discord_render.explain_result_embed(_result(2)).to_dict()
    verdict = next(f["value"] for f in failed.get("fields", []) if f["name"] == "Verdict")
    assert "Not passed yet" in verdict
    view = discord_render.explain_result_view(_result(2))
    assert view is not None
    (dynamic,) = view.children
    button = dynamic.item  # type: ignore[attr-defined]
    assert button.label == "Try again" and button.custom_id == "rz:practice:explain:7"
    assert discord_render.explain_result_view(_result(4)) is None


def test_slack_shows_the_verdict_the_hint_and_keeps_the_answer_field_after_a_failure() -> None:
    failed = slack.explain_result_view(_result(2))
    shown = json.dumps(failed)
    assert "Not passed yet" in shown and HINT in shown
    assert failed["callback_id"] == slack.EXPLAIN_CALLBACK and failed["private_metadata"] == "7"
    assert failed["submit"]["text"] == "Try again"
    assert any(b.get("block_id") == slack.ANSWER_BLOCK for b in failed["blocks"])
    passed = slack.explain_result_view(_result(4))
    assert "Passed (3 of 4" in json.dumps(passed) and "submit" not in passed
