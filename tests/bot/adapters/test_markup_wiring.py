"""Problem prompts and explanations reach Discord and Slack as each platform's own Markdown."""

from __future__ import annotations

import datetime as dt

from bot.adapters.discord.practice_render import quiz_question_embed
from bot.adapters.discord.render import problem_embed
from bot.adapters.slack.blocks import problem_view
from bot.adapters.slack.practice_blocks import quiz_question_view
from bot.core.cards import Feedback, ProblemCard, Reveal
from bot.core.practice_models import QuizQuestionCard

NOW = dt.datetime(2026, 11, 25, 12, 0, tzinfo=dt.UTC)
PROMPT = (
    "An **FSDP1** job hangs. The saving code is:\n\n```python\nif dist.get_rank() == 0:\n"
    "    torch.save(model.state_dict(), 'ckpt.pt')\n```\n\nWhat is wrong? <@123>"
)
EXPLANATION = (
    "Only rank 0 enters the **all-gather**:\n\n```python\nsd = model.state_dict()  # every rank\n```"
)


def _card(over: bool = False) -> ProblemCard:
    return ProblemCard(
        challenge_id=1,
        problem_id=2,
        position=1,
        total=5,
        kind="debug",
        topic="FSDP & ZeRO",
        difficulty="expert",
        prompt=PROMPT,
        code=None,
        choices=(("A", "one"), ("B", "two")),
        attempts_left=0 if over else 2,
        attempts_total=2,
        started_at=NOW,
        deadline=NOW + dt.timedelta(minutes=2),
        has_hint=False,
        hint=None,
        over=over,
    )


def _over() -> Feedback:
    reveal = Reveal(correct_letter="B", explanation=EXPLANATION, choices=())
    return Feedback(2, None, "A", False, 0, 0, True, reveal)


def test_discord_keeps_code_fences_of_prompts_and_explanations() -> None:
    embed = problem_embed(_card())
    assert embed.description is not None
    assert "```python\nif dist.get_rank() == 0:" in embed.description
    assert "\u200b`" not in embed.description.replace("<@\u200b123>", "")  # no broken fences
    assert "<@123>" not in embed.description  # mentions still neutralised
    over = problem_embed(_card(over=True), _over())
    explanation = next(f.value for f in over.fields if f.name == "Explanation")
    assert explanation is not None and "```python\nsd = model.state_dict()" in explanation


def test_slack_gets_mrkdwn_without_language_tags() -> None:
    view = problem_view(_card())
    texts = [b["text"]["text"] for b in view["blocks"] if b.get("type") == "section"]
    prompt = next(t for t in texts if "FSDP1" in t)
    assert "*FSDP1*" in prompt and "**" not in prompt
    assert "```if dist.get_rank() == 0:\n    torch.save" in prompt and "```python" not in prompt
    assert "&lt;@123&gt;" in prompt
    over = problem_view(_card(over=True), _over())
    texts = [b["text"]["text"] for b in over["blocks"] if b.get("type") == "section"]
    explanation = next(t for t in texts if "all-gather" in t)
    assert "*all-gather*" in explanation and "```sd = model.state_dict()" in explanation


def _quiz() -> QuizQuestionCard:
    choices = (("A", "one"), ("B", "two"))
    return QuizQuestionCard(1, 1, 5, "q1", "FSDP & ZeRO", "expert", PROMPT, None, choices)


def test_practice_quiz_uses_each_platforms_markdown_too() -> None:
    embed = quiz_question_embed(_quiz())
    assert embed.description is not None and "```python\nif dist.get_rank() == 0:" in embed.description
    assert "<@123>" not in embed.description
    view = quiz_question_view(_quiz())
    prompt = next(b["text"]["text"] for b in view["blocks"] if "FSDP1" in b.get("text", {}).get("text", ""))
    assert "*FSDP1*" in prompt and "**" not in prompt and "```python" not in prompt
