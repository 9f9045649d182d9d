"""Every answer right: the checks ``rankzero questions build`` runs on each instance's answer key.

Two layers, both refusing an instance with its id, what is wrong and how to fix it:

* :func:`key_problems`, the class of structural faults: no choice or several choices keyed correct, a key
  index outside the choices, a keyed answer that is not among the choices, or two choices that render the
  same text to a player (whitespace collapsed, Markdown code and emphasis markers dropped: Discord and Slack
  show `` `torch.float32` `` and ``torch.float32`` alike). It applies to every question, run or computed.
* :func:`cross_check_problems`: for a computed family listed in :mod:`questions.crosschecks`, a second
  derivation written separately from the family's ``value`` formula (a small simulation where one is
  cheap) must land on the keyed choice. A wrong formula then fails the build instead of reaching players:
  ``fam-elastic-keep-batch`` once keyed 2 where the answer is 16, which no choice offered.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bot.core.choice_text import rendered as rendered  # one normalisation for the bank and the game
from questions import crosschecks_choice  # noqa: F401  (registers the model-choice families' derivations)
from questions.crosschecks import CROSS_CHECKS
from questions.rules import Answer

LETTERS = "ABCDEF"


def _letter(index: int) -> str:
    return LETTERS[index] if 0 <= index < len(LETTERS) else f"#{index}"


def key_problems(
    choices: Sequence[Mapping[str, Any]], *, key: int | None = None, answer: str | None = None
) -> list[str]:
    """What is wrong with a question's answer key; empty when it is sound.

    ``choices``: ``{text, correct}`` items in the order shown. ``key``: the keyed index when the caller
    holds one (a correction by letter, a build record); otherwise the choice marked ``correct`` is the key.
    ``answer``: the answer the key must show (a formula's value, the runner's output), when known.
    """
    problems: list[str] = []
    texts = [str(c.get("text", "")) for c in choices]
    marked = [i for i, c in enumerate(choices) if c.get("correct")]
    if key is not None and not 0 <= key < len(choices):
        problems.append(
            f"the key index {key} is out of range: there are {len(choices)} choices "
            f"(A-{_letter(len(choices) - 1)}); key one of them"
        )
        key = None
    if key is None:
        if len(marked) != 1:
            problems.append(
                f"{len(marked)} choices are keyed correct "
                f"({', '.join(_letter(i) for i in marked) or 'none'}): mark exactly one choice correct"
            )
        else:
            key = marked[0]
    elif marked and marked != [key]:
        problems.append(
            f"the key is {_letter(key)} but the choices mark "
            f"{', '.join(_letter(i) for i in marked)} correct: make them agree"
        )
    if answer is not None and key is not None and rendered(texts[key]) != rendered(answer):
        where = next((i for i, t in enumerate(texts) if rendered(t) == rendered(answer)), None)
        if where is None:
            problems.append(
                f"the keyed answer {answer!r} is not among the choices "
                f"({', '.join(repr(t) for t in texts)}): the key {_letter(key)} is {texts[key]!r}; "
                "add the answer as the correct choice"
            )
        else:
            problems.append(
                f"the answer {answer!r} is choice {_letter(where)}, but {_letter(key)} ({texts[key]!r}) is "
                "keyed correct: key the answer"
            )
    seen: dict[str, int] = {}
    for i, text in enumerate(texts):
        shown = rendered(text)
        if shown in seen:
            problems.append(
                f"choices {_letter(seen[shown])} and {_letter(i)} render the same text ({shown!r}) once "
                "whitespace and Markdown markers are normalised: drop one, or word them so a player can tell "
                "them apart"
            )
        else:
            seen[shown] = i
    return problems


def _printed(value: float | int | str, answer_format: str | None, unit: str) -> dict[str, None]:
    """The ways the family could print ``value`` (an ordered set, the usual one first).

    A formula that multiplies ints gives an int, which prints without ``answer_format`` ("28 GB"), while a
    derivation may reach the same number as a float ("28.00 GB"): both are the same answer.
    """
    if isinstance(value, str):
        return {rendered(value): None}
    forms: list[float | int] = [value]
    if isinstance(value, float) and value.is_integer():
        forms.append(int(value))
    elif isinstance(value, int):
        forms.append(float(value))
    return {rendered(Answer.from_value(v, answer_format, unit).text): None for v in forms}


def cross_check_problems(
    family_id: str,
    context: Mapping[str, Any],
    choices: Sequence[Mapping[str, Any]],
    answer_format: str | None,
    unit: str,
) -> list[str] | None:
    """Check an instance against its family's independent derivation; ``None`` when the family has none.

    The derivation's value is printed exactly as the family prints its answer (``answer_format`` and
    ``unit``), and must be the keyed choice.
    """
    check = CROSS_CHECKS.get(family_id)
    if check is None:
        return None
    try:
        value = check.derive(context)
    except Exception as exc:  # a renamed parameter, a bad value: this family's problem, not the build's
        return [
            f"its cross-check could not run ({type(exc).__name__}: {exc}): fix the family's params or "
            f"its derivation in questions/crosschecks.py"
        ]
    printed = _printed(value, answer_format, unit)
    marked = [i for i, c in enumerate(choices) if c.get("correct")]
    if len(marked) != 1:
        return []  # key_problems reports it
    key = marked[0]
    keyed = str(choices[key].get("text", ""))
    if rendered(keyed) in printed:
        return []
    texts = [str(c.get("text", "")) for c in choices]
    where = next((i for i, t in enumerate(texts) if rendered(t) in printed), None)
    text = next(iter(printed))
    found = (
        f"choice {_letter(where)}, not the keyed {_letter(key)}"
        if where is not None
        else f"not among the choices ({', '.join(repr(t) for t in texts)})"
    )
    return [
        f"the independent check ({check.how}) gives {text!r}, which is {found}; the family keys "
        f"{keyed!r}: fix the family's value formula (or questions/crosschecks.py) until they agree"
    ]
