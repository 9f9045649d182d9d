"""The deck generated from the shipped bank (issue 28 §1): enough cards on every topic, each one's back
taken from its question's verified answer and explanation, fronts on one line, every text bounded."""

from __future__ import annotations

import functools
from collections import Counter

import pytest

from bot.core.deck import (
    DECK_KINDS,
    FAMILY_CARDS,
    MAX_BACK,
    MAX_FRONT,
    DeckCard,
    deck_card,
    deck_question_ids,
    front_of,
    one_line,
    spread,
    why_of,
)
from bot.core.models import Choice, Question
from bot.storage.mapping import question_from_version
from bot.storage.models import QuestionVersionRow
from questions.schema import TOPICS
from tests.shipped import shipped_questions


@functools.cache
def _bank() -> dict[str, Question]:
    """The shipped bank's active questions as the domain questions the service reads."""
    out = {}
    for i, loaded in enumerate(shipped_questions(), start=1):
        spec = loaded.spec
        if spec.retired:
            continue
        row = QuestionVersionRow(
            id=i,
            question_id=spec.id,
            version=1,
            kind=str(spec.kind),
            topic=spec.topic,
            difficulty=str(spec.difficulty),
            spec=spec.model_dump(mode="json", exclude_none=True),
        )
        out[spec.id] = question_from_version(row)
    return out


@functools.cache
def _deck() -> dict[str, tuple[Question, DeckCard]]:
    bank = _bank()
    ids = deck_question_ids((q.id, q.kind) for q in bank.values())
    deck = {}
    for qid in ids:
        card = deck_card(bank[qid])
        assert card is not None, f"{qid}: a deck question makes no card"
        deck[qid] = (bank[qid], card)
    return deck


def test_at_least_400_cards_across_all_14_topics() -> None:
    deck = _deck()
    per_topic = Counter(q.topic for q, _ in deck.values())
    assert len(deck) >= 400, per_topic
    assert set(per_topic) == set(TOPICS), f"topics without a card: {set(TOPICS) - set(per_topic)}"
    assert min(per_topic.values()) >= 8, per_topic


def test_every_base_question_and_every_family_has_a_card() -> None:
    bank, deck = _bank(), _deck()
    base = {qid for qid, q in bank.items() if "/" not in qid and q.kind in DECK_KINDS}
    assert base <= set(deck), f"base questions without a card: {sorted(base - set(deck))[:5]}"
    families = {qid.split("/")[0] for qid in bank if "/" in qid}
    carded = Counter(qid.split("/")[0] for qid in deck if "/" in qid)
    assert set(carded) == families
    sizes = Counter(qid.split("/")[0] for qid in bank if "/" in qid)
    assert all(carded[f] == min(FAMILY_CARDS, sizes[f]) for f in families)


def test_backs_come_from_the_verified_answer_and_the_explanation() -> None:
    for qid, (q, card) in _deck().items():
        assert "\n" not in card.front and card.front.strip(), qid
        assert len(card.front) <= MAX_FRONT and len(card.back) <= MAX_BACK, qid
        if q.kind == "flashcard":
            assert card.back == one_line(str(q.extra["back"])) or card.back in str(q.extra["back"]), qid
            continue
        if q.kind == "explain":
            assert card.back in one_line(str(q.extra["model_answer"])) or card.back.endswith("…"), qid
            continue
        right = next(c for c in q.choices if c.correct)
        answer, _, why = card.back.partition("\n\nWhy: ")
        assert answer == right.text.strip(), f"{qid}: the back's answer is not the correct choice"
        if q.explanation:
            assert why and why in one_line(q.explanation), f"{qid}: the why is not from the explanation"


def test_generation_is_deterministic() -> None:
    bank = _bank()
    pairs = [(q.id, q.kind) for q in bank.values()]
    assert deck_question_ids(pairs) == deck_question_ids(reversed(pairs))
    q = next(iter(bank.values()))
    assert deck_card(q) == deck_card(q)


def test_spread_picks_first_middle_last() -> None:
    assert spread(list("abcdefg"), 3) == ["a", "d", "g"]
    assert spread(list("ab"), 3) == ["a", "b"]
    assert spread(list("abc"), 1) == ["a"]


def _question(prompt: str, answer: str, explanation: str | None) -> Question:
    return Question(
        version_id=1,
        id="q-hostile",
        version=1,
        kind="conceptual",
        topic="DDP",
        difficulty="advanced",
        prompt=prompt,
        code=None,
        hint=None,
        explanation=explanation,
        time_limit_s=120,
        attempts=2,
        choices=(Choice("A", "wrong", False), Choice("B", answer, True)),
    )


@pytest.mark.parametrize("size", [10, 5000])
def test_hostile_or_long_text_is_bounded_on_one_line_without_control_characters(size: int) -> None:
    prompt = (
        "Setting \u202e reversed\x00 text.\n\n" + "Long context. " * size + "\nWhich\u200b one @everyone?"
    )
    card = deck_card(_question(prompt, "B\x07 answer", "First\u2066 fact. " * size))
    assert card is not None
    assert "\n" not in card.front and len(card.front) <= MAX_FRONT
    assert card.front.endswith("Which one @everyone?"), card.front[-80:]
    for ch in "\u202e\x00\u200b\u2066\x07":
        assert ch not in card.front + card.back
    assert len(card.back) <= MAX_BACK and card.back.startswith("B  answer")


def test_fronts_and_whys_from_fenced_or_empty_text() -> None:
    assert (
        front_of("Run this:\n```python\nprint(1)\n```\nWhat prints?")
        == "Run this: (see the code) What prints?"
    )
    assert why_of(None) == "" and why_of("  \n") == ""
    assert why_of("One.\n\nTwo.") == "One."
