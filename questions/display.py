"""What a question must fit to be shown whole on every chat platform (issue 25).

The renderers never cut a question's text: long code, choices, hints and explanations go on in further
Discord embed fields or Slack sections, cut at line ends. Two things still cannot be shown whole, and the
bank refuses them when it is read (file:line and the limit, like every other bank error):

- a question whose shown text is over what one Discord message holds. A problem is one ephemeral message
  that is edited as it is played (prompt, code, choices, hint, the feedback and, once it is over, the
  explanation), and all the embeds of a message share 6000 characters (Discord, "Embed Limits":
  https://discord.com/developers/docs/resources/message#embed-object-embed-limits). The practice quiz's
  feedback shows the explanation with every choice and its note in one message too.
  :data:`DISPLAY_BUDGET` keeps 1000 of the 6000 for titles, field names, the fences and marks a long
  text needs when it is cut into 1024-character fields, the feedback line and the footer.
- a line of code longer than one Discord field (1024 characters with its code fence): it would be cut
  in the middle of the line. Slack's sections hold 3000 (https://api.slack.com/reference/block-kit/blocks#section)
  and a modal 100 blocks, so what fits Discord fits Slack.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

__all__ = ["DISPLAY_BUDGET", "MAX_CODE_LINE", "display_problems", "invisible_problems"]

#: The most characters of shown text in one question: Discord's 6000 per message less 1000 for markup.
DISPLAY_BUDGET = 5000
#: The longest line of code: Discord's 1024 per field less the fence (```` ```py\n ```` and ```` \n``` ````)
#: and room for the zero-width spaces that keep backtick runs inside the code inert.
MAX_CODE_LINE = 1000


#: Characters a question may not contain, by what they do: the text-direction marks, embeddings,
#: overrides and isolates reorder what a player reads (the "Trojan Source" trick: code that reads one way
#: and runs another), the zero-width ones hide text or split a word invisibly. Player names refuse the
#: same text-direction characters (bot/core/models.py).
_INVISIBLE = {
    "text-direction": re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"),
    "zero-width": re.compile("[\u200b-\u200d\u2060-\u2064\ufeff]"),
}


def invisible_problems(texts: Mapping[str, str | None]) -> list[str]:
    """The text-direction and zero-width characters in ``texts`` (field name -> text), one message per
    field, naming the character, and where it is in the field (line and column); empty when none.
    """
    problems: list[str] = []
    for name, text in texts.items():
        if not text:
            continue
        for what, pattern in _INVISIBLE.items():
            if found := pattern.search(text):
                line = text.count("\n", 0, found.start()) + 1
                column = found.start() - (text.rfind("\n", 0, found.start()) + 1) + 1
                # The field's name in quotes (the loader reports the error at that field's line).
                head, bracket, rest = name.partition("[")
                code = f"U+{ord(found.group()):04X}"
                problems.append(
                    f"'{head}'{bracket}{rest} contains the invisible {what} character {code} (line "
                    f"{line}, column {column} of the field): it would be shown to players as it is, hiding "
                    "or reordering text; remove it"
                )
                break
    return problems


def display_problems(
    *,
    prompt: str | None,
    code: str | None,
    hint: str | None,
    explanation: str | None,
    choices: Sequence[tuple[str, str | None]] = (),
    front: str | None = None,
    back: str | None = None,
    model_answer: str | None = None,
) -> list[str]:
    """Why a question cannot be shown whole on every platform, one message per problem (empty: it can).

    ``choices`` are (text, feedback) pairs. Each message names the field it is about in quotes, so the
    loader reports it at that field's line.
    """
    problems: list[str] = []
    for number, line in enumerate((code or "").split("\n"), start=1):
        if len(line) > MAX_CODE_LINE:
            problems.append(
                f"'code' line {number} of the snippet is {len(line)} characters, over {MAX_CODE_LINE}: "
                "a Discord embed field holds 1024 with its code fence, and a longer line would be cut in "
                "the middle; break it over several lines"
            )
    texts = {
        "prompt": prompt,
        "code": code,
        "hint": hint,
        "explanation": explanation,
        "front": front,
        "back": back,
        "model_answer": model_answer,
    }
    shown = sum(len(text or "") for text in texts.values())
    shown += sum(len(text) + len(feedback or "") for text, feedback in choices)
    if shown > DISPLAY_BUDGET:
        longest = max((name for name in texts if texts[name]), key=lambda name: len(texts[name] or ""))
        problems.append(
            f"the question shows {shown} characters in all (prompt, code, choices and their feedback, hint, "
            f"explanation), over {DISPLAY_BUDGET}: a Discord message holds 6000 characters in its embeds, "
            f"which the problem and its explanation must share; shorten it, starting with '{longest}' "
            f"({len(texts[longest] or '')} characters)"
        )
    return problems
