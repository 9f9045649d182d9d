"""How a choice reads to a player: the one normalisation the bank and the game compare choices by.

The bank refuses two choices of a question that render alike (questions/answer_key.py re-exports
:func:`rendered` for that), and an answer correction maps each past attempt to the text its player chose
through this same function, so a reordered or re-marked-up choice is still recognised as the same choice.
"""

from __future__ import annotations

import re

# Markdown that changes how a choice looks, not what it says: paired inline-code ticks and bold/italic
# asterisks around text (`x`, *x*, **x**). A lone or inner `*` is content (`2**3`, `a * b`), and
# underscores stay (identifiers such as weights_only carry them).
_MARKUP = re.compile(r"(`+)(.+?)\1|(?<![\w*])(\*{1,3})(?=\S)(.+?)(?<=\S)\3(?![\w*])")


def rendered(text: str) -> str:
    """The text a player reads for a choice: Markdown code/emphasis markers dropped, whitespace collapsed."""
    for _ in range(4):  # nested markers (**`x`**) peel one layer a pass
        peeled = _MARKUP.sub(_inner, text)
        if peeled == text:
            break
        text = peeled
    return " ".join(text.split())


def _inner(match: re.Match[str]) -> str:
    return match.group(2) if match.group(2) is not None else match.group(4)
