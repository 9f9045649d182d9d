"""The flashcard deck drawn from the question bank (issue 28): which questions are cards, and each card's
front and back, generated deterministically from the question's own verified answer and explanation.

Why generated, not written: the bank's answers are verified (a ``predict_output`` family instance's answer
is what the runner printed; a formula family's is computed and tested against published values), and its
explanations are reviewed. A card derived from them says nothing the bank does not, so it cannot drift
from the question it teaches, and a correction of the question corrects its card.

Which questions are cards (:func:`deck_question_ids`):

- every base question (one written by hand, not a family instance) of a multiple-choice kind: its key
  fact is its answer and the why is its explanation;
- every bank flashcard, front and back as written;
- every explain prompt: the prompt, and the model answer as the back;
- per family, a few instances spread over its parameters (:data:`FAMILY_CARDS`): the family's experience
  (what changes with the parameters) needs more than one instance to be seen.

A card's front is a question on one line, its back the answer and the why, both bounded and free of
control and text-direction characters; the renderers escape them for each chat (they are shown as text,
never as markup).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from bot.core.models import Question
from bot.core.vocabulary import MULTIPLE_CHOICE_KINDS, Kind

#: The longest front (one line): a chat preview line, long enough for a prompt with its setting.
MAX_FRONT = 600
#: The longest "why" taken from an explanation: its first sentences, the key fact.
MAX_WHY = 700
#: The longest back (answer and why).
MAX_BACK = 1500
#: Cards per family: instances spread over its parameters (first, middle, last in id order).
FAMILY_CARDS = 3
#: The kinds a card is drawn from.
DECK_KINDS: frozenset[str] = frozenset({*MULTIPLE_CHOICE_KINDS, Kind.FLASHCARD, Kind.EXPLAIN})

_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`(\"'*])")
_FENCE = re.compile(r"```.*?(```|$)", re.S)


@dataclass(frozen=True)
class DeckCard:
    """A card's text: ``front`` a question on one line, ``back`` the answer and the why."""

    front: str
    back: str


def family_of(question_id: str) -> str:
    """The family of a question id: the part before '/' for a family instance, else the id itself."""
    return question_id.split("/", 1)[0]


def deck_question_ids(questions: Iterable[tuple[str, str]]) -> list[str]:
    """The ids of the questions that are cards, from (question id, kind) pairs of the active bank;
    sorted, deterministic.
    """
    base: list[str] = []
    families: dict[str, list[str]] = defaultdict(list)
    for qid, kind in questions:
        if kind not in DECK_KINDS:
            continue
        if "/" in qid:
            families[family_of(qid)].append(qid)
        else:
            base.append(qid)
    chosen = set(base)
    for instances in families.values():
        chosen.update(spread(sorted(instances), FAMILY_CARDS))
    return sorted(chosen)


def spread(items: list[str], n: int) -> list[str]:
    """At most ``n`` of ``items`` spread evenly from first to last (all of them when there are few)."""
    if len(items) <= n:
        return items
    if n == 1:
        return items[:1]
    return [items[round(i * (len(items) - 1) / (n - 1))] for i in range(n)]


def _clean(text: str) -> str:
    return _CONTROL.sub(" ", text)


def one_line(text: str) -> str:
    """``text`` on one line: whitespace (newlines included) collapsed, control characters dropped."""
    return " ".join(_clean(text).split())


def _bounded(text: str, limit: int) -> str:
    """``text`` whole when it fits, else its first sentences that fit, else cut at a word with '…'."""
    if len(text) <= limit:
        return text
    kept = ""
    for sentence in _SENTENCE_END.split(text):
        candidate = f"{kept} {sentence}".strip()
        if len(candidate) > limit:
            break
        kept = candidate
    if kept:
        return kept
    return text[: limit - 1].rsplit(" ", 1)[0].rstrip() + "…"


def front_of(prompt: str) -> str:
    """A prompt as a question on one line: the whole prompt when it fits, else its sentences from the
    last question mark back as far as they fit (the setting just before the question matters most).
    """
    text = one_line(_FENCE.sub(" (see the code) ", prompt))
    if len(text) <= MAX_FRONT:
        return text
    sentences = _SENTENCE_END.split(text)
    asks = [i for i, s in enumerate(sentences) if s.rstrip().endswith("?")]
    end = asks[-1] if asks else len(sentences) - 1
    kept = sentences[end]
    for sentence in reversed(sentences[:end]):
        if len(sentence) + 1 + len(kept) > MAX_FRONT:
            break
        kept = f"{sentence} {kept}"
    return _bounded(kept, MAX_FRONT)


def why_of(explanation: str | None) -> str:
    """The key fact of an explanation: its first paragraph's opening sentences, bounded, one line."""
    if not explanation or not explanation.strip():
        return ""
    first = next(p for p in re.split(r"\n\s*\n", explanation.strip()) if p.strip())
    return _bounded(one_line(_FENCE.sub(" ", first)), MAX_WHY)


def deck_card(question: Question) -> DeckCard | None:
    """The card of one question version: None for a kind that makes no card or a question lacking
    what a card needs (a multiple-choice question always has its one correct choice).
    """
    if question.kind == Kind.FLASHCARD:
        front, back = question.extra.get("front"), question.extra.get("back")
        if not front or not back:
            return None
        return DeckCard(_bounded(one_line(str(front)), MAX_FRONT), _bounded(_clean(str(back)), MAX_BACK))
    if question.kind == Kind.EXPLAIN:
        answer = str(question.extra.get("model_answer") or "")
        if not answer.strip():
            return None
        return DeckCard(front_of(question.prompt), _bounded(one_line(answer), MAX_BACK))
    if question.kind not in MULTIPLE_CHOICE_KINDS:
        return None
    right = next((c for c in question.choices if c.correct), None)
    if right is None:
        return None
    answer = _clean(right.text).strip()
    why = why_of(question.explanation)
    back = f"{answer}\n\nWhy: {why}" if why else answer
    if len(back) > MAX_BACK:  # a long answer (multi-rank output) keeps the answer whole, the why shortens
        back = f"{answer}\n\nWhy: {_bounded(why, max(0, MAX_BACK - len(answer) - 7))}" if why else answer
    return DeckCard(front_of(question.prompt), back[:MAX_BACK])
