"""The bank's Markdown rendered per platform: Slack mrkdwn and Discord (table-tested)."""

from __future__ import annotations

import pytest

from bot.adapters.markup import to_discord, to_slack_mrkdwn
from tests.shipped import shipped_questions

FENCED = "Saving code:\n\n```python\nif rank == 0:\n    torch.save(sd, 'a.pt')\n```\n\nWhat is wrong?"


@pytest.mark.parametrize(
    ("md", "mrkdwn"),
    [
        ("plain text", "plain text"),
        ("a **bold** word", "a *bold* word"),
        ("an *italic* word and **bold**", "an _italic_ word and *bold*"),
        ("~~gone~~", "~gone~"),
        (
            "see [the docs](https://pytorch.org/docs?a=1&b=2)",
            "see <https://pytorch.org/docs?a=1&amp;b=2|the docs>",
        ),
        ("x < y && z > w", "x &lt; y &amp;&amp; z &gt; w"),
        ("<!channel> hello", "&lt;!channel&gt; hello"),
        ("`**not bold**` and `a < b`", "`**not bold**` and `a &lt; b`"),
        ("``double `tick` span``", "`double `tick` span`"),
        ("- one\n- two\n  - nested", "• one\n• two\n  • nested"),
        ("1. first\n2. second", "1. first\n2. second"),
        ("## Heading\nbody", "*Heading*\nbody"),
        ("2 * 3 * 4 stays", "2 * 3 * 4 stays"),
        ("def __init__(self) stays", "def __init__(self) stays"),
        (FENCED, "Saving code:\n\n```if rank == 0:\n    torch.save(sd, 'a.pt')```\n\nWhat is wrong?"),
        ("```\nx = 1 < 2\n```", "```x = 1 &lt; 2```"),
        ("```py\na = '```'\n```", "```a = '`\u200b``'```"),
        ("unclosed:\n```python\nx = 1", "unclosed:\n```x = 1```"),
        ("[a|b](https://x.org)", "<https://x.org|a¦b>"),
    ],
)
def test_to_slack_mrkdwn(md: str, mrkdwn: str) -> None:
    assert to_slack_mrkdwn(md) == mrkdwn


@pytest.mark.parametrize(
    ("md", "discord"),
    [
        ("a **bold** and *italic* `code`", "a **bold** and *italic* `code`"),
        (FENCED, FENCED),
        ("unclosed:\n```python\nx = 1", "unclosed:\n```python\nx = 1\n```"),
        ("```py\na = '```'\n```", "```py\na = '`\u200b``'\n```"),
        ("  ```python\n  x = 1\n  ```\nafter", "```python\n  x = 1\n```\nafter"),
        ("- item\n\n[docs](https://pytorch.org)", "- item\n\n[docs](https://pytorch.org)"),
        ("inline ```py x``` fence", "inline `\u200b``py x`\u200b`` fence"),
        ("Hey: ```py\nboom", "Hey: `\u200b``py\nboom"),
    ],
)
def test_to_discord(md: str, discord: str) -> None:
    assert to_discord(md) == discord


def test_no_bank_prompt_or_explanation_loses_a_code_block() -> None:
    """Every fenced block of the bank survives on both platforms, without its language tag on Slack."""
    fenced = [
        text
        for q in shipped_questions()
        for text in (q.spec.prompt, q.spec.explanation)
        if text and "```" in text
    ]
    assert len(fenced) >= 4
    for text in fenced:
        opened = text.count("```") // 2
        assert to_discord(text).count("```") == 2 * opened
        slack = to_slack_mrkdwn(text)
        assert slack.count("```") == 2 * opened
        assert "```python" not in slack and "```py\n" not in slack and "**" not in slack
        assert "\u200b" not in to_discord(text)
